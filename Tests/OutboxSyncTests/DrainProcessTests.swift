import Foundation
import Testing
import EngineProtocol
import OutboxFormat
import OutboxIO
import OutboxStore
@testable import OutboxSync

/// A drain in its own process (`outbox-workload drain`), killed with SIGKILL at random moments
/// or stopped with SIGTERM, against the real engine.
@Suite(.serialized) struct DrainProcessTests {
    struct Child {
        let process = Process()
        let out = LineCollector()
        init(_ args: [String]) throws {
            process.executableURL = URL(fileURLWithPath: try builtProduct("outbox-workload"))
            process.arguments = args
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = pipe
            out.collect(pipe.fileHandleForReading)
            try process.run()
        }
        func signal(_ s: Int32) { kill(process.processIdentifier, s) }
        func wait() -> Int32 { process.waitUntilExit(); return process.terminationStatus }
    }

    /// ≥ 100 kill -9s of a drain at random moments, with turns enqueued by another process
    /// (this one) meanwhile and sometimes retention 0 (retire and sweep inside the kill window).
    /// At the end every turn ever enqueued is on the engine exactly once, in enqueue order.
    @Test func hundredsOfKillsNeverLoseOrDuplicateATurn() throws {
        let seed = UInt64.random(in: 1...UInt64.max)
        print("kill seed \(seed)")
        var rng = SeededRandom(seed: seed)
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.engineData)
        // Small delays widen the windows between the syncing record, the request and the synced record.
        let proxy = try FaultProxy(upstreamPort: engine.port)
        proxy.decide { _ in .delay(milliseconds: 1) }
        let outbox = try Outbox.open(directory: dir.outbox)
        var expected: [String: [String]] = [:]
        var next = 0
        func enqueue(_ k: Int) throws {
            for _ in 0..<k {
                let c = "c\(next % 4)"
                let id = "t\(next)"
                let att = next % 4 == 1 ? [AttachmentSource(bytes: Array("bytes of \(id)".utf8), name: "\(id).txt")] : []
                try outbox.send(id, "message \(next)", conversation: c, attachments: att)
                expected[c, default: []].append(id)
                next += 1
            }
        }
        try enqueue(40)
        var kills = 0, finished = 0, rounds = 0
        var killedLines: [String] = []
        while kills < 110 {
            rounds += 1
            let retention = rounds % 3 == 0 ? "0" : "86400000"
            let batch = String(Int(rng.next() % 12) + 1)
            let child = try Child(["drain", "--dir", dir.outbox, "--url", proxy.baseURL, "--token", engine.token,
                                   "--batch", batch, "--retention-ms", retention])
            try enqueue(Int(rng.next() % 3))   // enqueue never waits for the drain
            usleep(useconds_t(15_000 + rng.next() % 70_000))
            if child.process.isRunning {
                child.signal(SIGKILL)
                _ = child.wait()
                if child.process.terminationReason == .uncaughtSignal { kills += 1 } else { finished += 1 }
            } else {
                let status = child.wait()
                if status != 0 { Issue.record("drain exited \(status): \(child.out.text)"); return }
                finished += 1
            }
            killedLines.append(contentsOf: child.out.text.split(separator: "\n").map(String.init))
        }
        // Settle: one drain to the end, in this process.
        var total = DrainReport()
        for _ in 0..<20 {
            let r = try Drain(outbox: outbox, client: engine.client()).runOnce()
            total.merge(r)
            if r.pending == 0 { break }
            usleep(20_000)
        }
        try outbox.refresh()
        let notDone = outbox.turns.filter { $0.state != .synced && $0.state != .retired }
        #expect(notDone.isEmpty, "\(notDone.map { "\($0.id) \($0.state) \($0.lastError ?? "")" })")
        #expect(outbox.turns.count == next, "no turn lost from the outbox")
        #expect(outbox.sealed == nil)
        try expectEngineHolds(engine, expected)
        let stats = try engine.stats()
        let found = killedLines.filter { $0.hasSuffix("foundByStatusCheck") }.count + total.foundByStatusCheck.count
        print("kill -9 drain: \(kills) kills, \(finished) runs finished, \(next) turns, engine turns \(stats.turns), posts \(stats.turnPosts), idempotent replays \(stats.idempotentReplays), status checks \(stats.statusChecks), found by status check \(found)")
        #expect(kills >= 100)
        #expect(found > 0, "some kills must have landed between a request and its synced record")
        // A replay needs a POST repeated; the status check before resend leaves only the race of
        // a dead drain's request still being processed when the next drain asks.
        #expect(stats.idempotentReplays <= 3, "replays \(stats.idempotentReplays)")
        let verify = try outbox.verify()
        #expect(verify.healthy && verify.orphanBlobs.isEmpty, "missing \(verify.missingBlobs) orphans \(verify.orphanBlobs)")
    }

    /// Watch mode in a real process: picks up turns enqueued by another process (inotify),
    /// and on SIGTERM in the middle of a slow batch exits 0 promptly, leaving nothing syncing.
    @Test func watchPicksUpNewTurnsAndStopsCleanlyOnSIGTERM() throws {
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.engineData)
        let proxy = try FaultProxy(upstreamPort: engine.port)
        let outbox = try Outbox.open(directory: dir.outbox)
        try outbox.createConversation(id: "w", title: "watch", originSurface: "cli")
        let child = try Child(["drain", "--watch", "--dir", dir.outbox, "--url", proxy.baseURL, "--token", engine.token, "--batch", "50"])
        #expect(child.out.wait(for: "watching", timeout: 10) != nil)
        usleep(100_000)
        let t0 = Date()
        try outbox.send("w1", conversation: "w")
        #expect(child.out.wait(for: "reply w1", timeout: 10) != nil, "\(child.out.text)")
        let latency = Date().timeIntervalSince(t0)
        print("watch: enqueue → reply recorded in \(Int(latency * 1000)) ms")
        #expect(latency < 2, "woken by inotify, not by a timer")

        // A slow engine: 150 ms per turn POST; 40 turns queued; SIGTERM after a few went out.
        proxy.decide { req in req.method == "POST" && req.path.hasSuffix("/turns") ? .delay(milliseconds: 150) : .forward }
        for i in 0..<40 { try outbox.send("s\(i)", conversation: "w") }
        #expect(child.out.wait(for: "delivered s2 ", timeout: 10) != nil, "\(child.out.text)")
        let stopAt = Date()
        child.signal(SIGTERM)
        let status = child.wait()
        let stopTime = Date().timeIntervalSince(stopAt)
        #expect(status == 0, "\(child.out.text)")
        #expect(stopTime < 2, "stopped after the request in flight, not after the batch: \(stopTime) s")
        #expect(child.out.text.contains("stopped=true"))
        let view = try Outbox.open(directory: dir.outbox, mode: .readOnly)
        #expect(view.turns.filter { $0.state == .syncing }.isEmpty, "no turn left syncing")
        let delivered = view.turns.filter { $0.state == .synced }.map(\.id)
        let queued = view.turns.filter { $0.state == .queued }.map(\.id)
        #expect(!queued.isEmpty, "SIGTERM came before the batch finished")
        // What the outbox calls synced is exactly what the engine holds, in order.
        try expectEngineHolds(engine, ["w": delivered])
        print("SIGTERM: exited in \(Int(stopTime * 1000)) ms with \(delivered.count) synced, \(queued.count) queued")
    }
}
