/// What the parser has for the caller.
public enum HTTPParserEvent: Sendable, Equatable {
    /// A whole request. Pipelined requests come out one per call, in order.
    case request(HTTPRequest)
    /// The head carried `Expect: 100-continue` and its body has not arrived: the caller should
    /// write `HTTP/1.1 100 Continue` (or a final error status) before waiting for the body.
    case continueExpected(HTTPRequestHead)
}

/// An incremental HTTP/1.1 request parser: a pure function of the bytes fed so far.
///
/// Feed any slicing of the byte stream (one byte at a time, many pipelined requests at once) and
/// call `next()` until it returns nil. Limits:
/// - request line + headers (and chunked trailers) over `maxHeaderBytes` → 431;
/// - a body over `bodyLimit(head)` → 413, decided from Content-Length before the body arrives;
/// - negative, non-numeric, overflowing or conflicting Content-Length, or Content-Length together
///   with Transfer-Encoding → 400;
/// - `Transfer-Encoding: chunked` is decoded; any other transfer coding → 501;
/// - `Expect` other than `100-continue` → 417; a version other than HTTP/1.0 or 1.1 → 505;
/// - anything else that is not HTTP → 400.
/// After a thrown error the stream's framing is lost; the parser stays failed.
public struct HTTPRequestParser: Sendable {
    public typealias BodyLimit = @Sendable (HTTPRequestHead) -> Int

    public let maxHeaderBytes: Int
    public let bodyLimit: BodyLimit
    /// Longest accepted chunk-size line (hex size plus extensions).
    public let maxChunkLineBytes = 1024

    private var buffer: [UInt8] = []
    private var start = 0           // first unconsumed byte
    private var scanFrom = 0        // where the search for the end of the head resumes
    private var state: State = .head
    private var failure: HTTPParseError?

    private enum State: Sendable {
        case head
        case fixedBody(head: HTTPRequestHead, length: Int, announcedContinue: Bool)
        case chunkSize(head: HTTPRequestHead, body: [UInt8], limit: Int, announcedContinue: Bool)
        case chunkData(head: HTTPRequestHead, body: [UInt8], limit: Int, remaining: Int)
        case chunkTrailers(head: HTTPRequestHead, body: [UInt8], trailerBytes: Int)
    }

    public init(maxHeaderBytes: Int = 16 * 1024, bodyLimit: @escaping BodyLimit = { _ in 1 << 20 }) {
        self.maxHeaderBytes = maxHeaderBytes
        self.bodyLimit = bodyLimit
    }

