/// A response's status line and headers.
public struct HTTPResponseHead: Sendable, Equatable {
    public var status: Int
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    public var minorVersion: Int
    public var headers: HTTPHeaders

    /// HTTP/1.1 keeps the connection unless `Connection: close`; HTTP/1.0 closes unless `keep-alive`.
    public var keepAlive: Bool { connectionKeepsAlive(headers, minorVersion: minorVersion) }
}

/// A whole received response (interim 1xx answers skipped), body de-chunked.
public struct HTTPReceivedResponse: Sendable, Equatable {
    public var head: HTTPResponseHead
    public var body: [UInt8]
    /// The connection may carry another request: the body was framed (not read to the close),
    /// the server did not say `Connection: close`, and nothing followed the response.
    public var reusable: Bool
}

/// Why a response could not be read. `truncated`: the stream ended before the response did.
public struct HTTPResponseParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public var truncated: Bool
    public var message: String
    public var description: String { message }
    static func bad(_ m: String) -> HTTPResponseParseError { HTTPResponseParseError(truncated: false, message: m) }
}

/// An incremental HTTP/1.1 response parser for one request: a pure function of the bytes fed
/// so far. `append` bytes as they arrive and call `next()` until it returns the response; at end
/// of stream call `finish()` (a body without Content-Length or chunking runs to the close).
/// Framing follows RFC 9112 §6.3: a HEAD answer, 1xx, 204 and 304 have no body.
public struct HTTPResponseParser: Sendable {
    public let maxHeaderBytes: Int
    public let maxBodyBytes: Int
    private let headRequest: Bool
    private var buffer: [UInt8] = []
    private var start = 0
    private var state: State = .head
    private var failure: HTTPResponseParseError?

    private enum State: Sendable {
        case head
        case fixed(HTTPResponseHead, Int)
        case chunkSize(HTTPResponseHead, [UInt8])
        case chunkData(HTTPResponseHead, [UInt8], Int)
        case trailers(HTTPResponseHead, [UInt8])
        case untilClose(HTTPResponseHead)
        case done
    }

    public init(requestMethod: String, maxHeaderBytes: Int = 64 * 1024, maxBodyBytes: Int = 256 << 20) {
        headRequest = requestMethod.uppercased() == "HEAD"
        self.maxHeaderBytes = maxHeaderBytes
        self.maxBodyBytes = maxBodyBytes
    }

    public mutating func append<C: Collection>(_ bytes: C) where C.Element == UInt8 { buffer.append(contentsOf: bytes) }

    /// The response once it is complete; nil while more bytes are needed.
    public mutating func next() throws(HTTPResponseParseError) -> HTTPReceivedResponse? {
        if let failure { throw failure }
        do { return try step() } catch { failure = error; throw error }
    }

    /// End of stream: the response if it ends here, otherwise an error (`truncated` when the
    /// bytes so far were a valid beginning).
    public mutating func finish() throws(HTTPResponseParseError) -> HTTPReceivedResponse {
        if let r = try next() { return r }
        if case .untilClose(let head) = state {
            state = .done
            return HTTPReceivedResponse(head: head, body: Array(buffer[start...]), reusable: false)
        }
        let what = if case .head = state { "before the end of the response head" } else { "in the middle of the body" }
        throw HTTPResponseParseError(truncated: true, message: "connection closed \(what)")
    }

    private mutating func step() throws(HTTPResponseParseError) -> HTTPReceivedResponse? {
        while true {
            let left = buffer.count - start
            switch state {
            case .head:
                guard let end = find([13, 10, 13, 10], within: maxHeaderBytes) else {
                    if left > maxHeaderBytes { throw .bad("response head longer than \(maxHeaderBytes) bytes") }
                    if left >= 5 && !buffer[start..<(start + 5)].elementsEqual("HTTP/".utf8) { throw .bad("the answer is not HTTP") }
                    return nil
                }
                let head = try parseHead(buffer[start..<end])
                start = end + 4
                if head.status < 200 { continue }   // 100 Continue and other interim answers
                state = try framing(head)
            case .fixed(let head, let length):
                guard left >= length else { return nil }
                return complete(head, Array(buffer[start..<(start + length)]), advance: length)
            case .chunkSize(let head, let body):
                guard let end = find([13, 10], within: 1024) else {
                    if left > 1024 { throw .bad("chunk size line longer than 1024 bytes") }
                    return nil
                }
                var digits = buffer[start..<end]
                if let semi = digits.firstIndex(of: 59) { digits = digits[..<semi] }   // ';' extensions ignored
                guard let size = Int(String(decoding: digits, as: UTF8.self).trimmingSpaces(), radix: 16), size >= 0 else {
                    throw .bad("bad chunk size \"\(HTTPRequestParser.show(buffer[start..<end]))\"")
                }
                guard body.count + size <= maxBodyBytes else { throw .bad("body exceeds \(maxBodyBytes) bytes") }
                start = end + 2
                state = size == 0 ? .trailers(head, body) : .chunkData(head, body, size)
            case .chunkData(let head, var body, let size):
                guard left >= size + 2 else { return nil }
                body.append(contentsOf: buffer[start..<(start + size)])
                guard buffer[start + size] == 13 && buffer[start + size + 1] == 10 else { throw .bad("chunk data not followed by CRLF") }
                start += size + 2
                state = .chunkSize(head, body)
            case .trailers(let head, let body):
                guard let end = find([13, 10], within: maxHeaderBytes) else {
                    if left > maxHeaderBytes { throw .bad("trailers longer than \(maxHeaderBytes) bytes") }
                    return nil
                }
                let empty = end == start
                start = end + 2
                if empty { return complete(head, body, advance: 0) }
            case .untilClose:
                if left > maxBodyBytes { throw .bad("body exceeds \(maxBodyBytes) bytes") }
                return nil
            case .done:
                return nil
            }
        }
    }

