import Foundation
import Synchronization
import HTTPWire
import OutboxIO

/// A small HTTP/1.1 server on POSIX sockets: one thread per connection (capped), keep-alive,
/// pipelining, every response in one write on a TCP_NODELAY socket, read timeouts, clean stop.
public final class HTTPServer: @unchecked Sendable {
    public struct Configuration: Sendable {
        public var host: String
        public var port: UInt16
        /// Connections beyond this get `503 too_many_connections` and are closed.
        public var maxConnections: Int
        /// A request must arrive whole within this long of its first byte, and no read may stall
        /// longer than this; otherwise the connection is closed.
        public var requestTimeout: Duration
        /// An idle keep-alive connection is closed after this long.
        public var idleTimeout: Duration
        public var maxHeaderBytes: Int
        public var bodyLimit: HTTPRequestParser.BodyLimit

        public init(host: String = "127.0.0.1", port: UInt16 = 0, maxConnections: Int = 256,
                    requestTimeout: Duration = .seconds(10), idleTimeout: Duration = .seconds(60),
                    maxHeaderBytes: Int = 16 * 1024,
                    bodyLimit: @escaping HTTPRequestParser.BodyLimit = { _ in 1 << 20 }) {
            self.host = host; self.port = port; self.maxConnections = maxConnections
            self.requestTimeout = requestTimeout; self.idleTimeout = idleTimeout
            self.maxHeaderBytes = maxHeaderBytes; self.bodyLimit = bodyLimit
        }
    }

    /// A handler's answer: a whole response, or a head followed by a body written as it happens
    /// (Server-Sent Events), after which the connection closes.
    public enum Answer: Sendable {
        case response(HTTPResponse)
        case stream(status: Int, headers: HTTPHeaders, body: @Sendable (EventSink) -> Void)
    }

    public typealias Handler = @Sendable (HTTPRequest) -> Answer
    /// Builds the response for a protocol-level refusal (parse error, 503 at the cap, 408).
    public typealias ErrorResponder = @Sendable (_ status: Int, _ code: String, _ message: String) -> HTTPResponse

    public let configuration: Configuration
    private let handler: Handler
    private let errorResponder: ErrorResponder
    private let state = Mutex(State())
    private let stopped = DispatchSemaphore(value: 0)

    private struct State: Sendable {
        var listener: SocketDescriptor?
        var connections: [Int32: SocketDescriptor] = [:]
        var stopping = false
        var acceptLoopRunning = false
    }

    public init(configuration: Configuration, handler: @escaping Handler, errorResponder: @escaping ErrorResponder) {
        self.configuration = configuration
        self.handler = handler
        self.errorResponder = errorResponder
    }

    /// Binds, starts the accept thread and returns the bound port (useful with port 0).
    public func start() throws -> UInt16 {
        Signals.ignoreBrokenPipe()
        let (listener, port) = try Sockets.listen(host: configuration.host, port: configuration.port)
        state.withLock { $0.listener = listener; $0.acceptLoopRunning = true }
        let thread = Thread { [self] in acceptLoop(listener) }
        thread.name = "http-accept"
        thread.start()
        return port
    }

    /// Stops accepting, wakes and closes every connection, and waits (up to `timeout`) for the
    /// connection threads to finish the requests they are in.
    public func stop(timeout: Duration = .seconds(5)) {
        let (wasRunning, conns) = state.withLock { s -> (Bool, [SocketDescriptor]) in
            let was = !s.stopping && s.acceptLoopRunning
            s.stopping = true
            return (was, Array(s.connections.values))
        }
        for c in conns { Sockets.shutdown(c) }
        if wasRunning { _ = stopped.wait(timeout: .now() + .milliseconds(Int(timeout.components.seconds * 1000))) }
        let deadline = Date().addingTimeInterval(Double(timeout.components.seconds))
        while Date() < deadline && state.withLock({ !$0.connections.isEmpty }) {
            Thread.sleep(forTimeInterval: 0.01)
        }
    }

    public var activeConnections: Int { state.withLock { $0.connections.count } }

    private var isStopping: Bool { state.withLock { $0.stopping } }

    // MARK: - Accept

