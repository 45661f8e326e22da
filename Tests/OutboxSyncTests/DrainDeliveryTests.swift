import Foundation
import Testing
import EngineProtocol
import OutboxFormat
import OutboxIO
import OutboxStore
@testable import OutboxSync

/// The drain against the real engine process on loopback.
@Suite(.serialized) struct DrainDeliveryTests {
    /// Three conversations, some turns with attachments (one shared by two turns): everything
    /// arrives once, in order, with the conversation's origin surface; replies are recorded;
    /// retention 0 retires the turns and their attachment bytes.
    @Test func deliversConversationsAttachmentsAndTurnsInOrderAndRecordsReplies() throws {
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.engineData)
        let outbox = try Outbox.open(directory: dir.outbox)
        var expected: [String: [String]] = [:]
        let shared = Array("shared bytes".utf8)
        for c in ["a", "b", "c"] {
            for n in 0..<5 {
                let id = "\(c)-\(n)"
                var att: [AttachmentSource] = []
                if n == 1 { att.append(AttachmentSource(bytes: shared, name: "shared.txt")) }
                if n == 3 { att.append(AttachmentSource(bytes: Array("only \(id)".utf8) + [UInt8](repeating: 7, count: 5000), name: "\(id).bin")) }
                try outbox.send(id, "turn \(n) of \(c)", conversation: c, attachments: att)
                expected[c, default: []].append(id)
            }
        }
        let events = EventLog()
        var options = Drain.Options()
        options.replyWaitMillis = 5_000
        let drain = Drain(outbox: outbox, client: engine.client(), options: options, onEvent: events.callback)
        let report = try drain.runOnce()

        #expect(report.delivered.count == 15)
        #expect(report.replayed.isEmpty && report.foundByStatusCheck.isEmpty && report.failed.isEmpty)
        #expect(report.conversationsSynced.sorted() == ["a", "b", "c"])
        #expect(report.blobsUploaded == 4, "one shared blob and three unique ones")
        #expect(report.engineReachable && report.pending == 0)
        try expectEngineHolds(engine, expected)
        let stats = try engine.stats()
        #expect(stats.conversations == 3 && stats.blobs == 4 && stats.idempotentReplays == 0)
        for c in try engine.client().conversationTurns("a") { #expect(c.conversationID == "a") }

        // Replies (the echo responder) are durable in the outbox.
        let reopened = try Outbox.open(directory: dir.outbox, mode: .readOnly)
        for t in reopened.turns {
            #expect(t.state == .synced)
            #expect(t.reply?.status == "answered", "turn \(t.id) reply: \(String(describing: t.reply))")
            #expect(t.reply?.text?.contains(t.text) == true, "echo reply of \(t.id): \(String(describing: t.reply?.text))")
        }
        #expect(reopened.conversations.allSatisfy { $0.engineOriginSurface == "cli" })
        // Progress: each turn went sending → delivered → thinking or reply.
        let sending = events.all.compactMap { if case .sending(let id, _) = $0 { return id }; return nil }
        for c in ["a", "b", "c"] {
            #expect(sending.filter { $0.hasPrefix("\(c)-") } == expected[c]!, "conversation \(c) went out in order")
        }
        #expect(events.all.filter { if case .reply = $0 { return true }; return false }.count == 15)

        // Retention 0: retired at once, attachment bytes gone.
        var now = Drain.Options()
        now.retentionMillis = 0
        let second = try Drain(outbox: outbox, client: engine.client(), options: now).runOnce()
        #expect(second.retired == 15)
        #expect(second.requests == 0, "nothing left to send or poll")
        try outbox.refresh()
        #expect(outbox.turns.allSatisfy { $0.state == .retired })
        #expect(try PosixFileSystem().listDirectory(outbox.paths.blobs).isEmpty)
    }

    /// One drain per outbox: a second one is refused while the first holds the lock.
    @Test func secondDrainIsRefusedWhileOneRuns() throws {
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.engineData)
        let outbox = try Outbox.open(directory: dir.outbox)
        try outbox.send("t1")
        let held = try #require(try FileLock.acquire(outbox.paths.drainLock, .exclusive, wait: false, fileSystem: PosixFileSystem()))
        let drain = Drain(outbox: outbox, client: engine.client())
        #expect(throws: DrainError.self) { try drain.runOnce() }
        held.release()
        #expect(try drain.runOnce().delivered == ["t1"])
    }

    /// A drain that died mid-attempt leaves `syncing`; the next drain requeues it, asks the engine,
    /// and marks it synced without sending it again when the engine has it.
    @Test func turnFoundSyncingIsCheckedAndNotResent() throws {
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.engineData)
        var opts = Outbox.Options()
        opts.recoverAtOpen = false
        let outbox = try Outbox.open(directory: dir.outbox, options: opts)
        try outbox.send("landed", "one", conversation: "c")
        try outbox.send("lost", "two", conversation: "c")
        // Simulate the dead drain: conversation created, both marked syncing, only the first posted.
        let client = engine.client()
        _ = try client.createConversation(id: "c", title: "title of c", originSurface: "cli", createdAt: outbox.conversation("c")!.createdAt)
        try outbox.apply([.syncing("landed"), .syncing("lost")])
        let t = outbox.turn("landed")!
        _ = try client.postTurn(conversationID: "c", requestID: t.id, text: t.text, attachments: [], createdAt: t.createdAt, surface: t.surface)

        let report = try Drain(outbox: outbox, client: client).runOnce()
        #expect(report.requeuedAtStart.sorted() == ["landed", "lost"])
        #expect(report.foundByStatusCheck == ["landed"])
        #expect(report.delivered == ["lost"])
        let stats = try engine.stats()
        #expect(stats.turns == 2 && stats.turnPosts == 2 && stats.idempotentReplays == 0)
        #expect(stats.statusChecks >= 2, "both turns may have landed: both were checked")
        try expectEngineHolds(engine, ["c": ["landed", "lost"]])
    }
}
