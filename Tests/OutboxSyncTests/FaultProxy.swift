import Foundation
@preconcurrency import Glibc
import OutboxIO

/// An HTTP-aware TCP proxy between the drain and the engine that injects the faults a real
/// network and a real engine produce. It reads each request whole, asks `decide` what to do,
/// and then forwards it, or drops the connection before forwarding, delays it, forwards it and
/// resets the client connection before the answer reaches it (the engine committed; the client
/// never hears), or answers itself (5xx, 429 with Retry-After).
final class FaultProxy: @unchecked Sendable {
    enum Action: Sendable, Equatable {
        case forward
        case delay(milliseconds: Int)
        /// Close the client connection with RST before the engine sees the request.
        case dropBeforeForward
        /// Forward, read the engine's whole answer, then RST the client connection instead.
        case resetAfterCommit
        case respond(status: Int, headers: [String: String], body: String)
    }

    struct RequestInfo: Sendable {
        var method: String
        var path: String
        var headers: [String: String]
        var index: Int
    }

    let upstreamPort: UInt16
    private(set) var port: UInt16 = 0
    private let listener: SocketDescriptor
    private let lock = NSLock()
    private var decider: @Sendable (RequestInfo) -> Action = { _ in .forward }
    private var counter = 0
    private var tally: [String: Int] = [:]
    private var stopped = false
    private var open: [Int32] = []

    init(upstreamPort: UInt16) throws {
        self.upstreamPort = upstreamPort
        let (l, p) = try Sockets.listen(host: "127.0.0.1", port: 0)
        listener = l; port = p
        Thread { [self] in acceptLoop() }.start()
    }

    var baseURL: String { "http://127.0.0.1:\(port)" }

    func decide(_ f: @escaping @Sendable (RequestInfo) -> Action) { lock.withLock { decider = f } }

    /// How many requests met each kind of action.
    var counts: [String: Int] { lock.withLock { tally } }
    var requests: Int { lock.withLock { counter } }

