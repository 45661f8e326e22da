import Foundation
import Testing
import EngineProtocol
import OutboxFormat
import OutboxIO
import OutboxStore
@testable import OutboxSync

/// The retry schedule: pure arithmetic first, then the real drain against the real engine
/// behind the proxy, with a clock the test moves.
@Suite struct RetryPolicyTests {
    @Test func nominalScheduleDoublesFromBaseUpToCap() {
        let p = RetryPolicy()
        let expected: [Int64] = [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 128_000, 256_000, 300_000, 300_000]
        #expect((1...11).map { p.nominalDelay(afterAttempt: $0) } == expected)
        #expect(p.nominalDelay(afterAttempt: 500) == 300_000, "no overflow far past the cap")
    }

    @Test func jitterStaysWithinTwentyPercentAndUsesTheWholeRange() {
        let p = RetryPolicy()
        var rng = SeededRandom(seed: 7)
        for n in 1...12 {
            let bounds = p.bounds(afterAttempt: n)
            var lo = Int64.max, hi = Int64.min
            for _ in 0..<2_000 {
                let d = p.delay(afterAttempt: n, unit: Double(rng.next() >> 11) / Double(1 << 53))
                #expect(bounds.contains(d), "attempt \(n): \(d) outside \(bounds)")
                lo = min(lo, d); hi = max(hi, d)
            }
            let nominal = Double(p.nominalDelay(afterAttempt: n))
            // Both ends are reached (within 2 % of the nominal delay): it is jitter, not noise.
            #expect(Double(lo) < nominal * 0.82 && Double(hi) > nominal * 1.18, "attempt \(n): \(lo)…\(hi)")
        }
        #expect(p.delay(afterAttempt: 3, unit: 0) == 3_200 && p.delay(afterAttempt: 3, unit: 1) == 4_800)
    }

    @Test func retryAfterReplacesTheComputedDelayClampedToCap() {
        let p = RetryPolicy()
        #expect(p.delay(afterAttempt: 1, unit: 0.5, retryAfterMillis: 7_000) == 7_000)
        #expect(p.delay(afterAttempt: 9, unit: 0.5, retryAfterMillis: 0) == 0)
        #expect(p.delay(afterAttempt: 1, unit: 0.5, retryAfterMillis: 3_600_000) == 300_000)
        #expect(parseRetryAfter("120", nowMillis: 0) == 120_000)
        #expect(parseRetryAfter("soon", nowMillis: 0) == nil)
        #expect(parseRetryAfter("-3", nowMillis: 0) == nil)
        // HTTP-date: Thu, 01 Jan 1970 00:01:40 GMT is 100 s after the epoch.
        #expect(parseRetryAfter("Thu, 01 Jan 1970 00:01:40 GMT", nowMillis: 40_000) == 60_000)
    }

    @Test func classification() {
        func http(_ s: Int, retryAfter: Int64? = nil) -> EngineError {
            EngineError(method: "POST", url: "u", requestID: "r", kind: .http(status: s, code: nil, message: "m"), retryAfterMillis: retryAfter)
        }
        let transport = EngineError(method: "GET", url: "u", requestID: nil,
                                    kind: .transport(TransportError(method: "GET", url: "u", code: -1004, message: "refused")))
        #expect(FailureDisposition.classify(transport) == .retryLater(spendsAttempt: true, retryAfterMillis: nil, engineDown: true))
        for s in [408, 500, 502, 503, 504] {
            #expect(FailureDisposition.classify(http(s)) == .retryLater(spendsAttempt: true, retryAfterMillis: nil, engineDown: false))
        }
        #expect(FailureDisposition.classify(http(429, retryAfter: 5_000)) == .retryLater(spendsAttempt: true, retryAfterMillis: 5_000, engineDown: false))
        #expect(FailureDisposition.classify(http(409)) == .retryLater(spendsAttempt: false, retryAfterMillis: nil, engineDown: false))
        #expect(FailureDisposition.classify(http(424)) == .retryLater(spendsAttempt: true, retryAfterMillis: nil, engineDown: false),
                "a blob the engine lost is uploaded again on the next attempt")
        for s in [400, 401, 403, 404, 413, 422] {
            #expect(FailureDisposition.classify(http(s)) == .needsAttention, "\(s)")
        }
    }
}

@Suite(.serialized) struct DrainBackoffTests {
    struct Rig {
        let dir = TempDir("backoff")
        let engine: EngineProcess
        let proxy: FaultProxy
        let clock = ManualClock()
        let outbox: Outbox
        init() throws {
            engine = try EngineProcess(dataDir: dir.engineData)
            proxy = try FaultProxy(upstreamPort: engine.port)
            outbox = try Outbox.open(directory: dir.outbox, clock: clock.function)
        }
        func drain(_ policy: RetryPolicy = RetryPolicy(), unit: Double? = nil) -> Drain {
            var o = Drain.Options()
            o.retry = policy
            let rng = LockedRandom(seed: 99)
            let fixed = unit
            let u: @Sendable () -> Double = { fixed ?? rng.unit() }
            return Drain(outbox: outbox, client: EngineClient(transport: URLSessionTransport(baseURL: proxy.baseURL, timeout: 5),
                                                             token: engine.token, clock: clock.function),
                         options: o, clock: clock.function, random: u)
        }
        func nextAttemptDelay(_ id: String) -> Int64? {
            outbox.turn(id)?.nextAttemptAt.flatMap(Timestamp.parse).map { $0 - clock.now }
        }
    }

