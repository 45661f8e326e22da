import Foundation
import Testing
import OutboxFormat
import OutboxIO
@testable import OutboxStore

@Suite struct TransitionTests {
    @Test func theDrainPathQueuedSyncingSyncedReplyRetired() throws {
        let dir = TempDir()
        let o = try Outbox.open(directory: dir.outbox)
        try o.send("t1")
        try o.apply(.syncing("t1"))
        #expect(o.turn("t1")?.state == .syncing && o.turn("t1")?.attempt == 1 && o.turn("t1")?.mayHaveLanded == true)
        try o.apply(.synced("t1", answer))
        try o.apply(.reply("t1", status: "answered", text: "echo: hello", error: nil))
        #expect(o.turn("t1")?.reply?.text == "echo: hello" && o.turn("t1")?.engineAnswer == answer)
        #expect(try o.retire(["t1"]) == 1)
        #expect(o.turn("t1")?.state == .retired)
        // The whole history is in the file, in order.
        #expect(try o.history("t1").map(\.type) == ["turn", "state", "state", "reply", "retired"])
    }

    @Test func failuresRescheduleAndGiveUp() throws {
        let dir = TempDir()
        let o = try Outbox.open(directory: dir.outbox)
        try o.send("t1")
        try o.apply([.syncing("t1"), .failed("t1", error: "connection refused", nextAttemptAt: "2026-11-30T15:00:01.000Z", spendsAttempt: true)])
        var t = try #require(o.turn("t1"))
        #expect(t.state == .queued && t.attempt == 1 && t.nextAttemptAt == "2026-11-30T15:00:01.000Z" && t.lastError == "connection refused")
        // 409: try later without spending an attempt.
        try o.apply([.syncing("t1"), .failed("t1", error: "in progress", nextAttemptAt: "2026-11-30T15:00:02.000Z", spendsAttempt: false)])
        #expect(o.turn("t1")?.attempt == 1)
        try o.apply([.syncing("t1"), .needsAttention("t1", error: "422 idempotency_key_reused")])
        t = try #require(o.turn("t1"))
        #expect(t.state == .failedNeedsAttention && t.attempt == 2 && t.lastError == "422 idempotency_key_reused")
        // A person's retry resets the budget.
        try o.apply(.retry("t1"))
        t = try #require(o.turn("t1"))
        #expect(t.state == .queued && t.attempt == 0 && t.lastError == nil && t.mayHaveLanded)
    }

    @Test func illegalTransitionsAreRefusedAndWriteNothing() throws {
        let dir = TempDir()
        let o = try Outbox.open(directory: dir.outbox)
        try o.send("t1")
        try o.send("t2")
        let size = fileBytes(o.paths.log).count
        #expect(throws: StoreError.self) { try o.apply(.synced("nope", answer)) }
        #expect(throws: StoreError.self) { try o.apply(.reply("t1", status: "answered", text: "x", error: nil)) }
        #expect(throws: StoreError.self) { try o.apply(.requeue("t1", reason: "x")) }
        #expect(throws: StoreError.self) { try o.retire(["t1"]) }
        // A batch with one illegal transition writes none of them.
        #expect(throws: StoreError.self) { try o.apply([.syncing("t2"), .syncing("t2")]) }
        #expect(o.turn("t2")?.state == .queued)
        try o.apply([.syncing("t1"), .synced("t1", answer)])
        #expect(throws: StoreError.self) { try o.apply(.syncing("t1")) }
        #expect(throws: StoreError.self) { try o.apply(.retry("t1")) }
        #expect(throws: StoreError.self) { try o.cancel("t1") }
        #expect(fileBytes(o.paths.log).count > size)
        #expect(o.sealed == nil)
    }

    @Test func cancelOnlyBeforeAnyAttempt() throws {
        let dir = TempDir()
        let o = try Outbox.open(directory: dir.outbox)
        try o.send("t1", attachments: [AttachmentSource(bytes: Array("only mine".utf8), name: "a")])
        try o.send("t2")
        try o.cancel("t1")
        #expect(o.turn("t1")?.state == .cancelled)
        #expect(!FileManager.default.fileExists(atPath: o.blobPath(SHA256.hex(Array("only mine".utf8)))))
        try o.apply([.syncing("t2"), .failed("t2", error: "timeout", nextAttemptAt: "2026-11-30T15:00:01.000Z", spendsAttempt: true)])
        do {
            try o.cancel("t2")
            Issue.record("cancelled a turn that may have reached the engine")
        } catch {
            #expect("\(error)".contains("may have reached the engine"))
        }
    }

