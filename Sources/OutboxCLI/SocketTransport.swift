import Foundation
import OutboxSync
#if canImport(Glibc)
import Glibc
#endif

/// HTTP/1.1 over a plain socket for `http://` engines: every wait is a `poll(2)` with the time
/// left, so a process waiting for a silent engine sleeps.
///
/// Why not URLSession: on Linux (swift-corelibs-foundation 6.3, libcurl underneath) a request
/// whose server accepted the connection but does not answer keeps a dispatch write source armed
/// on the idle socket, and the process spins in epoll/poll for the whole timeout (measured: 15 s
/// wall, 14 s CPU). `https://` engines still go through `URLSessionTransport`.
///
/// Keep-alive: idle connections are kept for the next request. A request that fails on a reused
/// connection before any byte of an answer came back is sent once more on a fresh connection
/// (the server may have closed it meanwhile); every engine call is idempotent (turn POSTs carry
/// their Idempotency-Key), so a second send cannot do anything twice.
final class SocketTransport: EngineTransport, @unchecked Sendable {
    let baseURL: String
    let timeout: TimeInterval
    private let host: String
    private let port: UInt16
    private let hostHeader: String
    private let pathPrefix: String
    private let lock = NSLock()
    private var idle: [Int32] = []

    /// nil when `baseURL` is not a plain `http://` URL.
    init?(baseURL: String, timeout: TimeInterval) {
        var b = baseURL
        while b.hasSuffix("/") { b.removeLast() }
        guard let url = URL(string: b), url.scheme?.lowercased() == "http", let host = url.host, !host.isEmpty else { return nil }
        self.baseURL = b
        self.timeout = timeout
        self.host = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        self.port = UInt16(url.port ?? 80)
        self.hostHeader = url.port.map { "\(host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host):\($0)" } ?? host
        self.pathPrefix = url.path == "/" ? "" : url.path
    }

    deinit { for fd in idle { close(fd) } }

    struct Failure: Error {
        var code: Int
        var message: String
        /// Nothing of an answer arrived: safe to try again on a fresh connection.
        var beforeAnswer: Bool
    }

    func send(_ request: HTTPExchangeRequest) throws -> HTTPExchangeResponse {
        let url = baseURL + request.path
        // As URLSession: `timeout` without progress fails a request, and twice it bounds the whole.
        let deadline = Date().addingTimeInterval(timeout * 2)
        let bytes = encode(request)
        if let fd = takeIdle() {
            do { return try exchange(fd, bytes, method: request.method, deadline: deadline) } catch let f as Failure where f.beforeAnswer && f.code != timedOut {
                // The server closed the idle connection; a fresh one below.
            } catch let f as Failure {
                throw TransportError(method: request.method, url: url, code: f.code, message: f.message)
            }
        }
        do {
            let fd = try connect(deadline: min(deadline, Date().addingTimeInterval(timeout)))
            return try exchange(fd, bytes, method: request.method, deadline: deadline)
        } catch let f as Failure {
            throw TransportError(method: request.method, url: url, code: f.code, message: f.message)
        }
    }

    // NSURLErrorDomain codes, so messages read as they did with URLSession.
    let timedOut = -1001
    let cannotFindHost = -1003
    let cannotConnect = -1004
    let connectionLost = -1005

    private func takeIdle() -> Int32? { lock.withLock { idle.popLast() } }

    private func giveBack(_ fd: Int32) {
        let keep: Bool = lock.withLock {
            if idle.count < 8 { idle.append(fd); return true }
            return false
        }
        if !keep { close(fd) }
    }

    private func encode(_ r: HTTPExchangeRequest) -> [UInt8] {
        var head = "\(r.method) \(pathPrefix)\(r.path) HTTP/1.1\r\nHost: \(hostHeader)\r\n"
        for (k, v) in r.headers where k.lowercased() != "content-length" && k.lowercased() != "connection" && k.lowercased() != "host" {
            head += "\(k): \(v)\r\n"
        }
        if let body = r.body { head += "Content-Length: \(body.count)\r\n" }
        else if r.method == "POST" || r.method == "PUT" { head += "Content-Length: 0\r\n" }
        head += "Connection: keep-alive\r\n\r\n"
        return Array(head.utf8) + (r.body ?? [])
    }

    private func millisLeft(_ deadline: Date) -> Int32 {
        Int32(max(0, min(Double(Int32.max), (deadline.timeIntervalSinceNow * 1000).rounded(.up))))
    }

