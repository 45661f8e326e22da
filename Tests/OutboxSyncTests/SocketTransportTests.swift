import Foundation
@preconcurrency import Glibc
import HTTPWire
import OutboxIO
import Testing
@testable import OutboxSync

/// A tiny loopback HTTP server: each connection on its own thread, requests parsed with
/// HTTPWire, each answered `200` with body `c<connection>r<request>`, or not at all.
private final class LoopbackServer: @unchecked Sendable {
    enum Behaviour { case answer, answerOnceThenClose, silent }
    let port: UInt16
    private let listener: SocketDescriptor
    private let behaviour: Behaviour
    private let lock = NSLock()
    private var connections = 0
    private var requests = 0
    private var stopped = false
    private var open: [SocketDescriptor] = []

    init(_ behaviour: Behaviour) throws {
        self.behaviour = behaviour
        (listener, port) = try Sockets.listen(host: "127.0.0.1", port: 0)
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    var baseURL: String { "http://127.0.0.1:\(port)" }
    var connectionCount: Int { lock.withLock { connections } }
    var requestCount: Int { lock.withLock { requests } }

    func stop() {
        let socks: [SocketDescriptor] = lock.withLock { stopped = true; return open }
        for s in socks { Sockets.shutdown(s) }
        Sockets.shutdown(listener)
        Sockets.close(listener)
    }

    private func acceptLoop() {
        while !lock.withLock({ stopped }) {
            guard (try? Sockets.waitReadable(listener, timeoutMilliseconds: 100)) == true,
                  let sock = try? Sockets.accept(listener) else { continue }
            let n: Int = lock.withLock { connections += 1; open.append(sock); return connections }
            Thread.detachNewThread { [self] in serve(sock, n) }
        }
    }

    private func serve(_ sock: SocketDescriptor, _ connection: Int) {
        defer { Sockets.close(sock) }
        var parser = HTTPRequestParser()
        var served = 0
        while !lock.withLock({ stopped }) {
            guard let bytes = try? Sockets.receive(sock, maxBytes: 65_536), !bytes.isEmpty else { return }
            parser.append(bytes)
            while case .request? = try? parser.next() {
                lock.withLock { requests += 1 }
                served += 1
                if behaviour == .silent { continue }
                let body = Array("c\(connection)r\(served)".utf8)
                try? Sockets.sendAll(sock, HTTPResponse(status: 200, body: body).encoded(keepAlive: true))
                if behaviour == .answerOnceThenClose { return }   // says keep-alive, closes anyway
            }
        }
    }
}

/// CPU time of the calling thread, in seconds.
private func threadCPUSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

@Suite("Socket transport")
struct SocketTransportTests {
    @Test func plainHTTPURLsGetTheSocketTransportAndHTTPSKeepsURLSession() {
        #expect(EngineClient(baseURL: "http://127.0.0.1:1", token: "t").transport is SocketTransport)
        #expect(EngineClient(baseURL: "https://engine.example", token: "t").transport is URLSessionTransport)
    }

    @Test func keepAliveReusesOneConnection() throws {
        let server = try LoopbackServer(.answer)
        defer { server.stop() }
        let t = try #require(SocketTransport(baseURL: server.baseURL + "/", timeout: 5))
        var bodies: [String] = []
        for _ in 0..<3 {
            let r = try t.send(HTTPExchangeRequest(method: "POST", path: "/api/x", headers: ["Content-Type": "application/json"], body: Array("{}".utf8)))
            #expect(r.status == 200)
            #expect(r.headers["content-length"] != nil)
            bodies.append(String(decoding: r.body, as: UTF8.self))
        }
        #expect(bodies == ["c1r1", "c1r2", "c1r3"])
        #expect(server.connectionCount == 1)
        #expect(t.idleConnectionCount == 1)
    }

    @Test func aReusedConnectionTheServerClosedIsResentOnceOnAFreshOne() throws {
        let server = try LoopbackServer(.answerOnceThenClose)
        defer { server.stop() }
        let t = try #require(SocketTransport(baseURL: server.baseURL, timeout: 5))
        #expect(String(decoding: try t.send(HTTPExchangeRequest(method: "GET", path: "/a")).body, as: UTF8.self) == "c1r1")
        #expect(t.idleConnectionCount == 1)
        Thread.sleep(forTimeInterval: 0.05)   // the server's FIN reaches the idle connection
        let second = try t.send(HTTPExchangeRequest(method: "PUT", path: "/b", body: [1, 2, 3]))
        #expect(String(decoding: second.body, as: UTF8.self) == "c2r1")
        #expect(server.connectionCount == 2)
        #expect(server.requestCount == 2)   // the request reached the server once, not twice
    }

    @Test func aSilentServerTimesOutAsAnEngineTransportErrorWhileSleeping() throws {
        let server = try LoopbackServer(.silent)
        defer { server.stop() }
        let client = EngineClient(baseURL: server.baseURL, token: "t", timeout: 1)
        let started = Date()
        let cpuBefore = threadCPUSeconds()
        do {
            _ = try client.stats()
            Issue.record("a silent server answered")
        } catch {
            #expect(error.isTransport)
            if case .transport(let t) = error.kind {
                #expect(t.code == -1001)
                #expect(t.message.contains("timed out"))
            }
        }
        let wall = Date().timeIntervalSince(started)
        let cpu = threadCPUSeconds() - cpuBefore
        #expect(wall >= 0.9 && wall < 3, "waited \(wall) s")
        #expect(cpu < 0.2, "used \(cpu) s of CPU waiting \(wall) s")
        #expect(server.requestCount == 1)
    }

    @Test func refusedAndUnresolvableAreTransportErrors() {
        // A port nobody listens on: bind one and close it.
        let port: UInt16 = {
            let (l, p) = try! Sockets.listen(host: "127.0.0.1", port: 0)
            Sockets.close(l)
            return p
        }()
        do {
            _ = try EngineClient(baseURL: "http://127.0.0.1:\(port)", token: "t", timeout: 2).health()
            Issue.record("connected to a closed port")
        } catch {
            guard case .transport(let t) = error.kind else { Issue.record("\(error)"); return }
            #expect(t.code == -1004 && t.message == "connection refused")
        }
        do {
            _ = try EngineClient(baseURL: "http://no-such-host.invalid:1", token: "t", timeout: 2).health()
            Issue.record("resolved .invalid")
        } catch {
            guard case .transport(let t) = error.kind else { Issue.record("\(error)"); return }
            #expect(t.code == -1003)
        }
    }
}
