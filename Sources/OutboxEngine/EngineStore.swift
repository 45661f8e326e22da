import Foundation
import Synchronization
import EngineProtocol
import OutboxIO
import enum OutboxFormat.JSONValue
import struct OutboxFormat.JSONObject
import struct OutboxFormat.LogEntry
import struct OutboxFormat.SHA256
import class OutboxStore.Journal
import struct OutboxStore.BlobStore
import enum OutboxStore.StoreError

/// A refusal with its HTTP status, stable code and a sentence saying what, where and why.
public struct EngineError: Error, Sendable, Equatable, CustomStringConvertible {
    public var status: Int
    public var code: String
    public var message: String
    public init(_ status: Int, _ code: String, _ message: String) {
        self.status = status; self.code = code; self.message = message
    }
    public var description: String { "\(status) \(code): \(message)" }
}

/// The engine's durable state: a journal (JSONL + fdatasync, OutboxStore's primitive) and a
/// content-addressed blob directory. Every change is on disk before its caller hears "done".
///
/// Layout of the data directory:
///   journal.jsonl      conversations, turns (= idempotency records), replies, blob index
///   blobs/<sha256>     attachment bytes, written temp → fsync → rename → fsync dir before indexing
final class EngineStore: @unchecked Sendable {
    let dataDirectory: String
    let blobDirectory: String
    private let fs: any FileSystem
    private let journal: Journal
    private let blobs: BlobStore
    private let commitDelay: Duration
    private let inner: Mutex<Inner>
    private let replyArrived = NSCondition()

    struct Counters: Sendable {
        var turnPosts = 0
        var idempotentReplays = 0
        var statusChecks = 0
        var rejected = 0
    }

    private struct Inner: Sendable {
        var state = EngineState()
        var pendingTurns: Set<String> = []
        var pendingConversations: Set<String> = []
        var counters = Counters()
    }

    init(dataDirectory: String, fileSystem: any FileSystem = PosixFileSystem(), commitDelay: Duration = .zero) throws {
        self.dataDirectory = dataDirectory
        self.blobDirectory = dataDirectory + "/blobs"
        self.fs = fileSystem
        self.commitDelay = commitDelay
        // Missing parents too (`--data ~/.local/share/outbox-engine-server` on a fresh machine),
        // each new entry's parent fsynced.
        try Journal.ensureDirectory(dataDirectory, fs: fileSystem)
        self.blobs = BlobStore(directory: blobDirectory, fileSystem: fileSystem)
        try blobs.ensureDirectory()
        let (journal, entries) = try Journal.open(path: dataDirectory + "/journal.jsonl", fileSystem: fileSystem)
        self.journal = journal
        var state = EngineState()
        for e in entries { try state.apply(type: e.type, fields: e.fields, seq: e.seq) }
        inner = Mutex(Inner(state: state))
    }

    // MARK: - Reads

    func read<T>(_ body: (EngineState) -> T) -> T { inner.withLock { body($0.state) } }

    func count(_ body: (inout Counters) -> Void) { inner.withLock { body(&$0.counters) } }

    func stats(uptime: Double) -> Stats {
        inner.withLock { i in
            Stats(conversations: i.state.conversations.count, turns: i.state.turns.count, blobs: i.state.blobs.count,
                  answered: i.state.answeredCount, failed: i.state.failedCount,
                  turnPosts: i.counters.turnPosts, idempotentReplays: i.counters.idempotentReplays,
                  statusChecks: i.counters.statusChecks, rejected: i.counters.rejected, uptimeSeconds: uptime)
        }
    }

    // MARK: - Conversations

    /// 201 + stored conversation when new, 200 + the same when identical, 422 when the id holds other content.
    func createConversation(_ c: Conversation) throws(EngineError) -> (created: Bool, Conversation) {
        let decision: EngineState.ConversationDecision = try inner.withLock { (i) throws(EngineError) in
            if i.pendingConversations.contains(c.id) {
                throw EngineError(409, ErrorCode.idempotencyInProgress, "conversation \(c.id) is being created by another request; retry")
            }
            let d = i.state.decide(c)
            if d == .create { i.pendingConversations.insert(c.id) }
            return d
        }
        switch decision {
        case .replay(let existing): return (false, existing)
        case .conflict(let existing):
            throw EngineError(422, ErrorCode.conversationConflict,
                              "conversation \(c.id) already exists with other content (title \"\(existing.title)\", originSurface \"\(existing.originSurface)\", createdAt \(existing.createdAt))")
        case .create:
            defer { inner.withLock { _ = $0.pendingConversations.remove(c.id) } }
            let entry = try commit(EngineRecord.conversation, EngineRecord.fields(c))
            try inner.withLock { (i) throws(EngineError) in try apply(&i.state, entry) }
            return (true, c)
        }
    }

    // MARK: - Turns

    enum TurnOutcome: Sendable, Equatable {
        case created(TurnReceipt)
        case replayed(TurnReceipt)
    }

