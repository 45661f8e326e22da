import Testing
@testable import HTTPWire

private func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

/// Feeds `input` in the given slices and collects every event until the parser wants more.
private func parseAll(_ input: [UInt8], slice: Int = Int.max,
                      limit: Int = 1 << 20, maxHeader: Int = 16 * 1024) throws -> [HTTPParserEvent] {
    var parser = HTTPRequestParser(maxHeaderBytes: maxHeader, bodyLimit: { _ in limit })
    var events: [HTTPParserEvent] = []
    var i = 0
    repeat {
        let end = min(input.count, i + slice)
        parser.append(input[i..<end])
        i = end
        while let e = try parser.next() { events.append(e) }
    } while i < input.count
    return events
}

private func requests(_ events: [HTTPParserEvent]) -> [HTTPRequest] {
    events.compactMap { if case .request(let r) = $0 { return r } else { return nil } }
}

private func parseError(_ input: String, limit: Int = 1 << 20, maxHeader: Int = 16 * 1024) -> HTTPParseError? {
    do { _ = try parseAll(bytes(input), limit: limit, maxHeader: maxHeader); return nil }
    catch let e as HTTPParseError { return e }
    catch { return nil }
}

@Suite("HTTP request parser")
struct HTTPRequestParserTests {
    let post = "POST /api/conversations/c1/turns?x=1 HTTP/1.1\r\nHost: a\r\nIdempotency-Key: k1\r\nContent-Length: 5\r\n\r\nhello"
    let get = "GET /api/health HTTP/1.1\r\nHost: a\r\n\r\n"

    @Test func parsesOneRequestWithBodyAndQuery() throws {
        let rs = requests(try parseAll(bytes(post)))
        #expect(rs.count == 1)
        let r = try #require(rs.first)
        #expect(r.method == "POST")
        #expect(r.path == "/api/conversations/c1/turns")
        #expect(r.query == "x=1")
        #expect(r.headers["idempotency-key"] == "k1")
        #expect(r.body == bytes("hello"))
        #expect(r.keepAlive)
    }

    @Test func pipelinedRequestsComeOutInOrder() throws {
        let stream = bytes(post + get + String(post.dropLast(5)) + "world" + get)
        let rs = requests(try parseAll(stream))
        #expect(rs.map(\.method) == ["POST", "GET", "POST", "GET"])
        #expect(rs[0].body == bytes("hello"))
        #expect(rs[2].body == bytes("world"))
        #expect(rs[1].body.isEmpty)
    }

    @Test(arguments: [1, 2, 3, 7, 64])
    func byteAtATimeEqualsAllAtOnce(slice: Int) throws {
        let stream = bytes(post + get + "POST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nX-T: 1\r\n\r\n" + get)
        let whole = try parseAll(stream)
        let sliced = try parseAll(stream, slice: slice)
        #expect(whole == sliced)
        #expect(requests(sliced).count == 4)
        #expect(requests(sliced)[2].body == bytes("abcde"))
    }

    @Test func partialRequestYieldsNothingAndIsNotIdle() throws {
        var p = HTTPRequestParser()
        p.append(bytes("POST /x HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc"))
        #expect(try p.next() == nil)
        #expect(!p.isIdle)
        p.append(bytes("defghij"))
        guard case .request(let r)? = try p.next() else { Issue.record("no request"); return }
        #expect(r.body.count == 10)
        #expect(p.isIdle)
    }

    @Test func headersOverLimitAre431EvenBeforeTheyEnd() {
        let big = "GET / HTTP/1.1\r\nX-Big: " + String(repeating: "a", count: 17 * 1024)
        #expect(parseError(big)?.status == 431)
        #expect(parseError(big + "\r\n\r\n")?.status == 431)
        // Exactly at the limit is fine.
        let head = "GET / HTTP/1.1\r\nX: "
        let fill = 100 - head.utf8.count - 4
        #expect(parseError(head + String(repeating: "b", count: fill) + "\r\n\r\n", maxHeader: 100) == nil)
        #expect(parseError(head + String(repeating: "b", count: fill + 1) + "\r\n\r\n", maxHeader: 100)?.status == 431)
    }

    @Test func bodyOverRouteLimitIs413BeforeTheBodyArrives() {
        let e = parseError("PUT /api/blobs/x HTTP/1.1\r\nContent-Length: 1001\r\n\r\n", limit: 1000)
        #expect(e?.status == 413)
        #expect(e?.code == "body_too_large")
        #expect(parseError("PUT /x HTTP/1.1\r\nContent-Length: 1000\r\n\r\n" + String(repeating: "z", count: 1000), limit: 1000) == nil)
    }

    @Test func bodyLimitIsAskedPerRoute() throws {
        var p = HTTPRequestParser(bodyLimit: { $0.path.hasPrefix("/api/blobs/") ? 100 : 5 })
        p.append(bytes("PUT /api/blobs/a HTTP/1.1\r\nContent-Length: 50\r\n\r\n" + String(repeating: "x", count: 50)))
        #expect(try p.next() != nil)
        p.append(bytes("POST /api/t HTTP/1.1\r\nContent-Length: 6\r\n\r\n"))
        #expect(throws: HTTPParseError.self) { try p.next() }
    }

