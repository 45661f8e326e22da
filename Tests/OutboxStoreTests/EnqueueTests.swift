import Foundation
import Testing
import OutboxFormat
import OutboxIO
@testable import OutboxStore

@Suite struct EnqueueTests {
    @Test func enqueueIsDurableAndVisibleToANewOpen() throws {
        let dir = TempDir()
        let a = try Outbox.open(directory: dir.outbox)
        let r = try a.send("t1", "hi there", attachments: [AttachmentSource(bytes: Array("pdf bytes".utf8), name: "x.pdf")])
        #expect(r.created && r.turn.state == .queued && r.turn.attachments[0].type == "application/pdf")
        let b = try Outbox.open(directory: dir.outbox, mode: .readOnly)
        let t = try #require(b.turn("t1"))
        #expect(t.text == "hi there" && t.attachments[0].sha256 == SHA256.hex(Array("pdf bytes".utf8)))
        #expect(fileBytes(b.blobPath(t.attachments[0].sha256)) == Array("pdf bytes".utf8))
    }

    @Test func sameIdAndContentReturnsTheEntryAndWritesNothing() throws {
        let dir = TempDir()
        let o = try Outbox.open(directory: dir.outbox)
        let first = try o.send("t1", "same", attachments: [AttachmentSource(bytes: [1, 2, 3], name: "a.bin")])
        let size = fileBytes(o.paths.log).count
        let again = try o.send("t1", "same", attachments: [AttachmentSource(bytes: [1, 2, 3], name: "a.bin")])
        #expect(!again.created && again.turn == first.turn)
        #expect(fileBytes(o.paths.log).count == size)
        // From another process's point of view too.
        let other = try Outbox.open(directory: dir.outbox)
        #expect(try !other.send("t1", "same", attachments: [AttachmentSource(bytes: [1, 2, 3], name: "a.bin")]).created)
    }

    @Test func sameIdOtherContentIsAConflict() throws {
        let dir = TempDir()
        let o = try Outbox.open(directory: dir.outbox)
        try o.send("t1", "one")
        #expect(throws: StoreError.self) { try o.send("t1", "two") }
        #expect(throws: StoreError.self) { try o.send("t1", "one", attachments: [AttachmentSource(bytes: [9], name: "z")]) }
        #expect(o.turns.count == 1)
    }

    @Test func conversationsAreIdempotentOnTheirId() throws {
        let dir = TempDir()
        let o = try Outbox.open(directory: dir.outbox)
        let (c, created) = try o.createConversation(id: "c9", title: "Trip", originSurface: "ios")
        #expect(created && c.originSurface == "ios")
        let (c2, created2) = try o.createConversation(id: "c9", title: "Trip", originSurface: "ios")
        #expect(!created2 && c2 == c)
        #expect(throws: StoreError.self) { try o.createConversation(id: "c9", title: "Other", originSurface: "ios") }
        #expect(throws: StoreError.self) { try o.createConversation(id: "c9", title: "Trip", originSurface: "web") }
    }

    @Test func badInputIsRefusedWithAReason() throws {
        let dir = TempDir()
        let o = try Outbox.open(directory: dir.outbox)
        try o.createConversation(id: "c1", title: "t", originSurface: "cli")
        func message(_ body: () throws -> Void) -> String {
            do { try body(); return "" } catch { return "\(error)" }
        }
        #expect(message { try o.send("has space") }.contains("request id"))
        #expect(message { try o.send("t1", "   ") }.contains("empty"))
        #expect(message { try o.send("t2", String(repeating: "x", count: 600_000)) }.contains("limit"))
        #expect(message { try o.enqueue(TurnDraft(requestID: "t3", conversationID: "nope", text: "x", surface: "cli")) }.contains("does not exist"))
        #expect(message { try o.send("t4", attachments: [AttachmentSource(file: dir.path + "/missing.png")]) }.contains("missing.png"))
        #expect(o.turns.isEmpty)
    }

    @Test func identicalAttachmentBytesShareOneFile() throws {
        let dir = TempDir()
        let o = try Outbox.open(directory: dir.outbox)
        try o.send("t1", attachments: [AttachmentSource(bytes: Array("same".utf8), name: "a.txt")])
        try o.send("t2", attachments: [AttachmentSource(bytes: Array("same".utf8), name: "b.txt")])
        let names = try PosixFileSystem().listDirectory(o.paths.blobs)
        #expect(names == [SHA256.hex(Array("same".utf8))])
    }

