import Foundation
import OutboxFormat
import OutboxIO

/// Where an outbox keeps its files.
public struct OutboxPaths: Sendable {
    public let directory: String
    public var log: String { directory + "/turns.jsonl" }
    /// flock'd around every append, sweep, compaction and reset.
    public var lock: String { directory + "/lock" }
    /// Held by the one running drain.
    public var drainLock: String { directory + "/drain.lock" }
    public var blobs: String { directory + "/blobs" }
    /// Shared by enqueues while they stage attachments; a sweep deletes blobs only when it can
    /// take it exclusively, so a blob about to be named is never swept.
    public var blobsLock: String { directory + "/blobs.lock" }
    public init(directory: String) {
        var d = directory
        while d.count > 1 && d.hasSuffix("/") { d.removeLast() }
        self.directory = d
    }
}

/// One outbox directory. Several processes may open it at once; every write catches up with
/// the others under the log's lock first. Thread-safe.
public final class Outbox: @unchecked Sendable {
    public enum Mode: Sendable { case readWrite, readOnly }

    public struct Options: Sendable {
        /// Compact automatically when the log is larger than this and dead records dominate.
        public var autoCompactBytes: Int64 = 1 << 20
        /// Run the recovery steps at open (torn tail, syncing → queued, attachment checks, sweep).
        public var recoverAtOpen = true
        public init() {}
    }

    public let paths: OutboxPaths
    public let fileSystem: any FileSystem
    public let mode: Mode
    public let options: Options
    let journal: Journal
    let blobStore: BlobStore
    let clock: @Sendable () -> Int64
    private let mutex = NSLock()
    private var state = OutboxState()
    /// What recovery did at this open (for `status`).
    public internal(set) var recoveryNotes: [String] = []

    private init(paths: OutboxPaths, fileSystem: any FileSystem, mode: Mode, options: Options, journal: Journal,
                 clock: @escaping @Sendable () -> Int64) {
        self.paths = paths; self.fileSystem = fileSystem; self.mode = mode; self.options = options
        self.journal = journal; self.clock = clock
        self.blobStore = BlobStore(directory: paths.blobs, fileSystem: fileSystem)
    }

    public static func open(directory: String, mode: Mode = .readWrite, fileSystem: any FileSystem = PosixFileSystem(),
                            options: Options = Options(),
                            clock: @escaping @Sendable () -> Int64 = Journal.systemClock) throws -> Outbox {
        let paths = OutboxPaths(directory: directory)
        if mode == .readOnly, try fileSystem.linkStatus(paths.log) == nil {
            throw StoreError.notFound("no outbox at \(paths.directory) (nothing has been sent from here yet)")
        }
        if mode == .readWrite {
            try Journal.ensureDirectory(paths.directory, fs: fileSystem)
            if let st = try fileSystem.linkStatus(paths.directory), st.mode & 0o077 != 0 {
                try fileSystem.setMode(paths.directory, 0o700)
            }
        }
        // Fold while reading: a large log is never held as records and state at once.
        var state = OutboxState()
        var seal: SealInfo?
        let journal = try Journal.open(path: paths.log, lockPath: paths.lock, fileSystem: fileSystem,
                                       writable: mode == .readWrite, clock: clock) { entry in
            guard seal == nil else { return }
            if let reason = state.apply(entry) {
                seal = SealInfo(path: paths.log, line: entry.line, offset: entry.offset, reason: reason)
            }
        }
        let outbox = Outbox(paths: paths, fileSystem: fileSystem, mode: mode, options: options, journal: journal, clock: clock)
        outbox.mutex.withLock {
            outbox.state = state
            outbox.semanticSeal = seal
        }
        for r in journal.repairs {
            outbox.recoveryNotes.append("cut a torn last line (\(r.length) bytes at offset \(r.offset): \(r.reason)); bytes kept in \(r.savedAs)")
        }
        if mode == .readWrite && options.recoverAtOpen && outbox.sealed == nil {
            try outbox.recover()
        }
        return outbox
    }

    /// Applies an update from the journal to the fold. Caller holds `mutex`.
    private func fold(_ update: Journal.Update) {
        let entries: [LogEntry]
        switch update {
        case .reloaded(let all):
            state = OutboxState()
            entries = all
        case .appended(let new):
            entries = new
        }
        if semanticSeal != nil && !isReload(update) { return }
        if isReload(update) { semanticSeal = nil }
        for e in entries {
            if let reason = state.apply(e) {
                let info = SealInfo(path: paths.log, line: e.line, offset: e.offset, reason: reason)
                // Not sealed in the journal: the same file seals the same way at every open.
                semanticSeal = info
                return
            }
        }
    }
    private var semanticSeal: SealInfo?
    private func isReload(_ u: Journal.Update) -> Bool { if case .reloaded = u { return true }; return false }

