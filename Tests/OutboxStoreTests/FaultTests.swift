import Foundation
import Testing
import OutboxFormat
import OutboxIO
@testable import OutboxStore

/// ENOSPC, EIO and short writes injected through the syscall layer: nothing is acknowledged that
/// is not durable, and the store is intact or sealed, never half-written.
@Suite struct FaultTests {
    func open(_ dir: TempDir, _ fs: FaultInjectingFileSystem) throws -> Outbox {
        let o = try Outbox.open(directory: dir.outbox, fileSystem: fs)
        try o.send("t0")
        return o
    }

    func logIsClean(_ o: Outbox) -> Bool {
        let scan = LogScanner.scan(fileBytes(o.paths.log))
        return scan.corruption == nil && scan.tail == .clean
    }

    @Test(arguments: [Errno.noSpace, Errno.io])
    func aFailedWriteIsCutBackAndNothingIsAcknowledged(_ code: Errno) throws {
        let dir = TempDir()
        let fs = FaultInjectingFileSystem()
        let o = try open(dir, fs)
        let size = fileBytes(o.paths.log).count
        fs.setRule { op, path, _ in op == .write && path.hasSuffix("turns.jsonl") ? .fail(code) : nil }
        do {
            try o.send("t1")
            Issue.record("enqueue acknowledged a turn whose write failed")
        } catch {
            #expect("\(error)".contains(code.name) && "\(error)".contains("nothing was saved"))
        }
        #expect(fileBytes(o.paths.log).count == size && logIsClean(o) && o.sealed == nil)
        fs.setRule(nil)
        try o.send("t1")
        #expect(try Outbox.open(directory: dir.outbox, mode: .readOnly).turn("t1") != nil)
    }

    @Test(arguments: [1, 37, 150])
    func aShortWriteIsTruncatedBackToTheLastWholeLine(_ landed: Int) throws {
        let dir = TempDir()
        let fs = FaultInjectingFileSystem()
        let o = try open(dir, fs)
        let before = fileBytes(o.paths.log)
        fs.setRule { op, path, _ in op == .write && path.hasSuffix("turns.jsonl") ? .shortWrite(landed) : nil }
        #expect(throws: StoreError.self) { try o.send("t1") }
        #expect(fileBytes(o.paths.log) == before && o.sealed == nil)
        fs.setRule(nil)
        try o.send("t1")
        #expect(logIsClean(o))
    }

    @Test func aShortWriteThatCannotBeCutBackSeals() throws {
        let dir = TempDir()
        let fs = FaultInjectingFileSystem()
        let o = try open(dir, fs)
        fs.setRule { op, path, _ in
            if op == .write && path.hasSuffix("turns.jsonl") { return .shortWrite(20) }
            if op == .truncate { return .fail(.io) }
            return nil
        }
        #expect(throws: StoreError.self) { try o.send("t1") }
        #expect(o.sealed != nil)
        fs.setRule(nil)
        do { try o.send("t2"); Issue.record("a sealed store accepted a write") } catch let e as StoreError {
            guard case .sealed = e else { Issue.record("expected sealed, got \(e)"); return }
        }
    }

    @Test(arguments: [Errno.io, Errno.noSpace])
    func aFailedFdatasyncSealsAndIsNeverRetried(_ code: Errno) throws {
        let dir = TempDir()
        let fs = FaultInjectingFileSystem()
        let o = try open(dir, fs)
        fs.setRule { op, path, _ in op == .fdatasync && path.hasSuffix("turns.jsonl") ? .fail(code) : nil }
        do {
            try o.send("t1")
            Issue.record("acknowledged after a failed fdatasync")
        } catch {
            #expect("\(error)".contains("sealed"))
        }
        fs.setRule(nil)
        let syncsBefore = fs.count(.fdatasync)
        #expect(throws: StoreError.self) { try o.send("t2") }
        #expect(fs.count(.fdatasync) == syncsBefore, "a sealed store must not fsync again and trust it")
        // The seal survives a restart, names the file and the reason, and reset clears it.
        let again = try Outbox.open(directory: dir.outbox)
        let seal = try #require(again.sealed)
        #expect(seal.path == again.paths.log && seal.reason.contains("fdatasync failed") && seal.reason.contains(code.name))
        let reset = try Outbox.reset(directory: dir.outbox, force: false)
        #expect(FileManager.default.fileExists(atPath: reset.asideDirectory + "/turns.jsonl.sealed"))
        let fresh = try Outbox.open(directory: dir.outbox)
        #expect(fresh.sealed == nil)
        try fresh.send("t3")
    }