    private func acceptLoop(_ listener: SocketDescriptor) {
        defer {
            Sockets.close(listener)
            state.withLock { $0.acceptLoopRunning = false }
            stopped.signal()
        }
        while !isStopping {
            do {
                guard try Sockets.waitReadable(listener, timeoutMilliseconds: 100) else { continue }
                let conn = try Sockets.accept(listener)
                let admitted = state.withLock { s -> Bool in
                    guard s.connections.count < configuration.maxConnections, !s.stopping else { return false }
                    s.connections[conn.raw] = conn
                    return true
                }
                guard admitted else {
                    let r = errorResponder(503, "too_many_connections",
                                           "the engine is serving \(configuration.maxConnections) connections, its limit; retry shortly")
                    try? Sockets.setTimeouts(conn, milliseconds: 200)
                    try? Sockets.sendAll(conn, r.encoded(keepAlive: false))
                    Sockets.shutdown(conn)
                    Sockets.close(conn)
                    continue
                }
                let thread = Thread { [self] in
                    serve(conn)
                    state.withLock { _ = $0.connections.removeValue(forKey: conn.raw) }
                    Sockets.close(conn)
                }
                thread.stackSize = 1 << 20
                thread.start()
            } catch {
                // EMFILE and friends: back off briefly instead of spinning.
                if !isStopping { Thread.sleep(forTimeInterval: 0.01) }
            }
        }
    }

    // MARK: - One connection

    private func serve(_ conn: SocketDescriptor) {
        var parser = HTTPRequestParser(maxHeaderBytes: configuration.maxHeaderBytes, bodyLimit: configuration.bodyLimit)
        let requestTimeout = Self.seconds(configuration.requestTimeout)
        let idleTimeout = Self.seconds(configuration.idleTimeout)
        var requestStarted: Date?
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        // Writes must not block forever on a peer that stopped reading.
        try? Sockets.setTimeouts(conn, milliseconds: Int(requestTimeout * 1000))

        while true {
            // Answer everything already buffered (pipelining), in order.
            do {
                while let event = try parser.next() {
                    switch event {
                    case .continueExpected:
                        try Sockets.sendAll(conn, HTTPResponse.continueBytes)
                    case .request(let request):
                        let keepAlive = request.keepAlive && !isStopping
                        switch handler(request) {
                        case .response(let response):
                            try Sockets.sendAll(conn, response.encoded(keepAlive: keepAlive, omitBody: request.method == "HEAD"))
                            if !keepAlive { return }
                        case .stream(let status, let headers, let body):
                            try Sockets.sendAll(conn, HTTPResponse.streamingHead(status: status, headers: headers))
                            body(EventSink(conn: conn, server: self))
                            return
                        }
                        requestStarted = parser.isIdle ? nil : Date()
                    }
                }
            } catch let error as HTTPParseError {
                try? Sockets.sendAll(conn, errorResponder(error.status, error.code, error.message).encoded(keepAlive: false))
                return
            } catch {
                return  // the peer went away while we wrote
            }

            // Wait for more bytes, in slices so a stop is noticed promptly.
            let deadline = requestStarted.map { $0.addingTimeInterval(requestTimeout) } ?? Date().addingTimeInterval(idleTimeout)
            var readable = false
            while !readable {
                if isStopping { return }
                let left = deadline.timeIntervalSinceNow
                if left <= 0 {
                    if requestStarted != nil {
                        let r = errorResponder(408, "request_timeout",
                                               "the request did not arrive whole within \(requestTimeout) s; connection closed")
                        try? Sockets.sendAll(conn, r.encoded(keepAlive: false))
                    }
                    return
                }
                do {
                    readable = try Sockets.waitReadable(conn, timeoutMilliseconds: Int32(min(left, 0.25) * 1000) + 1)
                } catch {
                    return
                }
            }
            let n: Int
            do {
                n = try buffer.withUnsafeMutableBytes { buf in try Sockets.receive(conn, into: buf) }
            } catch {
                return
            }
            if n == 0 { return }
            if parser.isIdle { requestStarted = Date() }
            parser.append(buffer[0..<n])
        }
    }

    static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    /// Writes Server-Sent Events to one connection.
    public struct EventSink: Sendable {
        let conn: SocketDescriptor
        let server: HTTPServer

        /// Sends one event; false when the peer is gone or the server is stopping.
        @discardableResult
        public func send(event: String, data: String) -> Bool {
            if server.isStopping { return false }
            var text = "event: \(event)\n"
            for line in data.split(separator: "\n", omittingEmptySubsequences: false) { text += "data: \(line)\n" }
            text += "\n"
            do { try Sockets.sendAll(conn, Array(text.utf8)); return true } catch { return false }
        }

        public var isCancelled: Bool { server.isStopping }
    }
}
