/// Header fields in arrival order. Names compare case-insensitively (RFC 9110 §5.1).
public struct HTTPHeaders: Sendable, Equatable, Sequence {
    public private(set) var fields: [Field]

    public struct Field: Sendable, Equatable {
        public var name: String
        public var value: String
        public init(name: String, value: String) { self.name = name; self.value = value }
    }

    public init(_ fields: [(String, String)] = []) {
        self.fields = fields.map { Field(name: $0.0, value: $0.1) }
    }

    public mutating func add(_ name: String, _ value: String) {
        fields.append(Field(name: name, value: value))
    }

    /// The first value of a field, or nil.
    public subscript(name: String) -> String? {
        fields.first { asciiCaseInsensitiveEquals($0.name, name) }?.value
    }

    /// Every value of a field, in order.
    public func values(_ name: String) -> [String] {
        fields.filter { asciiCaseInsensitiveEquals($0.name, name) }.map(\.value)
    }

    public func makeIterator() -> IndexingIterator<[Field]> { fields.makeIterator() }
}

func asciiCaseInsensitiveEquals(_ a: String, _ b: String) -> Bool {
    let x = a.utf8, y = b.utf8
    guard x.count == y.count else { return false }
    for (p, q) in zip(x, y) where lowerASCII(p) != lowerASCII(q) { return false }
    return true
}

@inline(__always) func lowerASCII(_ c: UInt8) -> UInt8 { (c >= 65 && c <= 90) ? c + 32 : c }

/// The request line and headers, before the body is known.
public struct HTTPRequestHead: Sendable, Equatable {
    public var method: String
    /// The request target as sent (`/api/turns/abc?x=1`).
    public var target: String
    /// The target up to `?`, still percent-encoded.
    public var path: String
    /// The part after `?`, or nil.
    public var query: String?
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    public var minorVersion: Int
    public var headers: HTTPHeaders

    /// HTTP/1.1 keeps the connection unless `Connection: close`; HTTP/1.0 closes unless `keep-alive`.
    public var keepAlive: Bool { connectionKeepsAlive(headers, minorVersion: minorVersion) }
}

/// A complete request: head plus the whole body (de-chunked if it was chunked).
public struct HTTPRequest: Sendable, Equatable {
    public var head: HTTPRequestHead
    public var body: [UInt8]

    public init(head: HTTPRequestHead, body: [UInt8]) { self.head = head; self.body = body }

    public var method: String { head.method }
    public var path: String { head.path }
    public var query: String? { head.query }
    public var headers: HTTPHeaders { head.headers }
    public var keepAlive: Bool { head.keepAlive }
}

/// Why a request could not be parsed: the status to answer with, a stable code, and a sentence.
/// After any of these the connection's framing is lost: answer, then close.
public struct HTTPParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public var status: Int
    public var code: String
    public var message: String
    public init(status: Int, code: String, message: String) {
        self.status = status; self.code = code; self.message = message
    }
    public var description: String { "\(status) \(code): \(message)" }

    static func bad(_ message: String) -> HTTPParseError {
        HTTPParseError(status: 400, code: "bad_request", message: message)
    }
}

extension Substring {
    func trimmingSpaces() -> Substring {
        var s = self
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return s
    }
}

extension String {
    func trimmingSpaces() -> String { String(Substring(self).trimmingSpaces()) }
}