    private mutating func complete(_ head: HTTPResponseHead, _ body: [UInt8], advance: Int) -> HTTPReceivedResponse {
        start += advance
        state = .done
        return HTTPReceivedResponse(head: head, body: body, reusable: head.keepAlive && start == buffer.count)
    }

    private func framing(_ head: HTTPResponseHead) throws(HTTPResponseParseError) -> State {
        if headRequest || head.status == 204 || head.status == 304 { return .fixed(head, 0) }
        let codings = head.headers.values("Transfer-Encoding").flatMap { $0.split(separator: ",") }.map { $0.trimmingSpaces().lowercased() }
        if let last = codings.last { return last == "chunked" ? .chunkSize(head, []) : .untilClose(head) }
        let lengths = head.headers.values("Content-Length").flatMap { $0.split(separator: ",", omittingEmptySubsequences: false) }
        guard !lengths.isEmpty else { return .untilClose(head) }
        let values = Set(lengths.map { HTTPRequestParser.parseDecimal($0.trimmingSpaces()) })
        guard values.count == 1, let n = values.first!, n <= maxBodyBytes else {
            throw .bad("bad Content-Length \(head.headers.values("Content-Length").joined(separator: ", "))")
        }
        return .fixed(head, n)
    }

    private func parseHead(_ bytes: ArraySlice<UInt8>) throws(HTTPResponseParseError) -> HTTPResponseHead {
        let lines = bytes.split(separator: 10, omittingEmptySubsequences: false).map { $0.last == 13 ? $0.dropLast() : $0 }
        // Status line: HTTP/1.x SP 3DIGIT SP reason (the reason may be empty).
        let parts = lines[0].split(separator: 32, maxSplits: 2, omittingEmptySubsequences: false)
        let version = String(decoding: parts[0], as: UTF8.self)
        guard parts.count >= 2, version == "HTTP/1.1" || version == "HTTP/1.0", parts[1].count == 3,
              let status = HTTPRequestParser.parseDecimal(Substring(String(decoding: parts[1], as: UTF8.self))), status >= 100 else {
            throw .bad("status line \"\(HTTPRequestParser.show(lines[0]))\" is not HTTP/1.x STATUS REASON")
        }
        var headers = HTTPHeaders()
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: 58), colon > line.startIndex,
                  line[line.startIndex..<colon].allSatisfy(HTTPRequestParser.isTokenChar) else {
                throw .bad("header line \"\(HTTPRequestParser.show(line))\" is not NAME: VALUE")
            }
            headers.add(String(decoding: line[line.startIndex..<colon], as: UTF8.self),
                        String(decoding: line[(colon + 1)...], as: UTF8.self).trimmingSpaces())
        }
        return HTTPResponseHead(status: status, minorVersion: version == "HTTP/1.1" ? 1 : 0, headers: headers)
    }

    /// Index of `needle` at or after `start`, looking no further than `within` bytes.
    private func find(_ needle: [UInt8], within: Int) -> Int? {
        let last = min(buffer.count - needle.count, start + within)
        guard last >= start else { return nil }
        var i = start
        while i <= last {
            if buffer[i] == needle[0] && buffer[i..<(i + needle.count)].elementsEqual(needle) { return i }
            i += 1
        }
        return nil
    }
}

/// The `Connection` rule shared by requests and responses.
func connectionKeepsAlive(_ headers: HTTPHeaders, minorVersion: Int) -> Bool {
    let tokens = headers.values("Connection").flatMap { $0.split(separator: ",") }.map { $0.trimmingSpaces().lowercased() }
    return minorVersion == 0 ? tokens.contains("keep-alive") : !tokens.contains("close")
}
