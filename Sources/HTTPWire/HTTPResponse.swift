/// A response to encode into one buffer, so it leaves in one write (no Nagle/delayed-ACK stall).
public struct HTTPResponse: Sendable, Equatable {
    public var status: Int
    public var headers: HTTPHeaders
    public var body: [UInt8]

    public init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.status = status; self.headers = headers; self.body = body
    }

    /// Status line, headers (with Content-Length and Connection added) and body, in one buffer.
    /// For a HEAD request pass `omitBody`: Content-Length still states the body's size.
    public func encoded(keepAlive: Bool, omitBody: Bool = false) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(128 + headers.fields.count * 32 + (omitBody ? 0 : body.count))
        out.append(contentsOf: "HTTP/1.1 \(status) \(HTTPResponse.reason(for: status))\r\n".utf8)
        for field in headers.fields
        where !asciiCaseInsensitiveEquals(field.name, "Content-Length") && !asciiCaseInsensitiveEquals(field.name, "Connection") {
            out.append(contentsOf: field.name.utf8)
            out.append(contentsOf: ": ".utf8)
            out.append(contentsOf: field.value.utf8)
            out.append(contentsOf: "\r\n".utf8)
        }
        out.append(contentsOf: "Content-Length: \(body.count)\r\n".utf8)
        out.append(contentsOf: (keepAlive ? "Connection: keep-alive\r\n" : "Connection: close\r\n").utf8)
        out.append(contentsOf: "\r\n".utf8)
        if !omitBody { out.append(contentsOf: body) }
        return out
    }

    /// A head without Content-Length for a body that runs until the connection closes
    /// (Server-Sent Events).
    public static func streamingHead(status: Int, headers: HTTPHeaders) -> [UInt8] {
        var out = Array("HTTP/1.1 \(status) \(reason(for: status))\r\n".utf8)
        for field in headers.fields {
            out.append(contentsOf: "\(field.name): \(field.value)\r\n".utf8)
        }
        out.append(contentsOf: "Connection: close\r\n\r\n".utf8)
        return out
    }

    /// `HTTP/1.1 100 Continue`, the interim answer to `Expect: 100-continue`.
    public static let continueBytes: [UInt8] = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

    public static func reason(for status: Int) -> String {
        switch status {
        case 100: return "Continue"
        case 200: return "OK"
        case 201: return "Created"
        case 204: return "No Content"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 408: return "Request Timeout"
        case 409: return "Conflict"
        case 411: return "Length Required"
        case 413: return "Content Too Large"
        case 415: return "Unsupported Media Type"
        case 417: return "Expectation Failed"
        case 422: return "Unprocessable Content"
        case 424: return "Failed Dependency"
        case 429: return "Too Many Requests"
        case 431: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 505: return "HTTP Version Not Supported"
        default: return "Status \(status)"
        }
    }
}
