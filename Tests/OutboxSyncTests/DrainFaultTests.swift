import Foundation
import Testing
import EngineProtocol
import OutboxFormat
import OutboxIO
import OutboxStore
@testable import OutboxSync

/// The drain through `FaultProxy`: dropped connections, delays, resets after the engine
/// committed, 5xx and 429 with Retry-After, and an engine kill -9 + restart in the middle.
@Suite(.serialized) struct DrainFaultTests {
    /// Both transports: `SocketTransport` (what `http://` engines get) and `URLSessionTransport`
    /// (what `https://` engines get).
    @Test(arguments: ["socket", "urlsession"])
    func everyTurnArrivesExactlyOnceAndInOrderThroughFaults(transport: String) throws {
        let seed = UInt64.random(in: 1...UInt64.max)
        print("fault seed \(seed)")
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.engineData)
        let proxy = try FaultProxy(upstreamPort: engine.port)
        let rng = LockedRandom(seed: seed)
        let firstTurnPostOfQ = LockedFlag()
        proxy.decide { req in
            // Health probes pass; everything else meets a fault about a third of the time.
            if req.path == "/api/health" { return .forward }
            // At least one turn POST the engine commits loses its answer, whatever the seed.
            if req.method == "POST" && req.path == "/api/conversations/q/turns" && firstTurnPostOfQ.setOnce() { return .resetAfterCommit }
            // Resets during a POST/PUT are rarer than resets of GETs (with URLSession, used for
            // https://, such a reset on a reused connection costs a whole timeout).
            let roll = rng.next(100)
            let hasBody = req.method == "POST" || req.method == "PUT"
            switch roll {
            case 0..<8: return hasBody && roll >= 3 ? .forward : .dropBeforeForward
            case 8..<18: return hasBody && roll >= 12 ? .forward : .resetAfterCommit
            case 18..<23: return .delay(milliseconds: 20)
            case 23..<28: return .respond(status: 503, headers: [:], body: "upstream overloaded")
            case 28..<32: return .respond(status: 429, headers: ["Retry-After": "0"], body: "slow down")
            case 32..<34: return .respond(status: 500, headers: [:], body: "{\"error\":{\"code\":\"internal\",\"message\":\"boom\"}}")
            default: return .forward
            }
        }
        let outbox = try Outbox.open(directory: dir.outbox)
        var expected: [String: [String]] = [:]
        let conversations = ["p", "q", "r", "s"]
        let n = 80
        for i in 0..<n {
            let c = conversations[i % conversations.count]
            let id = "\(c)-\(i)"
            var att: [AttachmentSource] = []
            if i % 5 == 0 { att.append(AttachmentSource(bytes: Array("attachment \(i)".utf8) + [UInt8](repeating: UInt8(i % 200), count: 2000), name: "f\(i).bin")) }
            try outbox.send(id, "message \(i)", conversation: c, attachments: att)
            expected[c, default: []].append(id)
        }
        var options = Drain.Options()
        options.retry = RetryPolicy(baseMillis: 1, capMillis: 5, jitter: 0.2, attemptLimit: 1_000)
        options.batchSize = 16
        let client = transport == "socket"
            ? EngineClient(baseURL: proxy.baseURL, token: engine.token, timeout: 1)
            : EngineClient(transport: URLSessionTransport(baseURL: proxy.baseURL, timeout: 1), token: engine.token)
        #expect((client.transport is SocketTransport) == (transport == "socket"))
        let drain = Drain(outbox: outbox, client: client, options: options)
        var total = DrainReport()
        var rounds = 0
        var restarted = false
        while rounds < 400 {
            rounds += 1
            let r = try drain.runOnce()
            total.merge(r)
            if rounds == 2 && !restarted { try engine.restart(); restarted = true }   // same port: the proxy keeps working
            if r.pending == 0 && r.awaitingReply == 0 { break }
            usleep(3_000)
        }
        let stats = try engine.stats()
        print("faults: \(proxy.counts), rounds \(rounds), delivered \(total.delivered.count), found by status check \(total.foundByStatusCheck.count), replayed \(total.replayed.count), engine replays \(stats.idempotentReplays), status checks \(stats.statusChecks)")
        try outbox.refresh()
        #expect(outbox.turns.allSatisfy { $0.state == .synced }, "\(outbox.turns.filter { $0.state != .synced }.map { "\($0.id) \($0.state) \($0.lastError ?? "")" })")
        try expectEngineHolds(engine, expected)
        #expect(Set(total.delivered + total.foundByStatusCheck + total.replayed).count == n)
        #expect((proxy.counts["resetAfterCommit"] ?? 0) > 0 && (proxy.counts["drop"] ?? 0) > 0, "the faults must have happened")
        if transport == "socket" {
            // SocketTransport resends once on a fresh connection when a reused one failed before
            // any byte of an answer, so most resets after commit come back as the engine's
            // idempotent replay; the rest are settled by the status check. A replay needs a POST
            // the engine committed whose answer was lost, so each costs its own reset.
            #expect(total.foundByStatusCheck.count + total.replayed.count > 0, "resets after commit are settled")
            #expect(total.replayed.count <= (proxy.counts["resetAfterCommit"] ?? 0), "replayed \(total.replayed), faults \(proxy.counts)")
        } else {
            #expect(total.foundByStatusCheck.count > 0, "resets after commit are settled by the status check")
            // Replays only happen when a POST is repeated; the status check makes that rare.
            #expect(total.replayed.count <= 3, "replayed \(total.replayed)")
        }
        #expect(restarted)
    }

    /// 422 (the same request id with another body on the engine) → needs attention at once with
    /// the engine's message; the later turns of that conversation stay queued behind it while
    /// another conversation is delivered. A person's retry resets the budget; once the engine
    /// takes it, the held turns follow in order.
    @Test func unprocessableTurnNeedsAttentionHoldsItsConversationAndRetryResets() throws {
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.engineData)
        let proxy = try FaultProxy(upstreamPort: engine.port)
        let outbox = try Outbox.open(directory: dir.outbox)
        for id in ["x1", "x2", "x3"] { try outbox.send(id, "text \(id)", conversation: "x") }
        for id in ["y1", "y2"] { try outbox.send(id, "text \(id)", conversation: "y") }
        // A real 422 from the engine: it already holds request id x2 with another body.
        let client = engine.client()
        let conv = outbox.conversation("x")!
        _ = try client.createConversation(id: "x", title: conv.title, originSurface: conv.originSurface, createdAt: conv.createdAt)
        _ = try client.postTurn(conversationID: "x", requestID: "x2", text: "someone else's text", attachments: [], createdAt: "2026-01-01T00:00:00.000Z", surface: "web")

        // The first pass waits for the replies of what it delivered, so the second has nothing to
        // ask (without the wait a reply the engine had not written yet was polled again: a race).
        var waitForReplies = Drain.Options()
        waitForReplies.replyWaitMillis = 5_000
        let drain = Drain(outbox: outbox, client: EngineClient(baseURL: proxy.baseURL, token: engine.token), options: waitForReplies)
        let report = try drain.runOnce()
        #expect(report.delivered.sorted() == ["x1", "y1", "y2"])
        #expect(report.needsAttention.map(\.turnID) == ["x2"])
        let x2 = try #require(outbox.turn("x2"))
        #expect(x2.state == .failedNeedsAttention && x2.attempt == 1)
        let error = x2.lastError ?? ""
        #expect(error.contains("422") && error.contains(ErrorCode.idempotencyKeyReused) && error.contains("x2"), "error: \(error)")
        #expect(error.contains("/api/conversations/x/turns"), "the error says where: \(error)")
        #expect(outbox.turn("x3")?.state == .queued && outbox.turn("x3")?.attempt == 0, "x3 was never sent")
        #expect(report.blockedBehind == ["x3": "x2"])
        #expect(DrainPlan.blockedTurns(in: outbox.turns) == ["x3": "x2"])
        // Draining again changes nothing: x3 stays held.
        let again = try drain.runOnce()
        #expect(again.requests == 0 && again.blockedBehind == ["x3": "x2"])

        // Injected 422 for x3's path too would be the same; now make x2 deliverable: the proxy
        // rewrites nothing, so a person fixes it the only way there is — the engine's copy goes
        // (a fresh engine), and the person retries.
        engine.kill9()
        try FileManager.default.removeItem(atPath: dir.engineData)
        try engine.restart()
        try outbox.apply(.retry("x2"))
        #expect(outbox.turn("x2")?.attempt == 0 && outbox.turn("x2")?.state == .queued && outbox.turn("x2")?.lastError == nil)
        let after = try Drain(outbox: outbox, client: EngineClient(baseURL: proxy.baseURL, token: engine.token)).runOnce()
        // The fresh engine lost conversation x: its POST gets a 404 conversation, the drain
        // creates x again (this client created it) and delivers x2, then the held x3, in order.
        #expect(after.needsAttention.isEmpty, "\(after.needsAttention)")
        #expect(after.delivered == ["x2", "x3"])
        #expect(try engine.client().conversationTurns("x").map(\.requestID) == ["x2", "x3"])
    }

    /// The retry flow end to end with an injected 422 (the proxy answers for the engine once).
    @Test func retryAfterInjected422DeliversTheHeldTurnsInOrder() throws {
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.engineData)
        let proxy = try FaultProxy(upstreamPort: engine.port)
        let outbox = try Outbox.open(directory: dir.outbox)
        for id in ["k1", "k2", "k3"] { try outbox.send(id, "text \(id)", conversation: "k") }
        let rejectOnce = LockedFlag()
        proxy.decide { req in
            if req.method == "POST", req.headers["idempotency-key"] == "k1", rejectOnce.setOnce() {
                return .respond(status: 422, headers: ["Content-Type": "application/json"],
                                body: "{\"error\":{\"code\":\"invalid_field\",\"message\":\"text is not acceptable\"}}")
            }
            return .forward
        }
        let drain = Drain(outbox: outbox, client: EngineClient(baseURL: proxy.baseURL, token: engine.token))
        let first = try drain.runOnce()
        #expect(first.needsAttention.map(\.turnID) == ["k1"] && first.delivered.isEmpty)
        #expect(outbox.turn("k1")?.lastError?.contains("text is not acceptable") == true)
        #expect(first.blockedBehind == ["k2": "k1", "k3": "k1"])
        try outbox.apply(.retry("k1"))
        let second = try drain.runOnce()
        // k1 had an attempt, so it is checked first (404), then sent.
        #expect(second.delivered == ["k1", "k2", "k3"])
        try expectEngineHolds(engine, ["k": ["k1", "k2", "k3"]])
    }
}

final class LockedRandom: @unchecked Sendable {
    private let lock = NSLock()
    private var rng: SeededRandom
    init(seed: UInt64) { rng = SeededRandom(seed: seed) }
    func next(_ upper: Int) -> Int { lock.withLock { Int(rng.next() % UInt64(upper)) } }
    func unit() -> Double { lock.withLock { Double(rng.next() >> 11) / Double(1 << 53) } }
}

final class LockedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var done = false
    /// True the first time only.
    func setOnce() -> Bool { lock.withLock { if done { return false }; done = true; return true } }
}
