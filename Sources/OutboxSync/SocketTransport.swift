import Foundation
import HTTPWire
import OutboxIO

/// HTTP/1.1 over a plain socket for `http://` engines: every wait is a `poll(2)` with the time
/// left, so a process waiting for a silent engine sleeps. `EngineClient(baseURL:…)` picks it for
/// `http://` URLs (see `makeEngineTransport`).
///
/// Why not URLSession: on Linux (swift-corelibs-foundation 6.3, libcurl underneath) a request
/// whose server accepted the connection but does not answer keeps a dispatch write source armed
/// on the idle socket, and the process spins in epoll/poll for the whole timeout (measured: 15 s
/// wall, 14 s CPU). `https://` engines still go through `URLSessionTransport`.
///
/// The socket calls are OutboxIO's (`Sockets`), the response framing HTTPWire's
/// (`HTTPResponseParser`); this type only sequences them and keeps the idle connections.
///
/// Keep-alive: idle connections are kept for the next request. A request that fails on a reused
/// connection before any byte of an answer came back is sent once more on a fresh connection
/// (the server may have closed it meanwhile); every engine call is idempotent (turn POSTs carry
/// their Idempotency-Key), so a second send cannot do anything twice.
public final class SocketTransport: EngineTransport, @unchecked Sendable {
    public let baseURL: String
    public let timeout: TimeInterval
    private let host: String
    private let port: UInt16
    private let hostHeader: String
    private let pathPrefix: String
    private let lock = NSLock()
    private var idle: [SocketDescriptor] = []

    /// nil when `baseURL` is not a plain `http://` URL. `timeout` without progress fails a
    /// request (connecting, sending, or waiting for the answer), and twice it bounds the whole.
    public init?(baseURL: String, timeout: TimeInterval = 30) {
        var b = baseURL
        while b.hasSuffix("/") { b.removeLast() }
        guard let url = URL(string: b), url.scheme?.lowercased() == "http", let host = url.host, !host.isEmpty else { return nil }
        self.baseURL = b
        self.timeout = timeout
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        self.host = bare
        self.port = UInt16(url.port ?? 80)
        let named = bare.contains(":") ? "[\(bare)]" : bare
        self.hostHeader = url.port.map { "\(named):\($0)" } ?? named
        self.pathPrefix = url.path == "/" ? "" : url.path
    }

    deinit { for s in idle { Sockets.close(s) } }

    /// Idle keep-alive connections held right now (for tests).
    public var idleConnectionCount: Int { lock.withLock { idle.count } }

    // NSURLErrorDomain codes, so messages read as they did with URLSession.
    static let timedOut = -1001
    static let cannotFindHost = -1003
    static let cannotConnect = -1004
    static let connectionLost = -1005
    static let badServerResponse = -1011

    struct Failure: Error {
        var code: Int
        var message: String
        /// Nothing of an answer arrived: safe to try again on a fresh connection.
        var beforeAnswer: Bool
    }

    public func send(_ request: HTTPExchangeRequest) throws -> HTTPExchangeResponse {
        let url = baseURL + request.path
        let deadline = Date().addingTimeInterval(timeout * 2)
        let bytes = encode(request)
        if let sock = takeIdle() {
            do { return try exchange(sock, bytes, method: request.method, deadline: deadline) } catch let f as Failure where f.beforeAnswer && f.code != Self.timedOut {
                // The server closed the idle connection; a fresh one below.
            } catch let f as Failure {
                throw TransportError(method: request.method, url: url, code: f.code, message: f.message)
            }
        }
        do {
            let sock = try connect(deadline: min(deadline, Date().addingTimeInterval(timeout)))
            return try exchange(sock, bytes, method: request.method, deadline: deadline)
        } catch let f as Failure {
            throw TransportError(method: request.method, url: url, code: f.code, message: f.message)
        }
    }

    private func takeIdle() -> SocketDescriptor? { lock.withLock { idle.popLast() } }

    private func giveBack(_ sock: SocketDescriptor) {
        let keep: Bool = lock.withLock {
            if idle.count < 8 { idle.append(sock); return true }
            return false
        }
        if !keep { Sockets.close(sock) }
    }

    private func encode(_ r: HTTPExchangeRequest) -> [UInt8] {
        var head = "\(r.method) \(pathPrefix)\(r.path) HTTP/1.1\r\nHost: \(hostHeader)\r\n"
        for (k, v) in r.headers where !["content-length", "connection", "host"].contains(k.lowercased()) {
            head += "\(k): \(v)\r\n"
        }
        if let body = r.body { head += "Content-Length: \(body.count)\r\n" }
        else if r.method == "POST" || r.method == "PUT" { head += "Content-Length: 0\r\n" }
        head += "Connection: keep-alive\r\n\r\n"
        return Array(head.utf8) + (r.body ?? [])
    }

    private static func millisLeft(_ deadline: Date) -> Int32 {
        Int32(max(0, min(Double(Int32.max), (deadline.timeIntervalSinceNow * 1000).rounded(.up))))
    }

