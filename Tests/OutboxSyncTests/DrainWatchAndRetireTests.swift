import Foundation
import Testing
import EngineProtocol
import OutboxFormat
import OutboxIO
import OutboxStore
@testable import OutboxSync

@Suite(.serialized) struct DrainRetireTests {
    /// Retire: at the moment an attachment's bytes are unlinked, the retired record is already in
    /// the log and the log was fdatasynced after it was written (record first, files after).
    @Test func attachmentBytesAreDeletedOnlyAfterTheRetiredRecordIsDurable() throws {
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.engineData)
        let fs = FaultInjectingFileSystem()
        let outbox = try Outbox.open(directory: dir.outbox, fileSystem: fs)
        let bytes = Array("keep me until the record is durable".utf8)
        try outbox.send("r1", conversation: "c", attachments: [AttachmentSource(bytes: bytes, name: "k.txt")])
        let sha = SHA256.hex(bytes)
        let blob = outbox.blobPath(sha)
        let seen = ObservedAtUnlink()
        let logPath = outbox.paths.log
        fs.setRule { op, path, _ in
            if op == .unlink && path == blob {
                let text = String(decoding: (try? PosixFileSystem().readFile(logPath)) ?? [], as: UTF8.self)
                seen.record(text.split(separator: "\n").last(where: { $0.contains("\"retired\"") && $0.contains("\"r1\"") }) != nil)
            }
            return nil
        }
        var options = Drain.Options()
        options.retentionMillis = 0
        options.replyWaitMillis = 5_000
        let report = try Drain(outbox: outbox, client: engine.client(), options: options).runOnce()
        #expect(report.delivered == ["r1"] && report.replies == ["r1"] && report.retired == 1)
        #expect(seen.values == [true], "the unlink happened once, with the retired record already in the file")
        // And the log was fdatasynced between that record's write and the unlink.
        let calls = fs.callLog
        let unlinkAt = try #require(calls.lastIndex(of: "unlink \(blob)"))
        let lastWrite = try #require(calls[..<unlinkAt].lastIndex { $0.hasPrefix("write") && $0.contains("turns.jsonl") })
        #expect(calls[lastWrite..<unlinkAt].contains { $0 == "fdatasync \(logPath)" || $0 == "fsync \(logPath)" },
                "\(calls[lastWrite..<unlinkAt])")
        #expect(!FileManager.default.fileExists(atPath: blob))
    }

    /// A retention window keeps synced turns (and their bytes) until it has passed.
    @Test func retentionWindowDelaysRetire() throws {
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.engineData)
        let clock = ManualClock(Journal.systemClock())
        let outbox = try Outbox.open(directory: dir.outbox, clock: clock.function)
        try outbox.send("r1", conversation: "c", attachments: [AttachmentSource(bytes: Array("x".utf8), name: "x")])
        var options = Drain.Options()
        options.retentionMillis = 60_000
        options.replyWaitMillis = 5_000
        let drain = Drain(outbox: outbox, client: engine.client(), options: options, clock: clock.function)
        #expect(try drain.runOnce().retired == 0)
        #expect(outbox.turn("r1")?.reply != nil)
        clock.advance(59_000)
        #expect(try drain.runOnce().retired == 0)
        clock.advance(1_000)
        #expect(try drain.runOnce().retired == 1)
        #expect(outbox.turn("r1")?.state == .retired)
    }
}

final class ObservedAtUnlink: @unchecked Sendable {
    private let lock = NSLock()
    private var v: [Bool] = []
    func record(_ b: Bool) { lock.withLock { v.append(b) } }
    var values: [Bool] { lock.withLock { v } }
}

@Suite(.serialized) struct DrainWatchTests {
    /// Watch mode in this process: delivers what another writer enqueues; when the engine dies it
    /// reports it unreachable and probes its health on the backoff; when the engine comes back it
    /// delivers what queued up meanwhile; a stop request ends it with nothing syncing.
    @Test func watchSurvivesEngineDownAndResumesWhenItReturns() throws {
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.engineData)
        let outbox = try Outbox.open(directory: dir.outbox)
        try outbox.createConversation(id: "w", title: "watch", originSurface: "cli")
        let events = EventLog()
        var options = Drain.Options()
        options.retry = RetryPolicy(baseMillis: 50, capMillis: 200, jitter: 0.2, attemptLimit: 100)
        let drain = Drain(outbox: try Outbox.open(directory: dir.outbox), client: engine.client(), options: options,
                          onEvent: events.callback)
        let stop = DrainStop()
        let finished = DispatchSemaphore(value: 0)
        let result = ResultBox()
        Thread {
            do { result.set(.success(try drain.watch(stop: stop))) } catch { result.set(.failure(error)) }
            finished.signal()
        }.start()
        func waitFor(_ what: String, _ cond: () throws -> Bool) throws {
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline { if try cond() { return }; usleep(10_000) }
            Issue.record("timed out waiting for \(what); events: \(events.all)")
        }
        try outbox.send("w1", conversation: "w")
        try waitFor("w1 synced") { try outbox.refresh(); return outbox.turn("w1")?.state == .synced }

        engine.kill9()
        try outbox.send("w2", conversation: "w")
        try outbox.send("w3", conversation: "w")
        try waitFor("engine reported unreachable") { events.all.contains { if case .engineUnreachable = $0 { return true }; return false } }
        usleep(400_000)   // a few probes on the 50 ms…200 ms backoff
        let probesWhileDown = events.all.filter { if case .engineUnreachable = $0 { return true }; return false }.count
        #expect(probesWhileDown >= 2, "the engine is probed again while down: \(probesWhileDown)")
        try outbox.refresh()
        #expect(outbox.turn("w3")?.attempt == 0, "turns behind the failed one spend nothing while the engine is down")

        try engine.restart()
        try waitFor("w2 and w3 synced after the engine came back") {
            try outbox.refresh()
            return outbox.turn("w2")?.state == .synced && outbox.turn("w3")?.state == .synced
        }
        #expect(events.all.contains(.engineReachable))
        stop.request()
        #expect(finished.wait(timeout: .now() + 10) == .success)
        let report = try #require(try result.get())
        #expect(report.stopped)
        try outbox.refresh()
        #expect(outbox.turns.allSatisfy { $0.state != .syncing })
        try expectEngineHolds(engine, ["w": ["w1", "w2", "w3"]])
    }
}

final class ResultBox: @unchecked Sendable {
    private let lock = NSLock()
    private var r: Result<DrainReport, Error>?
    func set(_ v: Result<DrainReport, Error>) { lock.withLock { r = v } }
    func get() throws -> DrainReport? { try lock.withLock { r }?.get() }
}