    private func connect(deadline: Date) throws -> Int32 {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0, let first = list else {
            throw Failure(code: cannotFindHost, message: "cannot resolve host \(host)", beforeAnswer: true)
        }
        defer { freeaddrinfo(first) }
        var lastError = Failure(code: cannotConnect, message: "connection refused", beforeAnswer: true)
        var ai: UnsafeMutablePointer<addrinfo>? = first
        while let a = ai {
            ai = a.pointee.ai_next
            let fd = socket(a.pointee.ai_family, a.pointee.ai_socktype, a.pointee.ai_protocol)
            if fd < 0 { continue }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            if Glibc.connect(fd, a.pointee.ai_addr, a.pointee.ai_addrlen) == 0 { return fd }
            guard errno == EINPROGRESS else {
                lastError = connectFailure(errno)
                close(fd)
                continue
            }
            var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            let n = pollRetrying(&p, deadline: deadline)
            if n == 0 {
                close(fd)
                throw Failure(code: timedOut, message: "timed out connecting after \(Int(timeout))s", beforeAnswer: true)
            }
            var err: Int32 = 0
            var len = socklen_t(MemoryLayout<Int32>.size)
            _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len)
            if err == 0 { return fd }
            lastError = connectFailure(err)
            close(fd)
        }
        throw lastError
    }

    private func connectFailure(_ e: Int32) -> Failure {
        switch e {
        case ECONNREFUSED: return Failure(code: cannotConnect, message: "connection refused", beforeAnswer: true)
        case ENETUNREACH, EHOSTUNREACH: return Failure(code: cannotConnect, message: "network unreachable", beforeAnswer: true)
        case ETIMEDOUT: return Failure(code: timedOut, message: "timed out connecting", beforeAnswer: true)
        default: return Failure(code: cannotConnect, message: "cannot connect: \(String(cString: strerror(e)))", beforeAnswer: true)
        }
    }

    /// poll(2) on one descriptor until it is ready or the deadline passes; 0 on timeout.
    private func pollRetrying(_ p: inout pollfd, deadline: Date) -> Int32 {
        while true {
            p.revents = 0
            let n = poll(&p, 1, millisLeft(deadline))
            if n < 0 && errno == EINTR { continue }
            return n < 0 ? 1 : n   // an error shows up on the read or write that follows
        }
    }

    /// Writes the request and reads one whole answer; the connection goes back to the idle
    /// list when it can carry another request, and is closed otherwise.
    private func exchange(_ fd: Int32, _ bytes: [UInt8], method: String, deadline: Date) throws -> HTTPExchangeResponse {
        do {
            let (response, reusable) = try exchangeUnpooled(fd, bytes, method: method, deadline: deadline)
            if reusable { giveBack(fd) } else { close(fd) }
            return response
        } catch {
            close(fd)
            throw error
        }
    }

    private func exchangeUnpooled(_ fd: Int32, _ bytes: [UInt8], method: String, deadline: Date) throws -> (HTTPExchangeResponse, Bool) {
        var sent = 0
        var progress = Date()
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
            if n > 0 { sent += n; progress = Date(); continue }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                if pollRetrying(&p, deadline: min(deadline, progress.addingTimeInterval(timeout))) == 0 {
                    throw Failure(code: timedOut, message: "timed out after \(Int(timeout))s sending the request", beforeAnswer: false)
                }
                continue
            }
            throw Failure(code: connectionLost, message: "connection lost while sending the request", beforeAnswer: sent == 0)
        }
        var reader = Reader(fd: fd, deadline: deadline, timeout: timeout, owner: self)
        while true {
            let head = try reader.readHead()
            let (status, headers) = try parseHead(head)
            if status >= 100 && status < 200 { continue }   // 100 Continue and other interim answers
            let closeAfter = headers["connection"]?.lowercased().contains("close") ?? false
            if method == "HEAD" || status == 204 || status == 304 {
                return (HTTPExchangeResponse(status: status, headers: headers, body: []), !closeAfter)
            }
            if headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
                let body = try reader.readChunked()
                return (HTTPExchangeResponse(status: status, headers: headers, body: body), !closeAfter)
            }
            if let cl = headers["content-length"].flatMap({ Int($0.trimmingCharacters(in: .whitespaces)) }), cl >= 0 {
                let body = try reader.read(exactly: cl)
                return (HTTPExchangeResponse(status: status, headers: headers, body: body), !closeAfter)
            }
            return (HTTPExchangeResponse(status: status, headers: headers, body: try reader.readToEnd()), false)
        }
    }

    private func parseHead(_ head: [UInt8]) throws -> (Int, [String: String]) {
        let text = String(decoding: head, as: UTF8.self)
        let lines = text.components(separatedBy: "\r\n")
        let parts = lines.first?.split(separator: " ", maxSplits: 2) ?? []
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/"), let status = Int(parts[1]) else {
            throw Failure(code: -1011, message: "the answer is not HTTP", beforeAnswer: false)
        }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let k = line[..<colon].lowercased()
            let v = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers[k] = headers[k].map { $0 + ", " + v } ?? v
        }
        return (status, headers)
    }

    /// Buffered reads from the socket, each wait a poll(2) bounded by the deadline.
    struct Reader {
        let fd: Int32
        let deadline: Date
        let timeout: TimeInterval
        let owner: SocketTransport
        var buffer: [UInt8] = []
        var received = 0
        var progress = Date()
        var eof = false

        init(fd: Int32, deadline: Date, timeout: TimeInterval, owner: SocketTransport) {
            self.fd = fd; self.deadline = deadline; self.timeout = timeout; self.owner = owner
        }

        /// Reads more bytes; false at end of stream.
        mutating func fill() throws -> Bool {
            if eof { return false }
            var chunk = [UInt8](repeating: 0, count: 65_536)
            while true {
                let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
                if n > 0 { buffer.append(contentsOf: chunk[0..<n]); received += n; progress = Date(); return true }
                if n == 0 { eof = true; return false }
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK {
                    var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                    if owner.pollRetrying(&p, deadline: min(deadline, progress.addingTimeInterval(timeout))) == 0 {
                        throw Failure(code: owner.timedOut, message: "timed out after \(Int(timeout))s waiting for an answer",
                                      beforeAnswer: false)
                    }
                    continue
                }
                throw Failure(code: owner.connectionLost, message: "connection lost (\(String(cString: strerror(errno))))",
                              beforeAnswer: received == 0)
            }
        }

        mutating func readHead() throws -> [UInt8] {
            while true {
                if let end = find([13, 10, 13, 10]) {
                    let head = Array(buffer[0..<end])
                    buffer.removeFirst(end + 4)
                    return head
                }
                if buffer.count > 1 << 20 { throw Failure(code: -1011, message: "the answer's head is too long", beforeAnswer: false) }
                if try !fill() {
                    throw Failure(code: owner.connectionLost, message: "connection lost before an answer", beforeAnswer: received == 0)
                }
            }
        }

        mutating func read(exactly n: Int) throws -> [UInt8] {
            while buffer.count < n {
                if try !fill() { throw Failure(code: owner.connectionLost, message: "connection lost in the middle of an answer", beforeAnswer: false) }
            }
            let out = Array(buffer[0..<n])
            buffer.removeFirst(n)
            return out
        }

        mutating func readLine() throws -> String {
            while true {
                if let end = find([13, 10]) {
                    let line = String(decoding: buffer[0..<end], as: UTF8.self)
                    buffer.removeFirst(end + 2)
                    return line
                }
                if try !fill() { throw Failure(code: owner.connectionLost, message: "connection lost in the middle of an answer", beforeAnswer: false) }
            }
        }

        mutating func readChunked() throws -> [UInt8] {
            var body: [UInt8] = []
            while true {
                let sizeLine = try readLine()
                let hex = sizeLine.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
                guard let size = Int(hex, radix: 16), size >= 0 else {
                    throw Failure(code: -1011, message: "bad chunk size in the answer", beforeAnswer: false)
                }
                if size == 0 {
                    while try !readLine().isEmpty {}   // trailers
                    return body
                }
                body += try read(exactly: size)
                _ = try readLine()
            }
        }

        mutating func readToEnd() throws -> [UInt8] {
            while try fill() {}
            defer { buffer = [] }
            return buffer
        }

        func find(_ needle: [UInt8]) -> Int? {
            guard buffer.count >= needle.count else { return nil }
            var i = 0
            while i <= buffer.count - needle.count {
                if buffer[i] == needle[0] && Array(buffer[i..<(i + needle.count)]) == needle { return i }
                i += 1
            }
            return nil
        }
    }
}