    @Test func attachmentFromAFileIsCopiedAndHashed() throws {
        let dir = TempDir()
        let src = dir.path + "/photo.jpg"
        let bytes = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        writeBytes(src, bytes)
        let o = try Outbox.open(directory: dir.outbox)
        let t = try o.send("t1", attachments: [AttachmentSource(file: src)]).turn
        #expect(t.attachments[0] == AttachmentRef(sha256: SHA256.hex(bytes), name: "photo.jpg", size: 200_000, type: "image/jpeg"))
        try FileManager.default.removeItem(atPath: src)  // the outbox holds its own copy
        #expect(fileBytes(o.blobPath(SHA256.hex(bytes))) == bytes)
    }

    @Test func filesAndDirectoriesArePrivate() throws {
        let dir = TempDir()
        let o = try Outbox.open(directory: dir.outbox)
        try o.send("t1", attachments: [AttachmentSource(bytes: [1], name: "a")])
        let fs = PosixFileSystem()
        #expect(try fs.linkStatus(o.paths.directory)!.mode & 0o777 == 0o700)
        #expect(try fs.linkStatus(o.paths.log)!.mode & 0o777 == 0o600)
        #expect(try fs.linkStatus(o.paths.blobs)!.mode & 0o777 == 0o700)
        #expect(try fs.linkStatus(o.blobPath(SHA256.hex([1])))!.mode & 0o777 == 0o600)
    }

    @Test func aSymlinkedLogIsNotFollowed() throws {
        let dir = TempDir()
        try FileManager.default.createDirectory(atPath: dir.outbox, withIntermediateDirectories: true)
        writeBytes(dir.path + "/elsewhere.jsonl", [])
        try FileManager.default.createSymbolicLink(atPath: dir.outbox + "/turns.jsonl", withDestinationPath: dir.path + "/elsewhere.jsonl")
        #expect(throws: (any Error).self) { try Outbox.open(directory: dir.outbox) }
    }

    @Test func concurrentEnqueuesInOneProcessShareSyncs() async throws {
        let dir = TempDir()
        let fs = FaultInjectingFileSystem()
        let o = try Outbox.open(directory: dir.outbox, fileSystem: fs)
        try o.createConversation(id: "c1", title: "t", originSurface: "cli")
        let before = fs.count(.fdatasync)
        await withTaskGroup(of: Void.self) { group in
            for w in 0..<8 {
                group.addTask {
                    for i in 0..<25 { _ = try? o.send("w\(w)-\(i)") }
                }
            }
        }
        #expect(o.turns.count == 200)
        let syncs = fs.count(.fdatasync) - before
        #expect(syncs <= 200, "at most one fdatasync per turn, fewer when threads overlap (\(syncs))")
        let scan = LogScanner.scan(fileBytes(o.paths.log))
        #expect(scan.corruption == nil && scan.entries.count == 201)
    }
}

@Suite struct LocationTests {
    @Test func theOutboxMayLiveBehindASymlinkButBlobsMayNot() throws {
        let dir = TempDir()
        try FileManager.default.createDirectory(atPath: dir.path + "/real", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: dir.path + "/link", withDestinationPath: dir.path + "/real")
        let o = try Outbox.open(directory: dir.path + "/link/outbox")
        try o.send("t1")
        #expect(FileManager.default.fileExists(atPath: dir.path + "/real/outbox/turns.jsonl"))

        let other = dir.path + "/o2"
        try FileManager.default.createDirectory(atPath: dir.path + "/elsewhere", withIntermediateDirectories: true)
        let o2 = try Outbox.open(directory: other)
        try FileManager.default.createSymbolicLink(atPath: other + "/blobs", withDestinationPath: dir.path + "/elsewhere")
        do {
            try o2.send("t1", attachments: [AttachmentSource(bytes: [1], name: "a")])
            Issue.record("wrote an attachment through a symlinked blobs/")
        } catch {
            #expect("\(error)".contains("symbolic link"))
        }
    }
}