    /// Adds received bytes.
    public mutating func append<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        if start > 0 && start >= buffer.count / 2 {
            buffer.removeSubrange(0..<start)
            scanFrom -= start
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// Bytes received but not yet part of a returned request.
    public var bufferedByteCount: Int { buffer.count - start }

    /// True when no request is partly received: a good moment to close an idle connection.
    public var isIdle: Bool {
        if case .head = state { return bufferedByteCount == 0 }
        return false
    }

    /// The next complete request or 100-continue point, nil when more bytes are needed.
    public mutating func next() throws(HTTPParseError) -> HTTPParserEvent? {
        if let failure { throw failure }
        do {
            return try step()
        } catch {
            failure = error
            throw error
        }
    }

    private mutating func step() throws(HTTPParseError) -> HTTPParserEvent? {
        while true {
            switch state {
            case .head:
                // Tolerate empty lines before a request line (RFC 9112 §2.2).
                while bufferedByteCount >= 2 && buffer[start] == 13 && buffer[start + 1] == 10 {
                    start += 2
                }
                if bufferedByteCount == 1 && buffer[start] == 13 { return nil }
                scanFrom = max(scanFrom, start)
                guard let end = findHeadEnd() else {
                    if bufferedByteCount > maxHeaderBytes { throw Self.tooLarge(maxHeaderBytes) }
                    scanFrom = max(start, buffer.count - 3)
                    return nil
                }
                if end - start > maxHeaderBytes { throw Self.tooLarge(maxHeaderBytes) }
                let head = try parseHead(buffer[start..<(end - 4)])
                start = end
                scanFrom = end
                state = try framing(for: head)
            case .fixedBody(let head, let length, let announced):
                if bufferedByteCount >= length {
                    let body = Array(buffer[start..<(start + length)])
                    start += length
                    state = .head
                    return .request(HTTPRequest(head: head, body: body))
                }
                if !announced && expectsContinue(head) {
                    state = .fixedBody(head: head, length: length, announcedContinue: true)
                    return .continueExpected(head)
                }
                return nil
            case .chunkSize(let head, let body, let limit, let announced):
                guard let lineEnd = findCRLF(from: start, within: maxChunkLineBytes) else {
                    if !announced && expectsContinue(head) && bufferedByteCount == 0 && body.isEmpty {
                        state = .chunkSize(head: head, body: body, limit: limit, announcedContinue: true)
                        return .continueExpected(head)
                    }
                    if bufferedByteCount > maxChunkLineBytes {
                        throw .bad("chunk size line longer than \(maxChunkLineBytes) bytes")
                    }
                    return nil
                }
                let size = try parseChunkSize(buffer[start..<lineEnd])
                start = lineEnd + 2
                if size == 0 {
                    state = .chunkTrailers(head: head, body: body, trailerBytes: 0)
                } else {
                    if body.count + size > limit || size > limit { throw Self.bodyTooLarge(limit) }
                    state = .chunkData(head: head, body: body, limit: limit, remaining: size)
                }
            case .chunkData(let head, var body, let limit, let remaining):
                guard bufferedByteCount >= remaining + 2 else { return nil }
                body.append(contentsOf: buffer[start..<(start + remaining)])
                start += remaining
                guard buffer[start] == 13 && buffer[start + 1] == 10 else {
                    throw .bad("chunk data not followed by CRLF")
                }
                start += 2
                state = .chunkSize(head: head, body: body, limit: limit, announcedContinue: true)
            case .chunkTrailers(let head, let body, let trailerBytes):
                // Trailer fields are read and dropped; they count against the header limit.
                guard let lineEnd = findCRLF(from: start, within: maxHeaderBytes - trailerBytes) else {
                    if trailerBytes + bufferedByteCount > maxHeaderBytes { throw Self.tooLarge(maxHeaderBytes) }
                    return nil
                }
                let empty = lineEnd == start
                let used = trailerBytes + (lineEnd - start) + 2
                start = lineEnd + 2
                if empty {
                    state = .head
                    return .request(HTTPRequest(head: head, body: body))
                }
                state = .chunkTrailers(head: head, body: body, trailerBytes: used)
            }
        }
    }

    // MARK: - Framing

    private func framing(for head: HTTPRequestHead) throws(HTTPParseError) -> State {
        if let expect = head.headers["Expect"], expect.trimmingSpaces().lowercased() != "100-continue" {
            throw HTTPParseError(status: 417, code: "expectation_failed",
                                 message: "Expect: \(expect) is not supported; only 100-continue is")
        }
        let limit = bodyLimit(head)
        let encodings = head.headers.values("Transfer-Encoding")
        let lengths = head.headers.values("Content-Length")
        if !encodings.isEmpty {
            if !lengths.isEmpty {
                throw .bad("both Transfer-Encoding and Content-Length were sent; send one")
            }
            let codings = encodings.flatMap { $0.split(separator: ",") }.map { $0.trimmingSpaces().lowercased() }
            guard codings == ["chunked"] else {
                throw HTTPParseError(status: 501, code: "unsupported_transfer_encoding",
                                     message: "Transfer-Encoding \(encodings.joined(separator: ", ")) is not supported; only chunked is")
            }
            return .chunkSize(head: head, body: [], limit: limit, announcedContinue: false)
        }
        guard !lengths.isEmpty else { return .fixedBody(head: head, length: 0, announcedContinue: true) }
        var length: Int?
        for field in lengths {
            for part in field.split(separator: ",", omittingEmptySubsequences: false) {
                let text = part.trimmingSpaces()
                guard let n = Self.parseDecimal(text) else {
                    throw .bad("Content-Length \"\(field)\" is not a non-negative decimal number")
                }
                if let length, length != n {
                    throw .bad("conflicting Content-Length values \(lengths.joined(separator: ", "))")
                }
                length = n
            }
        }
        let n = length ?? 0
        if n > limit { throw Self.bodyTooLarge(limit, announced: n) }
        return .fixedBody(head: head, length: n, announcedContinue: false)
    }

    private func expectsContinue(_ head: HTTPRequestHead) -> Bool {
        head.minorVersion >= 1 && head.headers["Expect"] != nil
    }

    static func parseDecimal(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.utf8.count <= 18 else { return nil }
        var n = 0
        for c in text.utf8 {
            guard c >= 48 && c <= 57 else { return nil }
            n = n * 10 + Int(c - 48)
        }
        return n
    }

    private func parseChunkSize(_ line: ArraySlice<UInt8>) throws(HTTPParseError) -> Int {
        var digits = line
        if let semi = line.firstIndex(of: 59) { digits = line[line.startIndex..<semi] }  // ';' extensions ignored
        while let l = digits.last, l == 32 || l == 9 { digits.removeLast() }
        guard !digits.isEmpty, digits.count <= 15 else {
            throw .bad("chunk size \"\(String(decoding: line, as: UTF8.self))\" is not a hex number")
        }
        var n = 0
        for c in digits {
            let v: Int
            switch c {
            case 48...57: v = Int(c - 48)
            case 65...70: v = Int(c - 55)
            case 97...102: v = Int(c - 87)
            default: throw .bad("chunk size \"\(String(decoding: line, as: UTF8.self))\" is not a hex number")
            }
            n = n * 16 + v
        }
        return n
    }

    // MARK: - Head

    private func findHeadEnd() -> Int? {
        var i = scanFrom
        let end = buffer.count
        while i + 3 < end {
            if buffer[i + 3] != 10 { i += buffer[i + 3] == 13 ? 1 : 4; continue }
            if buffer[i] == 13 && buffer[i + 1] == 10 && buffer[i + 2] == 13 { return i + 4 }
            i += 1
        }
        return nil
    }

    private func findCRLF(from: Int, within: Int) -> Int? {
        var i = from
        let end = min(buffer.count - 1, from + max(within, 0) + 1)
        while i < end {
            if buffer[i] == 13 && buffer[i + 1] == 10 { return i }
            i += 1
        }
        return nil
    }

    private func parseHead(_ bytes: ArraySlice<UInt8>) throws(HTTPParseError) -> HTTPRequestHead {
        var lines: [ArraySlice<UInt8>] = []
        var lineStart = bytes.startIndex
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let c = bytes[i]
            if c == 13 {
                guard i + 1 < bytes.endIndex, bytes[i + 1] == 10 else { throw .bad("bare CR in the request head") }
                lines.append(bytes[lineStart..<i])
                i += 2
                lineStart = i
                continue
            }
            if c == 10 { throw .bad("bare LF in the request head; lines end with CRLF") }
            if c == 0 { throw .bad("NUL byte in the request head") }
            i += 1
        }
        lines.append(bytes[lineStart..<bytes.endIndex])

        // Request line: method SP target SP HTTP/1.x
        let parts = lines[0].split(separator: 32, omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty else {
            throw .bad("request line \"\(Self.show(lines[0]))\" is not METHOD SP TARGET SP HTTP-VERSION")
        }
        guard parts[0].allSatisfy(Self.isTokenChar) else {
            throw .bad("method \"\(Self.show(parts[0]))\" is not a token")
        }
        let version = String(decoding: parts[2], as: UTF8.self)
        let minor: Int
        switch version {
        case "HTTP/1.1": minor = 1
        case "HTTP/1.0": minor = 0
        default:
            if version.hasPrefix("HTTP/") && version.utf8.count == 8 {
                throw HTTPParseError(status: 505, code: "http_version_not_supported",
                                     message: "\(version) is not supported; use HTTP/1.1")
            }
            throw .bad("\"\(Self.show(parts[2]))\" is not an HTTP version")
        }
        guard parts[1].first == 47, parts[1].allSatisfy({ $0 > 32 && $0 < 127 }) else {
            throw .bad("request target \"\(Self.show(parts[1]))\" must start with / and contain no spaces or controls")
        }
        let target = String(decoding: parts[1], as: UTF8.self)
        var path = target
        var query: String?
        if let q = target.firstIndex(of: "?") {
            path = String(target[..<q])
            query = String(target[target.index(after: q)...])
        }

        var headers = HTTPHeaders()
        for line in lines.dropFirst() {
            guard let first = line.first else { continue }
            if first == 32 || first == 9 { throw .bad("obsolete line folding in headers is not accepted") }
            guard let colon = line.firstIndex(of: 58) else {
                throw .bad("header line \"\(Self.show(line))\" has no colon")
            }
            let name = line[line.startIndex..<colon]
            guard !name.isEmpty, name.allSatisfy(Self.isTokenChar) else {
                throw .bad("header name \"\(Self.show(name))\" is not a token")
            }
            let value = line[(colon + 1)...]
            guard value.allSatisfy({ $0 == 9 || ($0 >= 32 && $0 != 127) }) else {
                throw .bad("header \(Self.show(name)) has a control character in its value")
            }
            headers.add(String(decoding: name, as: UTF8.self),
                        String(decoding: value, as: UTF8.self).trimmingSpaces())
        }
        return HTTPRequestHead(method: String(decoding: parts[0], as: UTF8.self), target: target,
                               path: path, query: query, minorVersion: minor, headers: headers)
    }

    static func isTokenChar(_ c: UInt8) -> Bool {
        switch c {
        case 48...57, 65...90, 97...122: return true
        case 33, 35, 36, 37, 38, 39, 42, 43, 45, 46, 94, 95, 96, 124, 126: return true
        default: return false
        }
    }

    static func show<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
        let text = String(decoding: bytes.prefix(80).map { ($0 >= 32 && $0 < 127) ? $0 : 63 }, as: UTF8.self)
        return bytes.count > 80 ? text + "…" : text
    }

    static func tooLarge(_ limit: Int) -> HTTPParseError {
        HTTPParseError(status: 431, code: "headers_too_large",
                       message: "request line and headers exceed \(limit) bytes")
    }

    static func bodyTooLarge(_ limit: Int, announced: Int? = nil) -> HTTPParseError {
        let what = announced.map { "body of \($0) bytes" } ?? "body"
        return HTTPParseError(status: 413, code: "body_too_large",
                              message: "\(what) exceeds the limit of \(limit) bytes for this route")
    }
}