    @Test(arguments: ["-1", "abc", "1e3", "+5", "0x10", "", "99999999999999999999", "5 5"])
    func badContentLengthIs400(value: String) {
        let e = parseError("POST /x HTTP/1.1\r\nContent-Length: \(value)\r\n\r\nhello")
        #expect(e?.status == 400, "Content-Length \(value)")
    }

    @Test func duplicateContentLength() {
        #expect(parseError("POST /x HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!")?.status == 400)
        #expect(parseError("POST /x HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello") == nil)
        #expect(parseError("POST /x HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\nhello") == nil)
    }

    @Test func chunkedBodiesAreDecodedAndLimited() throws {
        let chunked = "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\na\r\n0123456789\r\n1\r\n!\r\n0\r\n\r\n"
        let r = try #require(requests(try parseAll(bytes(chunked))).first)
        #expect(r.body == bytes("0123456789!"))
        #expect(parseError(chunked, limit: 10)?.status == 413)
        #expect(parseError("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")?.status == 400)
        #expect(parseError("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n")?.status == 400)
    }

    @Test func otherTransferCodingsAreRejectedClearly() {
        let e = parseError("POST /x HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n")
        #expect(e?.status == 501)
        #expect(e?.code == "unsupported_transfer_encoding")
        #expect(parseError("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n")?.status == 400)
    }

    @Test(arguments: [
        "hello\r\n\r\n",
        "GET\r\n\r\n",
        "GET /x HTTP/1.1 extra\r\n\r\n",
        "GET x HTTP/1.1\r\n\r\n",
        "G(T / HTTP/1.1\r\n\r\n",
        "GET / FTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nNoColon\r\n\r\n",
        "GET / HTTP/1.1\r\nBad Name: v\r\n\r\n",
        "GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",
        "GET / HTTP/1.1\nA: b\r\n\r\n",
        "\u{16}\u{03}\u{01}\u{02}\u{00}\u{01}\u{00}\u{01}\u{fc}\u{03}\u{03}\r\n\r\n",
    ])
    func garbageIs400(input: String) {
        #expect(parseError(input)?.status == 400, "\(input.debugDescription)")
    }

    @Test func unknownVersionIs505AndBadExpectIs417() {
        #expect(parseError("GET / HTTP/2.0\r\n\r\n")?.status == 505)
        #expect(parseError("POST / HTTP/1.1\r\nExpect: magic\r\nContent-Length: 1\r\n\r\nx")?.status == 417)
    }

    @Test func errorIsSticky() {
        var p = HTTPRequestParser()
        p.append(bytes("junk junk\r\n\r\n"))
        #expect(throws: HTTPParseError.self) { try p.next() }
        p.append(bytes(get))
        #expect(throws: HTTPParseError.self) { try p.next() }
    }

    @Test func expectContinueIsAnnouncedOnceBeforeTheBody() throws {
        var p = HTTPRequestParser()
        p.append(bytes("PUT /b HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n"))
        guard case .continueExpected(let head)? = try p.next() else { Issue.record("no continue"); return }
        #expect(head.path == "/b")
        #expect(try p.next() == nil)
        p.append(bytes("abc"))
        guard case .request(let r)? = try p.next() else { Issue.record("no request"); return }
        #expect(r.body == bytes("abc"))
        // Body already there: no interim response needed.
        let events = try parseAll(bytes("PUT /b HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc"))
        #expect(events.count == 1)
    }

    @Test func keepAliveRules() throws {
        func ka(_ s: String) throws -> Bool { try #require(requests(try parseAll(bytes(s))).first).keepAlive }
        #expect(try ka("GET / HTTP/1.1\r\n\r\n"))
        #expect(try !ka("GET / HTTP/1.1\r\nConnection: close\r\n\r\n"))
        #expect(try !ka("GET / HTTP/1.0\r\n\r\n"))
        #expect(try ka("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"))
    }

    @Test func leadingEmptyLinesAreTolerated() throws {
        #expect(requests(try parseAll(bytes("\r\n\r\n" + get))).count == 1)
    }
}

@Suite("HTTP response encoder")
struct HTTPResponseTests {
    @Test func encodesInOneBufferWithLengthAndConnection() {
        var h = HTTPHeaders()
        h.add("Content-Type", "application/json")
        h.add("Content-Length", "999")  // replaced by the real length
        let out = String(decoding: HTTPResponse(status: 201, headers: h, body: bytes("{}")).encoded(keepAlive: true), as: UTF8.self)
        #expect(out == "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\n{}")
    }

    @Test func headKeepsLengthDropsBody() {
        let out = String(decoding: HTTPResponse(status: 200, body: bytes("abc")).encoded(keepAlive: false, omitBody: true), as: UTF8.self)
        #expect(out == "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\n")
    }

    @Test func encodedResponseParsesBackAsOneMessage() throws {
        // Round trip through the request parser's framing by re-labelling the status line.
        let body = Array(repeating: UInt8(ascii: "q"), count: 300)
        let wire = HTTPResponse(status: 200, body: body).encoded(keepAlive: true)
        let firstCR = try #require(wire.firstIndex(of: 13))
        let asRequest = bytes("PUT / HTTP/1.1") + wire[firstCR...]
        let r = try #require(requests(try parseAll(asRequest)).first)
        #expect(r.body == body)
    }
}