    @Test(arguments: [FileOperation.write, .fsync, .rename, .syncDirectory, .open])
    func aFailureWhileStoringAnAttachmentAppendsNoLine(_ op: FileOperation) throws {
        let dir = TempDir()
        let fs = FaultInjectingFileSystem()
        let o = try open(dir, fs)
        let before = fileBytes(o.paths.log)
        fs.setRule { o2, path, _ in o2 == op && path.contains("/blobs") ? .fail(.noSpace) : nil }
        do {
            try o.send("t1", attachments: [AttachmentSource(bytes: Array("photo".utf8), name: "p.jpg")])
            Issue.record("enqueue succeeded though its attachment could not be stored")
        } catch {
            #expect("\(error)".contains("ENOSPC"), "error should say what happened: \(error)")
        }
        #expect(fileBytes(o.paths.log) == before && o.sealed == nil)
        fs.setRule(nil)
        #expect(try o.verify().tempFiles.isEmpty)
        try o.send("t1", attachments: [AttachmentSource(bytes: Array("photo".utf8), name: "p.jpg")])
    }

    @Test func aFailedDirectorySyncWhenCreatingTheOutboxIsReported() throws {
        let dir = TempDir()
        let fs = FaultInjectingFileSystem(rule: { op, _, _ in op == .syncDirectory ? .fail(.io) : nil })
        #expect(throws: (any Error).self) { try Outbox.open(directory: dir.outbox, fileSystem: fs) }
    }
}

@Suite struct JournalTests {
    @Test func aFieldNamedLikeTheEnvelopeIsRefused() throws {
        let dir = TempDir()
        let (journal, _) = try Journal.open(path: dir.path + "/j.jsonl")
        #expect(throws: StoreError.self) { try journal.append([.init(type: "x", fields: ["at": "2026-11-30T00:00:00.000Z"])]) }
        let written = try journal.append([.init(type: "x", fields: ["when": "now"])])
        #expect(written.map(\.seq) == [1])
    }
}

@Suite struct ChunkedLoadTests {
    /// A log larger than one read chunk loads the same as the scanner reads it whole, and damage
    /// at a chunk boundary is still told apart from a torn tail.
    @Test func aLogLargerThanOneChunkLoadsWholeAndClassifiesDamageAcrossChunks() throws {
        let dir = TempDir()
        var bytes: [UInt8] = []
        var seq: Int64 = 0
        while bytes.count < Journal.readChunk + 300_000 {
            seq += 1
            bytes += LineCodec.encode(seq: seq, type: "x", at: "2026-11-30T00:00:00.000Z", fields: ["pad": .string(String(repeating: "p", count: 500))])
        }
        let path = dir.path + "/big.jsonl"
        writeBytes(path, bytes)
        let (_, entries) = try Journal.open(path: path, writable: false)
        #expect(entries == LogScanner.scan(bytes).entries && entries.count == Int(seq))

        // Damage the line that straddles the first chunk boundary: corruption, not a torn tail.
        let straddling = try #require(entries.first { $0.offset < Int64(Journal.readChunk) && $0.offset + Int64($0.length) > Int64(Journal.readChunk) })
        var damaged = bytes
        damaged[Int(straddling.offset) + 10] ^= 0x01
        writeBytes(path, damaged)
        let (j2, e2) = try Journal.open(path: path, writable: false)
        #expect(j2.sealed?.line == straddling.line && e2.count == straddling.line - 1)

        // Damage the last line of the first chunk's whole lines: records follow, so corruption.
        let lastInChunk = try #require(entries.last { $0.offset + Int64($0.length) <= Int64(Journal.readChunk) })
        damaged = bytes
        damaged[Int(lastInChunk.offset) + 10] ^= 0x01
        writeBytes(path, damaged)
        let (j3, _) = try Journal.open(path: path, writable: false)
        #expect(j3.sealed?.line == lastInChunk.line)

        // Garbage lines from there to the end of the file, across the chunk boundary: no record
        // follows, so it is a torn tail, exactly as a whole-file scan says.
        damaged = Array(bytes[0..<Int(lastInChunk.offset)])
        while damaged.count < Journal.readChunk + 100_000 { damaged += Array("garbage line\n".utf8) }
        writeBytes(path, damaged)
        let (j4, e4) = try Journal.open(path: path, writable: false)
        #expect(j4.sealed == nil && e4.count == lastInChunk.line - 1)
        #expect(j4.unrepairedTail.offset == lastInChunk.offset)
        #expect(LogScanner.scan(damaged).corruption == nil)
    }
}

@Suite struct CompactionFaultTests {
    /// Before rewriting, a compaction makes sure every record it read (here: appended by
    /// another process) is durable; if that sync fails it seals (A4′) instead of rewriting.
    @Test func aFailedSyncBeforeCompactionSealsInsteadOfRewriting() throws {
        let dir = TempDir()
        let path = dir.path + "/j.jsonl"
        let fs = FaultInjectingFileSystem()
        let (compactor, _) = try Journal.open(path: path, fileSystem: fs)
        let (other, _) = try Journal.open(path: path)  // another process's view
        _ = try other.append([.init(type: "x", fields: ["n": 1])])
        fs.setRule { op, p, _ in op == .fdatasync && p == path ? .fail(.io) : nil }
        #expect(throws: StoreError.self) { _ = try compactor.rewrite { _ in [] } }
        #expect(compactor.sealed?.reason.contains("fdatasync failed") == true)
        #expect(LogScanner.scan(fileBytes(path)).entries.count == 1, "the log was not rewritten")
    }
}