    private func connect(deadline: Date) throws -> SocketDescriptor {
        do {
            return try Sockets.connect(host: host, port: port, timeoutMilliseconds: Self.millisLeft(deadline))
        } catch let e as AddressResolutionError {
            throw Failure(code: Self.cannotFindHost, message: "cannot resolve host \(host) (\(e.reason))", beforeAnswer: true)
        } catch let e as IOError {
            let message: String
            let code: Int
            switch e.errno {
            case .timedOut: (code, message) = (Self.timedOut, "timed out connecting after \(Int(timeout))s")
            case .connectionRefused: (code, message) = (Self.cannotConnect, "connection refused")
            case .networkUnreachable, .hostUnreachable: (code, message) = (Self.cannotConnect, "network unreachable")
            default: (code, message) = (Self.cannotConnect, "cannot connect: \(e)")
            }
            throw Failure(code: code, message: message, beforeAnswer: true)
        }
    }

    /// Writes the request and reads one whole answer; the connection goes back to the idle
    /// list when it can carry another request, and is closed otherwise.
    private func exchange(_ sock: SocketDescriptor, _ bytes: [UInt8], method: String, deadline: Date) throws -> HTTPExchangeResponse {
        do {
            let (response, reusable) = try exchangeUnpooled(sock, bytes, method: method, deadline: deadline)
            if reusable { giveBack(sock) } else { Sockets.close(sock) }
            return response
        } catch {
            Sockets.close(sock)
            throw error
        }
    }

    private func exchangeUnpooled(_ sock: SocketDescriptor, _ bytes: [UInt8], method: String,
                                  deadline: Date) throws -> (HTTPExchangeResponse, Bool) {
        var sent = 0
        var progress = Date()
        while sent < bytes.count {
            do {
                sent += try Sockets.sendSome(sock, bytes[sent...])
                progress = Date()
            } catch let e as IOError where e.errno == .again {
                guard try wait(Sockets.waitWritable, sock, min(deadline, progress.addingTimeInterval(timeout))) else {
                    throw Failure(code: Self.timedOut, message: "timed out after \(Int(timeout))s sending the request", beforeAnswer: false)
                }
            } catch let e as IOError {
                throw Failure(code: Self.connectionLost, message: "connection lost while sending the request (\(e.errno))",
                              beforeAnswer: sent == 0)
            }
        }
        var parser = HTTPResponseParser(requestMethod: method)
        var received = 0
        progress = Date()
        var chunk = [UInt8](repeating: 0, count: 65_536)
        do {
            while true {
                if let r = try parser.next() { return (response(r), r.reusable) }
                let n: Int
                do {
                    n = try chunk.withUnsafeMutableBytes { try Sockets.receive(sock, into: $0) }
                } catch let e as IOError where e.errno == .again {
                    guard try wait(Sockets.waitReadable, sock, min(deadline, progress.addingTimeInterval(timeout))) else {
                        throw Failure(code: Self.timedOut, message: "timed out after \(Int(timeout))s waiting for an answer", beforeAnswer: false)
                    }
                    continue
                } catch let e as IOError {
                    throw Failure(code: Self.connectionLost, message: "connection lost (\(e.errno))", beforeAnswer: received == 0)
                }
                if n == 0 {
                    if received == 0 { throw Failure(code: Self.connectionLost, message: "connection lost before an answer", beforeAnswer: true) }
                    let r = try parser.finish()
                    return (response(r), false)
                }
                received += n
                progress = Date()
                parser.append(chunk[0..<n])
            }
        } catch let e as HTTPResponseParseError {
            throw e.truncated
                ? Failure(code: Self.connectionLost, message: "connection lost in the middle of an answer (\(e.message))", beforeAnswer: false)
                : Failure(code: Self.badServerResponse, message: "the answer is not HTTP we can read: \(e.message)", beforeAnswer: false)
        }
    }

    private func wait(_ how: (SocketDescriptor, Int32) throws -> Bool, _ sock: SocketDescriptor, _ until: Date) throws -> Bool {
        do { return try how(sock, Self.millisLeft(until)) } catch let e as IOError {
            throw Failure(code: Self.connectionLost, message: "cannot wait on the connection (\(e))", beforeAnswer: false)
        }
    }

    private func response(_ r: HTTPReceivedResponse) -> HTTPExchangeResponse {
        var headers: [String: String] = [:]
        for f in r.head.headers {
            let k = f.name.lowercased()
            headers[k] = headers[k].map { $0 + ", " + f.value } ?? f.value
        }
        return HTTPExchangeResponse(status: r.head.status, headers: headers, body: r.body)
    }
}

/// The transport `EngineClient(baseURL:…)` uses: `SocketTransport` for `http://` (it sleeps
/// while it waits), `URLSessionTransport` for anything else (`https://`).
public func makeEngineTransport(baseURL: String, timeout: TimeInterval = 30) -> any EngineTransport {
    SocketTransport(baseURL: baseURL, timeout: timeout) ?? URLSessionTransport(baseURL: baseURL, timeout: timeout)
}
