import Foundation
import Testing
import OutboxFormat
import OutboxIO
@testable import OutboxStore

@Suite struct TornTailTests {
    @Test func theLockHolderCutsATornTailAndKeepsItsBytes() throws {
        let dir = TempDir()
        do { let o = try Outbox.open(directory: dir.outbox); try o.send("t1") }
        let good = fileBytes(dir.outbox + "/turns.jsonl")
        let torn = Array(#"{"v":1,"seq":3,"type":"turn","at":"2026-11-30T1"#.utf8)
        writeBytes(dir.outbox + "/turns.jsonl", good + torn)
        // A reader leaves it alone: a writer may be mid-append.
        let reader = try Outbox.open(directory: dir.outbox, mode: .readOnly)
        #expect(reader.sealed == nil && reader.turn("t1") != nil)
        #expect(reader.pendingTail == .incomplete(offset: Int64(good.count), length: torn.count))
        #expect(fileBytes(dir.outbox + "/turns.jsonl") == good + torn)
        // The writer repairs: bytes aside, truncate, not sealed.
        let o = try Outbox.open(directory: dir.outbox)
        #expect(o.sealed == nil && fileBytes(o.paths.log) == good)
        let repair = try #require(o.tailRepairs.first)
        #expect(fileBytes(repair.savedAs) == torn && repair.savedAs.contains("turns.jsonl.torn-"))
        try o.send("t2")
        #expect(LogScanner.scan(fileBytes(o.paths.log)).corruption == nil)
    }
}

@Suite struct SealTests {
    /// Builds an outbox with three turns, then flips one byte inside the second turn's line.
    func damaged(_ dir: TempDir) throws -> (bytes: [UInt8], offset: Int64) {
        let o = try Outbox.open(directory: dir.outbox)
        try o.send("t1", "first", attachments: [AttachmentSource(bytes: Array("a1".utf8), name: "a1.txt")])
        try o.send("t2", "second")
        try o.send("t3", "third", attachments: [AttachmentSource(bytes: Array("a3".utf8), name: "a3.txt")])
        try o.apply([.syncing("t1"), .synced("t1", answer)])
        let entry = try #require(o.history("t2").first)
        var bytes = fileBytes(o.paths.log)
        bytes[Int(entry.offset) + 40] ^= 0x20
        writeBytes(o.paths.log, bytes)
        return (bytes, entry.offset)
    }

    @Test func corruptionSealsEveryWriteWithFileLineAndOffset() throws {
        let dir = TempDir()
        let (bytes, offset) = try damaged(dir)
        let o = try Outbox.open(directory: dir.outbox)
        let seal = try #require(o.sealed)
        #expect(seal.line == 3 && seal.offset == offset && seal.path == o.paths.log && seal.reason.contains("checksum"))
        // Reads still show what decoded before the damage.
        #expect(o.turn("t1") != nil && o.turn("t2") == nil)
        for write in [{ try o.send("t9") }, { try o.apply(.syncing("t1")) }, { _ = try o.compact() },
                      { _ = try o.createConversation(id: "c2", title: "x", originSurface: "cli") }] as [() throws -> Void] {
            do {
                try write()
                Issue.record("a sealed outbox accepted a write")
            } catch let e as StoreError {
                guard case .sealed = e else { Issue.record("expected sealed, got \(e)"); continue }
                #expect("\(e)".contains("line 3") && "\(e)".contains("byte offset \(offset)") && "\(e)".contains("outbox reset"))
            }
        }
        #expect(fileBytes(o.paths.log) == bytes, "a sealed log is never touched")
    }

    @Test func resetRefusesAHealthyOutboxUnlessForced() throws {
        let dir = TempDir()
        let o = try Outbox.open(directory: dir.outbox)
        try o.send("t1")
        #expect(throws: StoreError.self) { try Outbox.reset(directory: dir.outbox, force: false) }
        let r = try Outbox.reset(directory: dir.outbox, force: true)
        #expect(r.wasSealed == nil && FileManager.default.fileExists(atPath: r.damagedLog))
    }

    @Test func resetKeepsTheDamagedLogAndSalvageReimportsWhatWasNotDelivered() throws {
        let dir = TempDir()
        let (bytes, _) = try damaged(dir)
        let r = try Outbox.reset(directory: dir.outbox, force: false)
        #expect(fileBytes(r.damagedLog) == bytes)
        #expect(r.asideDirectory.hasPrefix(dir.outbox + "/turns.damaged-") && r.blobsKept == 2)
        let fresh = try Outbox.open(directory: dir.outbox)
        #expect(fresh.sealed == nil && fresh.turns.isEmpty)
        // The fresh outbox's sweep must not have deleted the damaged log's attachments for good.
        #expect(FileManager.default.fileExists(atPath: r.asideDirectory + "/blobs/" + SHA256.hex(Array("a3".utf8))))
        let report = try fresh.salvage(from: r.damagedLog)
        #expect(report.unreadableLines == [3])
        #expect(report.skippedDelivered == ["t1"])
        #expect(report.imported == ["t3"])
        let t3 = try #require(fresh.turn("t3"))
        #expect(t3.text == "third" && t3.state == .queued && t3.attachments[0].name == "a3.txt")
        #expect(fileBytes(fresh.blobPath(t3.attachments[0].sha256)) == Array("a3".utf8))
        // Salvaging again imports nothing twice.
        #expect(try fresh.salvage(from: r.damagedLog).alreadyPresent == ["t3"])
    }

    @Test func aSalvagedTurnThatWasAttemptedAsksTheEngineFirst() throws {
        let dir = TempDir()
        let o = try Outbox.open(directory: dir.outbox)
        try o.send("t1")
        try o.apply(.syncing("t1"))
        let r = try Outbox.reset(directory: dir.outbox, force: true)
        let fresh = try Outbox.open(directory: dir.outbox)
        _ = try fresh.salvage(from: r.damagedLog)
        #expect(fresh.turn("t1")?.mayHaveLanded == true && fresh.turn("t1")?.state == .queued)
    }
}

@Suite struct SalvageTornTests {
    /// A bit flipped in the last line looks exactly like a torn write, so the writer cuts it
    /// aside; salvage, a person's explicit act, brings the turn back from the aside file.
    @Test func salvageTakesAWholeRecordBackFromATornTailFile() throws {
        let dir = TempDir()
        do {
            let o = try Outbox.open(directory: dir.outbox)
            try o.send("t1", "first")
            try o.send("t2", "the last line")
        }
        var bytes = fileBytes(dir.outbox + "/turns.jsonl")
        let i = try #require(String(decoding: bytes, as: UTF8.self).range(of: "the last line")).lowerBound.utf16Offset(in: String(decoding: bytes, as: UTF8.self))
        bytes[i] ^= 0x20  // "The last line"
        writeBytes(dir.outbox + "/turns.jsonl", bytes)
        let o = try Outbox.open(directory: dir.outbox)
        #expect(o.sealed == nil && o.turn("t2") == nil)
        let aside = try #require(o.tailRepairs.first?.savedAs)
        let report = try o.salvage(from: aside)
        #expect(report.acceptedDespiteChecksum == [1] && report.imported == ["t2"])
        #expect(o.turn("t2")?.text == "The last line" && o.turn("t2")?.conversationID == "c1")
    }
}