    @Test func aBatchOfTransitionsCostsOneSync() throws {
        let dir = TempDir()
        let fs = FaultInjectingFileSystem()
        let o = try Outbox.open(directory: dir.outbox, fileSystem: fs)
        for i in 0..<20 { try o.send("t\(i)") }
        let before = fs.count(.fdatasync)
        try o.apply((0..<20).map { .syncing("t\($0)") })
        try o.apply((0..<20).map { .synced("t\($0)", answer) })
        #expect(fs.count(.fdatasync) - before == 2)
        #expect(o.turns.allSatisfy { $0.state == .synced })
    }

    @Test func everyPairOfStatesFollowsTheTable() {
        let allowed: Set<String> = ["queued>syncing", "queued>synced", "queued>failedNeedsAttention", "queued>queued",
                                    "syncing>synced", "syncing>queued", "syncing>failedNeedsAttention", "failedNeedsAttention>queued"]
        for from in TurnState.allCases {
            for to in TurnState.allCases {
                #expect(OutboxState.allows(from, to) == allowed.contains("\(from.rawValue)>\(to.rawValue)"), "\(from) → \(to)")
            }
        }
    }
}

@Suite struct RecoveryTests {
    @Test func syncingGoesBackToQueuedAtOpenKeepingItsAttempts() throws {
        let dir = TempDir()
        do {
            let o = try Outbox.open(directory: dir.outbox)
            try o.send("t1")
            try o.apply([.syncing("t1"), .failed("t1", error: "x", nextAttemptAt: "2026-11-30T15:00:00.000Z", spendsAttempt: true), .syncing("t1")])
        }
        let o = try Outbox.open(directory: dir.outbox)
        let t = try #require(o.turn("t1"))
        #expect(t.state == .queued && t.attempt == 2 && t.mayHaveLanded)
        #expect(o.recoveryNotes.contains { $0.contains("syncing went back to queued") })
    }

    @Test func aRunningDrainKeepsItsSyncingTurns() throws {
        let dir = TempDir()
        let o = try Outbox.open(directory: dir.outbox)
        try o.send("t1")
        try o.apply(.syncing("t1"))
        let drain = try FileLock.acquire(o.paths.drainLock, .exclusive, wait: false, fileSystem: PosixFileSystem())
        #expect(drain != nil)
        let other = try Outbox.open(directory: dir.outbox)
        #expect(other.turn("t1")?.state == .syncing)
        drain?.release()
    }

    @Test func aMissingOrDamagedAttachmentNeedsAttentionWithoutSealing() throws {
        let dir = TempDir()
        let o = try Outbox.open(directory: dir.outbox)
        try o.send("t1", attachments: [AttachmentSource(bytes: Array("gone".utf8), name: "gone.txt")])
        try o.send("t2", attachments: [AttachmentSource(bytes: Array("bent".utf8), name: "bent.txt")])
        try o.send("t3")
        try FileManager.default.removeItem(atPath: o.blobPath(SHA256.hex(Array("gone".utf8))))
        writeBytes(o.blobPath(SHA256.hex(Array("bent".utf8))), Array("BENT".utf8))
        let again = try Outbox.open(directory: dir.outbox)
        #expect(again.sealed == nil)
        #expect(again.turn("t1")?.state == .failedNeedsAttention && again.turn("t1")?.lastError?.contains("missing") == true)
        #expect(again.turn("t2")?.state == .failedNeedsAttention && again.turn("t2")?.lastError?.contains("does not match") == true)
        #expect(again.turn("t3")?.state == .queued)
        let report = try again.verify()
        #expect(report.sealed == nil)
    }
}

@Suite struct LiveCountTests {
    /// The incremental live-record count matches a count from scratch after every kind of change.
    @Test func theLiveRecordEstimateFollowsEveryChange() throws {
        let dir = TempDir()
        let o = try Outbox.open(directory: dir.outbox)
        func fromScratch(_ s: OutboxState) -> Int {
            s.conversations.count * 2 + s.turns.values.filter(\.isLive).map { 2 + ($0.reply != nil ? 1 : 0) }.reduce(0, +)
        }
        for i in 0..<6 { try o.send("t\(i)") }
        #expect(o.snapshot.liveRecordEstimate == fromScratch(o.snapshot))
        try o.apply([.syncing("t0"), .synced("t0", answer), .reply("t0", status: "answered", text: "a", error: nil),
                     .reply("t0", status: "answered", text: "b", error: nil), .syncing("t1"), .synced("t1", answer)])
        #expect(o.snapshot.liveRecordEstimate == fromScratch(o.snapshot))
        try o.retire(["t0", "t1"])
        try o.cancel("t2")
        #expect(o.snapshot.liveRecordEstimate == fromScratch(o.snapshot))
        try o.compact()
        #expect(o.snapshot.liveRecordEstimate == fromScratch(o.snapshot))
    }
}
