import Testing
@testable import HTTPWire

/// Feeds `input` in slices of `slice` bytes, then (if `eof`) ends the stream.
private func parse(_ input: String, method: String = "GET", slice: Int = Int.max, eof: Bool = false) throws(HTTPResponseParseError) -> HTTPReceivedResponse? {
    var p = HTTPResponseParser(requestMethod: method)
    let bytes = Array(input.utf8)
    var i = 0
    repeat {
        let end = min(bytes.count, i + slice)
        p.append(bytes[i..<end])
        i = end
        if let r = try p.next() { return r }
    } while i < bytes.count
    return eof ? try p.finish() : nil
}

private func failure(_ input: String, method: String = "GET", eof: Bool = true) -> HTTPResponseParseError? {
    do { _ = try parse(input, method: method, eof: eof); return nil } catch { return error }
}

@Suite("HTTP response parser")
struct HTTPResponseParserTests {
    let ok = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"a\":\"xyz\"}"

    @Test func statusLineHeadersAndContentLength() throws {
        for slice in [1, 3, 7, Int.max] {
            let r = try #require(try parse(ok, slice: slice))
            #expect(r.head.status == 200)
            #expect(r.head.minorVersion == 1)
            #expect(r.head.headers["content-type"] == "application/json")
            #expect(String(decoding: r.body, as: UTF8.self) == "{\"a\":\"xyz\"}")
            #expect(r.reusable)
        }
    }

    @Test func emptyReasonAndRepeatedHeaders() throws {
        let r = try #require(try parse("HTTP/1.1 404 \r\nX-A: 1\r\nx-a: 2\r\nContent-Length: 0\r\n\r\n"))
        #expect(r.head.status == 404)
        #expect(r.head.headers.values("X-A") == ["1", "2"])
        #expect(r.body.isEmpty)
    }

    @Test func waitsForTheWholeBody() throws {
        #expect(try parse("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabc") == nil)
        let e = failure("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabc")
        #expect(e?.truncated == true)
    }

    @Test func chunkedBodyWithExtensionsAndTrailers() throws {
        let input = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-Trailer: t\r\n\r\n"
        for slice in [1, 2, 5, Int.max] {
            let r = try #require(try parse(input, slice: slice))
            #expect(String(decoding: r.body, as: UTF8.self) == "Wikipedia in\r\n\r\nchunks.")
            #expect(r.reusable)
        }
        #expect(failure("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")?.truncated == false)
        #expect(failure("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n")?.truncated == false)
        #expect(failure("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab")?.truncated == true)
    }

    @Test func connectionCloseAndBodyToTheClose() throws {
        let closing = try #require(try parse("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi"))
        #expect(!closing.reusable)
        // No length: the body runs until the server closes, and the connection cannot be reused.
        #expect(try parse("HTTP/1.1 200 OK\r\n\r\nstream") == nil)
        let toClose = try #require(try parse("HTTP/1.1 200 OK\r\n\r\nstream", eof: true))
        #expect(String(decoding: toClose.body, as: UTF8.self) == "stream")
        #expect(!toClose.reusable)
        // HTTP/1.0 closes unless it says keep-alive.
        #expect(try parse("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")?.reusable == false)
        #expect(try parse("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n")?.reusable == true)
        // Bytes after the response: the framing is not to be trusted for another request.
        #expect(try parse("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nab")?.reusable == false)
    }

    @Test func bodylessAnswers() throws {
        let head = try #require(try parse("HTTP/1.1 200 OK\r\nContent-Length: 42\r\n\r\n", method: "HEAD"))
        #expect(head.body.isEmpty && head.reusable)
        #expect(try parse("HTTP/1.1 204 No Content\r\n\r\n")?.body == [])
        #expect(try parse("HTTP/1.1 304 Not Modified\r\n\r\n")?.reusable == true)
    }

    @Test func interimAnswersAreSkipped() throws {
        let r = try #require(try parse("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok", slice: 4))
        #expect(r.head.status == 201)
        #expect(r.body == Array("ok".utf8))
    }

    @Test func garbage() {
        #expect(failure("SSH-2.0-OpenSSH_9.6\r\n", eof: false)?.truncated == false)
        #expect(failure("HTTP/2 200\r\n\r\n")?.truncated == false)
        #expect(failure("HTTP/1.1 2000 OK\r\n\r\n")?.truncated == false)
        #expect(failure("HTTP/1.1 200 OK\r\nno colon here\r\n\r\n")?.truncated == false)
        #expect(failure("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n")?.truncated == false)
        #expect(failure("HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\nab")?.truncated == false)
        #expect(failure("")?.truncated == true)
        #expect(failure("HTTP/1.1 200 OK\r\nContent-Le")?.truncated == true)
        var p = HTTPResponseParser(requestMethod: "GET", maxHeaderBytes: 64)
        p.append(Array(("HTTP/1.1 200 OK\r\n" + String(repeating: "X-Pad: 1\r\n", count: 10)).utf8))
        #expect(throws: HTTPResponseParseError.self) { try p.next() }
    }
}