    /// Folds an update; returns the seal a record caused, if any. Safe inside journal callbacks.
    @discardableResult
    func mutex_fold(_ update: Journal.Update) -> SealInfo? {
        mutex.withLock { fold(update); return semanticSeal }
    }

    // MARK: - reading

    /// Picks up what other processes wrote since we last looked.
    public func refresh() throws {
        let update = try journal.refresh()
        mutex.withLock { fold(update) }
    }

    public var sealed: SealInfo? { journal.sealed ?? mutex.withLock { semanticSeal } }
    public var snapshot: OutboxState { mutex.withLock { state } }
    public var turns: [Turn] { mutex.withLock { state.orderedTurns } }
    public var conversations: [Conversation] { mutex.withLock { state.orderedConversations } }
    public func turn(_ id: String) -> Turn? { mutex.withLock { state.turns[id] } }
    public func conversation(_ id: String) -> Conversation? { mutex.withLock { state.conversations[id] } }
    public var logSize: Int64 { journal.size }
    public var tailRepairs: [TailRepair] { journal.repairs }
    /// A torn tail a read-only open saw and left for the lock holder.
    public var pendingTail: LogScan.Tail { journal.unrepairedTail }
    public func blobPath(_ sha256: String) -> String { blobStore.path(for: sha256) }
    public func readBlob(_ sha256: String) throws -> [UInt8] { try blobStore.read(sha256) }

    /// Every record of one turn (or conversation), read from the file as written.
    public func history(_ id: String) throws -> [LogEntry] {
        let bytes = try fileSystem.readFile(paths.log)
        return LogScanner.scan(bytes).entries.filter {
            $0.fields["id"]?.stringValue == id || ($0.fields["id"] == nil && $0.fields["conversation"]?.stringValue == id)
        }
    }

    // MARK: - writing

    /// Runs a write: catch up under the lock, let `body` decide the records from the current
    /// state, append them in one write, fold them, and return once they are durable.
    @discardableResult
    func commit<T>(_ body: (OutboxState) throws -> ([OutboxRecord], T)) throws -> T {
        guard mode == .readWrite else { throw StoreError.invalidInput("the outbox was opened read-only") }
        var written: [OutboxRecord] = []
        let (result, _) = try journal.transaction({ update in
            try mutex.withLock {
                fold(update)
                if let s = semanticSeal { throw StoreError.sealed(s) }
                let (records, r) = try body(state)
                written = records
                return (records.map { Journal.NewRecord(type: $0.typeName, fields: $0.fields) }, r)
            }
        }, didAppend: { entries in
            // Our own records, just checked by `body`: fold them without decoding them again.
            mutex.withLock {
                for (record, entry) in zip(written, entries) where semanticSeal == nil {
                    if let reason = state.apply(record, entry) {
                        semanticSeal = SealInfo(path: paths.log, line: entry.line, offset: entry.offset, reason: reason)
                    }
                }
            }
        })
        try compactIfDominatedByDeadRecords()
        return result
    }

    func now() -> String { Timestamp.format(millis: clock()) }

    // MARK: - conversations

    /// Creates a conversation, or returns the one already held under this id when the content
    /// matches. Durable on return.
    @discardableResult
    public func createConversation(id: String, title: String, originSurface: String, createdAt: String? = nil) throws -> (conversation: Conversation, created: Bool) {
        try Validate.id(id, what: "conversation id")
        try Validate.surface(originSurface)
        let title = Validate.title(title)
        let created: Bool = try commit { state in
            if let c = state.conversations[id] {
                guard c.title == title && c.originSurface == originSurface else {
                    throw StoreError.conflict("conversation \(id) already exists with other content (title \"\(c.title)\", origin \(c.originSurface))")
                }
                return ([], false)
            }
            return ([OutboxRecord.conversation(id: id, title: title, originSurface: originSurface, createdAt: createdAt ?? now())], true)
        }
        guard let c = conversation(id) else { throw StoreError.notFound("conversation \(id) vanished after it was written") }
        return (c, created)
    }
}
