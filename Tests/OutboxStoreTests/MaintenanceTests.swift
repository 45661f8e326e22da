import Foundation
import Testing
import OutboxFormat
import OutboxIO
@testable import OutboxStore

@Suite struct RetireAndSweepTests {
    @Test func retireKeepsBytesAnotherLiveTurnNeeds() throws {
        let dir = TempDir()
        let o = try Outbox.open(directory: dir.outbox)
        let shared = Array("shared".utf8)
        try o.send("t1", attachments: [AttachmentSource(bytes: shared, name: "a")])
        try o.send("t2", attachments: [AttachmentSource(bytes: shared, name: "b")])
        try o.apply([.syncing("t1"), .synced("t1", answer)])
        try o.retire(["t1"])
        #expect(FileManager.default.fileExists(atPath: o.blobPath(SHA256.hex(shared))))
        try o.apply([.syncing("t2"), .synced("t2", answer)])
        try o.retire(["t2"])
        #expect(!FileManager.default.fileExists(atPath: o.blobPath(SHA256.hex(shared))))
    }

    /// A kill between the durable retired record and the unlink leaves an orphan; the sweep at
    /// the next open removes it. The record came first, so no live turn lost its file.
    @Test func aCrashBetweenRetiredRecordAndUnlinkLeavesAnOrphanTheSweepRemoves() throws {
        let dir = TempDir()
        let bytes = Array("retire me".utf8)
        let sha = SHA256.hex(bytes)
        let fs = FaultInjectingFileSystem()
        let o = try Outbox.open(directory: dir.outbox, fileSystem: fs)
        try o.send("t1", attachments: [AttachmentSource(bytes: bytes, name: "a")])
        try o.apply([.syncing("t1"), .synced("t1", answer)])
        fs.setRule { op, path, _ in op == .unlink && path.hasSuffix(sha) ? .crash : nil }
        #expect(throws: (any Error).self) { try o.retire(["t1"]) }
        // The retired record is durable; the bytes are still there.
        let view = try Outbox.open(directory: dir.outbox, mode: .readOnly)
        #expect(view.turn("t1")?.state == .retired)
        #expect(FileManager.default.fileExists(atPath: o.blobPath(sha)))
        #expect(try view.verify().orphanBlobs == [sha])
        // Next writable open sweeps it.
        let next = try Outbox.open(directory: dir.outbox)
        #expect(!FileManager.default.fileExists(atPath: next.blobPath(sha)))
        #expect(next.recoveryNotes.contains { $0.contains("swept 1 orphan") })
    }

    @Test func theSweepNeverTakesABlobAnEnqueueIsAboutToName() throws {
        let dir = TempDir()
        let o = try Outbox.open(directory: dir.outbox)
        try o.send("t1")
        // An enqueue in another process has staged a blob and holds blobs.lock shared.
        let staged = try BlobStore(directory: o.paths.blobs, fileSystem: PosixFileSystem()).put(.bytes(Array("staged".utf8)))
        let enqueueInProgress = try FileLock.acquire(o.paths.blobsLock, .shared, wait: true, fileSystem: PosixFileSystem())
        let report = try o.sweep()
        #expect(report.skippedBecauseBusy && report.deletedBlobs.isEmpty)
        #expect(FileManager.default.fileExists(atPath: o.blobPath(staged.sha256)))
        enqueueInProgress?.release()
        #expect(try o.sweep().deletedBlobs == [staged.sha256])
    }

    @Test func sweepRemovesLeftoverTempFiles() throws {
        let dir = TempDir()
        let o = try Outbox.open(directory: dir.outbox)
        try o.send("t1", attachments: [AttachmentSource(bytes: [1], name: "a")])
        writeBytes(o.paths.blobs + "/tmp-999-123", [1, 2, 3])
        #expect(try o.verify().tempFiles == ["tmp-999-123"])
        #expect(try o.sweep().deletedTemps == ["tmp-999-123"])
    }
}

@Suite struct CompactionTests {
    @Test func compactionKeepsEveryLiveTurnAndItsState() throws {
        let dir = TempDir()
        let o = try Outbox.open(directory: dir.outbox)
        for i in 0..<30 { try o.send("t\(i)", "text \(i)", attachments: i % 5 == 0 ? [AttachmentSource(bytes: [UInt8(i)], name: "a")] : []) }
        for i in 0..<10 { try o.apply([.syncing("t\(i)"), .synced("t\(i)", answer), .reply("t\(i)", status: "answered", text: "r\(i)", error: nil)]) }
        try o.retire((0..<5).map { "t\($0)" })
        try o.apply([.syncing("t20"), .failed("t20", error: "down", nextAttemptAt: "2026-12-01T00:00:00.000Z", spendsAttempt: true)])
        try o.apply([.syncing("t21"), .needsAttention("t21", error: "422")])
        try o.apply(.syncing("t22"))
        try o.cancel("t23")
        let before = o.snapshot
        let reader = try Outbox.open(directory: dir.outbox, mode: .readOnly)
        let report = try o.compact()
        #expect(report.recordsAfter < report.recordsBefore && report.bytesAfter < report.bytesBefore)
        for t in before.orderedTurns where t.isLive {
            let after = try #require(o.turn(t.id))
            #expect(after.state == t.state && after.attempt == t.attempt && after.nextAttemptAt == t.nextAttemptAt)
            #expect(after.lastError == t.lastError && after.reply == t.reply && after.mayHaveLanded == t.mayHaveLanded)
            #expect(after.text == t.text && after.attachments == t.attachments && after.createdAt == t.createdAt)
        }
        #expect(o.turn("t0") == nil && o.turn("t23") == nil)
        // A fresh open reads the same state, and an older reader follows the new file.
        let fresh = try Outbox.open(directory: dir.outbox, options: { var x = Outbox.Options(); x.recoverAtOpen = false; return x }())
        #expect(fresh.turns == o.turns)
        try reader.refresh()
        #expect(reader.turns.filter(\.isLive) == o.turns)
        // Sequence numbers keep growing across the rewrite.
        try o.send("t99")
        #expect(try o.history("t99").first!.seq > before.lastSeq)
    }

    @Test func compactionRunsByItselfWhenDeadRecordsDominate() throws {
        let dir = TempDir()
        var options = Outbox.Options()
        options.autoCompactBytes = 16 * 1024
        let o = try Outbox.open(directory: dir.outbox, options: options)
        for i in 0..<200 {
            try o.send("t\(i)", String(repeating: "x", count: 100))
            try o.apply([.syncing("t\(i)"), .synced("t\(i)", answer)])
            try o.retire(["t\(i)"])
        }
        #expect(o.logSize < 16 * 1024 + 2048)
        #expect(LogScanner.scan(fileBytes(o.paths.log)).corruption == nil)
    }
}