    /// Every request meets a 503: each attempt is spent, the next one is scheduled within the
    /// jitter bounds of min(1 s·2^(n−1), 300 s) from the injected clock, nothing is sent before
    /// it is due, and attempt 10 gives up with the last error.
    @Test func fiveHundredsFollowTheScheduleAndGiveUpAtTheLimit() throws {
        let rig = try Rig()
        rig.proxy.decide { _ in .respond(status: 503, headers: [:], body: "engine busy") }
        try rig.outbox.send("t", conversation: "c")
        let policy = RetryPolicy()
        let drain = rig.drain(policy)
        var delays: [Int64] = []
        for n in 1...9 {
            let r = try drain.runOnce()
            #expect(r.failed.map(\.turnID) == ["t"] && r.engineReachable)
            let t = try #require(rig.outbox.turn("t"))
            #expect(t.state == .queued && t.attempt == n)
            #expect(t.lastError?.contains("HTTP 503") == true && t.lastError?.contains("engine busy") == true)
            let d = try #require(rig.nextAttemptDelay("t"))
            #expect(policy.bounds(afterAttempt: n).contains(d), "attempt \(n): delay \(d) outside \(policy.bounds(afterAttempt: n))")
            delays.append(d)
            // Not due yet: a drain sends nothing.
            let before = rig.proxy.requests
            rig.clock.advance(d - 1)
            let idle = try drain.runOnce()
            #expect(rig.proxy.requests == before && idle.failed.isEmpty && idle.nextAttemptAt == t.nextAttemptAt)
            rig.clock.advance(1)
        }
        print("503 schedule (ms): \(delays)")
        let last = try drain.runOnce()
        #expect(last.needsAttention.map(\.turnID) == ["t"])
        let t = try #require(rig.outbox.turn("t"))
        #expect(t.state == .failedNeedsAttention && t.attempt == 10)
        #expect(t.lastError?.hasPrefix("gave up after 10 attempts") == true && t.lastError?.contains("503") == true, "\(t.lastError ?? "")")
        // A person's retry resets the budget; with the engine back it goes through.
        rig.proxy.decide { _ in .forward }
        try rig.outbox.apply(.retry("t"))
        #expect(rig.outbox.turn("t")?.attempt == 0)
        #expect(try drain.runOnce().delivered == ["t"])
        #expect(try rig.engine.stats().turns == 1)
    }

    /// 429 with Retry-After: the next attempt is exactly that far away, whatever the jitter.
    @Test func retryAfterIsHonoured() throws {
        let rig = try Rig()
        rig.proxy.decide { _ in .respond(status: 429, headers: ["Retry-After": "42"], body: "slow down") }
        try rig.outbox.send("t", conversation: "c")
        let drain = rig.drain()
        _ = try drain.runOnce()
        #expect(rig.nextAttemptDelay("t") == 42_000)
        #expect(rig.outbox.turn("t")?.attempt == 1)
    }

    /// 409 (the engine is still working on the original): try again later, no attempt spent.
    @Test func conflictInProgressDoesNotSpendAnAttempt() throws {
        let rig = try Rig()
        rig.proxy.decide { req in
            req.method == "POST" && req.path.hasSuffix("/turns")
                ? .respond(status: 409, headers: ["Content-Type": "application/json"],
                           body: "{\"error\":{\"code\":\"idempotency_in_progress\",\"message\":\"still working on it\"}}")
                : .forward
        }
        try rig.outbox.send("t", conversation: "c")
        let drain = rig.drain(RetryPolicy(attemptLimit: 3), unit: 0.5)
        for _ in 0..<6 {
            let r = try drain.runOnce()
            #expect(r.failed.first?.error.contains("idempotency_in_progress") == true)
            #expect(rig.outbox.turn("t")?.attempt == 0 && rig.outbox.turn("t")?.state == .queued)
            rig.clock.advance(10_000)
        }
        rig.proxy.decide { _ in .forward }
        #expect(try drain.runOnce().delivered == ["t"])
    }

    /// Engine down (connection refused): the turns whose request went out spend an attempt (at
    /// most one per conversation, as conversations go out side by side); every turn behind them
    /// is put off without spending, and the report says the engine is unreachable.
    @Test func unreachableEngineStopsThePassWithoutSpendingOtherTurns() throws {
        let rig = try Rig()
        for i in 0..<3 { try rig.outbox.send("a\(i)", conversation: "a"); try rig.outbox.send("b\(i)", conversation: "b") }
        rig.engine.kill9()
        let r = try Drain(outbox: rig.outbox, client: EngineClient(baseURL: rig.engine.baseURL, token: rig.engine.token),
                          clock: rig.clock.function).runOnce()
        #expect(!r.engineReachable)
        #expect(r.lastEngineError?.contains("-1004") == true, "\(r.lastEngineError ?? "")")
        #expect((1...2).contains(r.failed.count), "\(r.failed)")
        let spent = rig.outbox.turns.filter { $0.attempt > 0 }.map(\.id)
        #expect(Set(spent) == Set(r.failed.map(\.turnID)))
        #expect(spent.allSatisfy { $0 == "a0" || $0 == "b0" }, "only a conversation's first turn can have gone out: \(spent)")
        #expect(rig.outbox.turns.allSatisfy { $0.state == .queued })
    }
}