    func stop() {
        let fds: [Int32] = lock.withLock { stopped = true; return open }
        Sockets.shutdown(listener)
        for fd in fds { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
    }

    deinit { stop(); Sockets.close(listener) }

    private func acceptLoop() {
        while !lock.withLock({ stopped }) {
            guard (try? Sockets.waitReadable(listener, timeoutMilliseconds: 200)) == true else { continue }
            guard let client = try? Sockets.accept(listener) else { continue }
            lock.withLock { open.append(client.raw) }
            Thread { [self] in serve(client) }.start()
        }
    }

    private func serve(_ client: SocketDescriptor) {
        var upstream: SocketDescriptor?
        var clientBuffer: [UInt8] = []
        var upstreamBuffer: [UInt8] = []
        defer {
            if let u = upstream { Sockets.close(u) }
            Sockets.close(client)
            lock.withLock { open.removeAll { $0 == client.raw } }
        }
        try? Sockets.setTimeouts(client, milliseconds: 30_000)
        while true {
            guard let (raw, info0) = readMessage(client, &clientBuffer, isRequest: true, requestMethod: nil, interim: client) else { return }
            guard let info = info0 else { return }
            let action: Action = lock.withLock {
                counter += 1
                var i = info; i.index = counter
                let a = decider(i)
                tally[Self.name(a), default: 0] += 1
                return a
            }
            switch action {
            case .respond(let status, let headers, let body):
                var head = "HTTP/1.1 \(status) Injected\r\nContent-Length: \(body.utf8.count)\r\nContent-Type: text/plain\r\n"
                for (k, v) in headers { head += "\(k): \(v)\r\n" }
                guard (try? Sockets.sendAll(client, Array((head + "\r\n" + body).utf8))) != nil else { return }
                continue
            case .dropBeforeForward:
                reset(client)
                return
            case .delay(let ms):
                usleep(useconds_t(ms * 1000))
            case .forward, .resetAfterCommit:
                break
            }
            if upstream == nil {
                guard let u = try? Sockets.connect(host: "127.0.0.1", port: upstreamPort) else { reset(client); return }
                try? Sockets.setTimeouts(u, milliseconds: 30_000)
                upstream = u
            }
            guard (try? Sockets.sendAll(upstream!, raw)) != nil,
                  let (answer, _) = readMessage(upstream!, &upstreamBuffer, isRequest: false, requestMethod: info.method, interim: nil)
            else { reset(client); return }
            if action == .resetAfterCommit { reset(client); return }
            guard (try? Sockets.sendAll(client, answer)) != nil else { return }
        }
    }

    /// SO_LINGER 0 + close: the peer sees ECONNRESET, not a clean end of stream.
    private func reset(_ s: SocketDescriptor) {
        var l = linger(l_onoff: 1, l_linger: 0)
        setsockopt(s.raw, SOL_SOCKET, SO_LINGER, &l, socklen_t(MemoryLayout<linger>.size))
    }

    static func name(_ a: Action) -> String {
        switch a {
        case .forward: return "forward"
        case .delay: return "delay"
        case .dropBeforeForward: return "drop"
        case .resetAfterCommit: return "resetAfterCommit"
        case .respond(let s, _, _): return "respond\(s)"
        }
    }

    /// Reads one whole HTTP message (head + Content-Length body; chunked until the last chunk).
    /// Requests with `Expect: 100-continue` get a 100 from us and lose the header when forwarded.
    private func readMessage(_ s: SocketDescriptor, _ buffer: inout [UInt8], isRequest: Bool, requestMethod: String?,
                             interim: SocketDescriptor?) -> ([UInt8], RequestInfo?)? {
        func fill() -> Bool {
            guard let more = try? Sockets.receive(s, maxBytes: 65536), !more.isEmpty else { return false }
            buffer += more
            return true
        }
        while true {
            var headEnd: Int?
            while headEnd == nil {
                if let r = find(buffer, [13, 10, 13, 10]) { headEnd = r; break }
                guard fill() else { return nil }
            }
            let headBytes = Array(buffer[..<headEnd!])
            let head = String(decoding: headBytes, as: UTF8.self)
            var lines = head.components(separatedBy: "\r\n")
            let first = lines.removeFirst()
            var headers: [String: String] = [:]
            var kept: [String] = []
            for l in lines {
                guard let c = l.firstIndex(of: ":") else { continue }
                let k = l[..<c].lowercased(), v = l[l.index(after: c)...].trimmingCharacters(in: .whitespaces)
                headers[k] = v
                if !(isRequest && k == "expect") { kept.append(l) }
            }
            let parts = first.split(separator: " ", maxSplits: 2).map(String.init)
            if !isRequest, parts.count >= 2, let code = Int(parts[1]), (100..<200).contains(code) {
                buffer.removeSubrange(..<(headEnd! + 4))
                continue   // an interim answer: skip it
            }
            var bodyLength = Int(headers["content-length"] ?? "0") ?? 0
            if !isRequest, let m = requestMethod, m == "HEAD" { bodyLength = 0 }
            if !isRequest, parts.count >= 2, parts[1] == "204" || parts[1] == "304" { bodyLength = 0 }
            if isRequest, headers["expect"]?.lowercased() == "100-continue", let c = interim,
               buffer.count < headEnd! + 4 + bodyLength {
                try? Sockets.sendAll(c, Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
            }
            var total = headEnd! + 4 + bodyLength
            if headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
                while find(buffer, Array("\r\n0\r\n\r\n".utf8), from: headEnd! + 2) == nil { guard fill() else { return nil } }
                total = find(buffer, Array("\r\n0\r\n\r\n".utf8), from: headEnd! + 2)! + 7
            }
            while buffer.count < total { guard fill() else { return nil } }
            let body = Array(buffer[(headEnd! + 4)..<total])
            buffer.removeSubrange(..<total)
            let rebuilt = Array(([first] + kept).joined(separator: "\r\n").utf8) + [13, 10, 13, 10] + body
            let info = isRequest && parts.count >= 2
                ? RequestInfo(method: parts[0], path: parts[1], headers: headers, index: 0) : nil
            return (rebuilt, info)
        }
    }

    private func find(_ hay: [UInt8], _ needle: [UInt8], from: Int = 0) -> Int? {
        guard hay.count >= needle.count, from <= hay.count - needle.count else { return nil }
        var i = from
        while i <= hay.count - needle.count {
            if hay[i] == needle[0] && Array(hay[i..<(i + needle.count)]) == needle { return i }
            i += 1
        }
        return nil
    }
}