    /// The idempotent turn append. `created` is returned only after the turn's record is fdatasynced.
    func postTurn(conversationId: String, _ post: TurnPost) throws(EngineError) -> TurnOutcome {
        let decision: EngineState.TurnDecision = try inner.withLock { (i) throws(EngineError) in
            if i.pendingTurns.contains(post.requestId) {
                throw EngineError(409, ErrorCode.idempotencyInProgress,
                                  "a request with Idempotency-Key \(post.requestId) is still being processed; ask GET /api/turns/\(post.requestId) or retry")
            }
            let d = i.state.decide(conversationId: conversationId, post)
            switch d {
            case .create: i.pendingTurns.insert(post.requestId)
            case .replay: i.counters.idempotentReplays += 1
            default: break
            }
            return d
        }
        switch decision {
        case .replay(let receipt): return .replayed(receipt)
        case .keyReused(let existing):
            let why = existing.conversationId != conversationId
                ? "it was used for a turn in conversation \(existing.conversationId)"
                : "it was used for a turn with a different body (createdAt \(existing.post.createdAt), \(existing.post.text.utf8.count) bytes of text)"
            throw EngineError(422, ErrorCode.idempotencyKeyReused, "Idempotency-Key \(post.requestId) cannot be reused: \(why)")
        case .conversationMissing:
            throw EngineError(404, ErrorCode.conversationNotFound, "conversation \(conversationId) does not exist; create it with POST /api/conversations first")
        case .blobsMissing(let shas):
            throw EngineError(424, ErrorCode.blobMissing, "attachment blobs not uploaded: \(shas.joined(separator: ", ")); PUT /api/blobs/{sha256} first")
        case .sizeMismatch(let a, let stored):
            throw EngineError(422, ErrorCode.attachmentSizeMismatch, "attachment \(a.name) says size \(a.size) but blob \(a.sha256) has \(stored) bytes")
        case .create:
            defer { inner.withLock { _ = $0.pendingTurns.remove(post.requestId) } }
            if commitDelay > .zero { Thread.sleep(forTimeInterval: Double(commitDelay.components.seconds) + Double(commitDelay.components.attoseconds) / 1e18) }
            let turn = StoredTurn(conversationId: conversationId, post: post, receivedAt: RFC3339.now())
            let entry = try commit(EngineRecord.turn, EngineRecord.fields(turn))
            try inner.withLock { (i) throws(EngineError) in try apply(&i.state, entry) }
            return .created(turn.receipt)
        }
    }

    // MARK: - Replies

    func recordReply(requestId: String, _ reply: Reply) throws(EngineError) {
        let entry = try commit(EngineRecord.reply, EngineRecord.fields(requestId: requestId, reply))
        try inner.withLock { (i) throws(EngineError) in try apply(&i.state, entry) }
        replyArrived.lock()
        replyArrived.broadcast()
        replyArrived.unlock()
    }

    /// Waits until the turn has a reply or the deadline passes; returns the latest status.
    func waitForReply(_ requestId: String, until deadline: Date, cancelled: () -> Bool) -> TurnStatus? {
        replyArrived.lock()
        defer { replyArrived.unlock() }
        while true {
            let status = read { $0.status(of: requestId) }
            if status == nil || status?.reply != nil || Date() >= deadline || cancelled() { return status }
            _ = replyArrived.wait(until: min(deadline, Date().addingTimeInterval(0.25)))
        }
    }

    // MARK: - Blobs

    func hasBlob(_ sha256: String) -> Int64? { read { $0.blobs[sha256] } }

    /// Stores bytes under their hash: temp → fsync → rename → fsync dir, then the index record.
    /// Returns false when the blob was already there.
    func putBlob(_ sha256: String, _ bytes: [UInt8]) throws(EngineError) -> Bool {
        let actual = SHA256.hex(bytes)
        guard actual == sha256 else {
            throw EngineError(400, ErrorCode.blobHashMismatch, "the \(bytes.count) bytes sent hash to \(actual), not \(sha256)")
        }
        if hasBlob(sha256) != nil { return false }
        do {
            let stored = try blobs.put(.bytes(bytes))
            guard stored.sha256 == sha256 else {
                throw EngineError(500, ErrorCode.internalError, "blob store hashed \(bytes.count) bytes to \(stored.sha256), expected \(sha256)")
            }
        } catch let e as EngineError {
            throw e
        } catch {
            throw EngineError(503, ErrorCode.storageFailed, "could not store blob \(sha256) in \(blobDirectory): \(error)")
        }
        let entry = try commit(EngineRecord.blob, EngineRecord.fields(blob: sha256, size: Int64(bytes.count)))
        try inner.withLock { (i) throws(EngineError) in try apply(&i.state, entry) }
        return true
    }

    // MARK: - Journal

    private func commit(_ type: String, _ fields: JSONObject) throws(EngineError) -> LogEntry {
        do {
            guard let entry = try journal.append([Journal.NewRecord(type: type, fields: fields)]).first else {
                throw EngineError(500, ErrorCode.internalError, "journal append of \(type) returned no entry")
            }
            return entry
        } catch let error as EngineError {
            throw error
        } catch StoreError.invalidInput(let why) {
            throw EngineError(413, ErrorCode.bodyTooLarge, "\(type) cannot be stored: \(why)")
        } catch StoreError.sealed(let info) {
            throw EngineError(503, ErrorCode.storageFailed,
                              "the engine's journal is sealed and refuses writes (\(info)); nothing was acknowledged")
        } catch {
            throw EngineError(503, ErrorCode.storageFailed,
                              "could not make \(type) durable in \(dataDirectory)/journal.jsonl: \(error); nothing was acknowledged")
        }
    }

    private func apply(_ state: inout EngineState, _ entry: LogEntry) throws(EngineError) {
        do { try state.apply(type: entry.type, fields: entry.fields, seq: entry.seq) }
        catch { throw EngineError(500, ErrorCode.internalError, "\(error)") }
    }
}
