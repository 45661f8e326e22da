import Foundation
import OutboxFormat
import OutboxIO

/// A crash-safe JSONL log shared by several processes: the primitive under both the outbox and
/// the reference engine. It owns the write protocol of docs/DURABILITY.md (steps A1–A5, R1–R3,
/// C1–C4):
///
/// - appends happen under an exclusive flock on a separate lock file, after catching up with what
///   other processes wrote, as one write(2) of whole lines;
/// - a failed or short write is truncated back and synced; if that fails, or any fdatasync fails,
///   the journal seals (a failed fsync is never retried and trusted);
/// - concurrent appends in one process share one fdatasync (group commit): each caller returns
///   only once a sync that began after its write has succeeded;
/// - a torn tail is copied aside and cut off only by the lock holder; corruption seals.
public final class Journal: @unchecked Sendable {
    public struct NewRecord: Sendable {
        public var type: String
        public var fields: JSONObject
        public var at: String?
        public init(type: String, fields: JSONObject, at: String? = nil) { self.type = type; self.fields = fields; self.at = at }
    }

    /// What changed since the caller last looked.
    public enum Update: Sendable {
        case appended([LogEntry])
        /// The file was replaced (compaction or reset): fold again from these entries.
        case reloaded([LogEntry])
    }

    public let path: String
    public let lockPath: String
    public let fileSystem: any FileSystem
    public let writable: Bool
    let clock: @Sendable () -> Int64

    private let cond = NSCondition()
    // Guarded by `cond`.
    private var fd: FileDescriptor
    private var lockFD: FileDescriptor?
    private var inode: UInt64
    private var scannedEnd: Int64 = 0
    private var lineCount = 0
    private var lastSeq: Int64?
    private var writtenEnd: Int64 = 0
    private var syncedEnd: Int64 = 0
    private var syncing = false
    private var sealInfo: SealInfo?
    private var pendingTail: LogScan.Tail = .clean
    public private(set) var repairs: [TailRepair] = []

    public var sealed: SealInfo? { cond.lock(); defer { cond.unlock() }; return sealInfo }
    public var sealMarkerPath: String { path + ".sealed" }
    /// A tail that a read-only open saw and left alone (a writer may be mid-append).
    public var unrepairedTail: LogScan.Tail { cond.lock(); defer { cond.unlock() }; return pendingTail }
    public var lastSequence: Int64? { cond.lock(); defer { cond.unlock() }; return lastSeq }
    public var size: Int64 { cond.lock(); defer { cond.unlock() }; return scannedEnd }

    private init(path: String, lockPath: String, fileSystem: any FileSystem, writable: Bool, fd: FileDescriptor, inode: UInt64,
                 clock: @escaping @Sendable () -> Int64) {
        self.path = path; self.lockPath = lockPath; self.fileSystem = fileSystem; self.writable = writable
        self.fd = fd; self.inode = inode; self.clock = clock
    }

    deinit {
        try? fileSystem.close(fd)
        if let lockFD { try? fileSystem.close(lockFD) }
    }

    public static func systemClock() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)) }

    /// Opens (creating the directory 0700 and the file 0600, fsyncing their parents), recovers,
    /// and returns every entry that decodes. A corrupt file opens sealed rather than throwing, so
    /// readers still see what decoded before the damage.
    public static func open(path: String, lockPath: String? = nil, fileSystem fs: any FileSystem = PosixFileSystem(),
                            writable: Bool = true, clock: @escaping @Sendable () -> Int64 = Journal.systemClock) throws -> (Journal, [LogEntry]) {
        var entries: [LogEntry] = []
        let journal = try open(path: path, lockPath: lockPath, fileSystem: fs, writable: writable, clock: clock) { entries.append($0) }
        return (journal, entries)
    }

    /// The same, handing each record to `visit` in file order instead of returning them all:
    /// for owners that fold as they read.
    public static func open(path: String, lockPath: String? = nil, fileSystem fs: any FileSystem = PosixFileSystem(),
                            writable: Bool = true, clock: @escaping @Sendable () -> Int64 = Journal.systemClock,
                            visit: (LogEntry) -> Void) throws -> Journal {
        let dir = parentDirectory(of: path)
        let lockPath = lockPath ?? path + ".lock"
        do {
            if writable {
                try ensureDirectory(dir, fs: fs, allowSymlink: true)
                try ensureFile(path, fs: fs)
                try ensureFile(lockPath, fs: fs)
                // A process killed between creating the directory or the log and fsyncing their
                // parents leaves entries that exist but may not be durable, and every later open
                // would trust them: fsync both parents at every writable open.
                try fs.syncDirectory(dir)
                try fs.syncDirectory(parentDirectory(of: dir))
            }
            guard let st = try fs.linkStatus(path) else { throw IOError(.noEntry, "open", path) }
            guard st.isRegular else {
                throw StoreError.invalidInput("\(path) is not a regular file (symbolic links inside the outbox are not followed)")
            }
            let fd = try fs.open(path, writable ? [.read, .write, .append, .noFollow] : [.read, .noFollow], mode: 0o600)
            let journal = Journal(path: path, lockPath: lockPath, fileSystem: fs, writable: writable, fd: fd,
                                  inode: try fs.status(fd).inode, clock: clock)
            if writable {
                journal.lockFD = try fs.open(lockPath, [.read, .write, .noFollow], mode: 0o600)
            }
            try journal.initialLoad(visit)
            return journal
        } catch let e as IOError {
            throw StoreError.io(e, context: "cannot open the log \(path)")
        }
    }

    /// Creates `dir` (0700) and any missing parents, fsyncing each new entry's parent.
    /// `dir` itself and its parents may be symlinks to directories (a person chose where the
    /// outbox lives); `allowSymlink: false` refuses one, for paths inside an outbox.
    public static func ensureDirectory(_ dir: String, fs: any FileSystem, allowSymlink: Bool = true) throws {
        if let st = try fs.linkStatus(dir) {
            if st.isDirectory { return }
            if st.isSymlink && allowSymlink, let fd = try? fs.open(dir, [.read, .directory], mode: 0) {
                try? fs.close(fd)
                return
            }
            throw StoreError.invalidInput(st.isSymlink
                ? "\(dir) is a symbolic link; paths inside the outbox are not followed through links"
                : "\(dir) exists and is not a directory")
        }
        try ensureDirectory(parentDirectory(of: dir), fs: fs)
        do { try fs.makeDirectory(dir, mode: 0o700) } catch let e as IOError where e.errno == .exists { return }
        try fs.syncDirectory(parentDirectory(of: dir))
    }

    static func ensureFile(_ path: String, fs: any FileSystem) throws {
        if try fs.linkStatus(path) != nil { return }
        do {
            let fd = try fs.open(path, [.write, .create, .exclusive, .noFollow], mode: 0o600)
            try fs.close(fd)
        } catch let e as IOError where e.errno == .exists { return }
        try fs.syncDirectory(parentDirectory(of: path))
    }

    private func initialLoad(_ visit: (LogEntry) -> Void) throws {
        cond.lock(); defer { cond.unlock() }
        if let marker = try? fileSystem.readFile(sealMarkerPath), !marker.isEmpty,
           let info = try? JSONDecoder().decode(SealInfo.self, from: Data(marker)) {
            sealInfo = info
        }
        if writable { _ = try fileSystem.lock(lockFD!, .exclusive, wait: true) }
        defer { if writable { try? fileSystem.unlock(lockFD!) } }
        try reloadLocked(repair: writable, visit: visit)
    }

    private func reloadLocked(repair: Bool) throws -> [LogEntry] {
        var all: [LogEntry] = []
        try reloadLocked(repair: repair) { all.append($0) }
        return all
    }

    /// Reads the whole file again from offset 0, in chunks of whole lines, handing each record to
    /// `visit` as it goes so a large log is never held in memory twice. Caller holds `cond` (and
    /// the flock to repair).
    private func reloadLocked(repair: Bool, visit: (LogEntry) -> Void) throws {
        let size = try fileSystem.status(fd).size
        scannedEnd = 0; lineCount = 0; lastSeq = nil
        var total = LogScan(validEnd: 0, lastSeq: nil, linesRead: 0)
        var buffer: [UInt8] = []
        var base: Int64 = 0      // file offset of buffer[0]
        var readOffset: Int64 = 0
        while true {
            let want = Int(min(Int64(Self.readChunk), max(0, size - readOffset)))
            let more = want > 0 ? try fileSystem.read(fd, count: want, at: readOffset) : []
            readOffset += Int64(more.count)
            buffer += more
            let atEnd = more.count < want || readOffset >= size
            var cut = buffer.count
            if !atEnd {
                guard let nl = buffer.lastIndex(of: 0x0A) else { continue }
                cut = nl + 1
            }
            let scan = buffer.withUnsafeBufferPointer {
                LogScanner.scan(UnsafeBufferPointer(rebasing: $0[0..<cut]), baseOffset: base, baseLine: total.linesRead, lastSeq: total.lastSeq)
            }
            for e in scan.entries { visit(e) }
            total.validEnd = scan.validEnd; total.lastSeq = scan.lastSeq; total.linesRead = scan.linesRead
            if let c = scan.corruption { total.corruption = c; break }
            if atEnd { total.tail = scan.tail; break }
            if case .badFinalLine(let offset, _, _, _) = scan.tail {
                // Damage at the end of this chunk: whether a record follows it is decided by
                // what comes next, so read on and scan again from the damaged line.
                let keepFrom = Int(offset - base)
                buffer.removeSubrange(0..<keepFrom)
                base = offset
                continue
            }
            buffer.removeSubrange(0..<cut)
            base += Int64(cut)
        }
        try absorb(total, repair: repair)
        writtenEnd = scannedEnd
        syncedEnd = scannedEnd
    }

    /// How much of a log is read at a time when it is loaded whole.
    static let readChunk = 1 << 20

    /// Records a scan's outcome: how far we trust the file, and what to do with its tail.
    private func absorb(_ scan: LogScan, repair: Bool) throws {
        scannedEnd = scan.validEnd
        lineCount = scan.linesRead
        lastSeq = scan.lastSeq
        pendingTail = .clean
        if let c = scan.corruption {
            if sealInfo == nil { sealInfo = SealInfo(path: path, line: c.line, offset: c.offset, reason: c.reason) }
            return
        }
        switch scan.tail {
        case .clean: break
        case .incomplete(let offset, let length):
            if repair { try repairTail(offset: offset, length: length, reason: "incomplete last line (no newline)") }
            else { pendingTail = scan.tail }
        case .badFinalLine(let offset, let length, _, let reason):
            if repair { try repairTail(offset: offset, length: length, reason: "last line failed: \(reason)") }
            else { pendingTail = scan.tail }
        }
    }

    /// Copies the torn bytes aside, then truncates to the last whole line and syncs (etcd's Repair).
    private func repairTail(offset: Int64, length: Int, reason: String) throws {
        let bytes = try fileSystem.read(fd, count: length, at: offset)
        let stamp = Self.fileStamp(clock())
        var aside = "\(path).torn-\(stamp)"
        var n = 1
        while fileSystem.exists(aside) { n += 1; aside = "\(path).torn-\(stamp)-\(n)" }
        try fileSystem.writeFileDurably(aside, bytes)
        try fileSystem.truncate(fd, to: offset)
        try fileSystem.fdatasync(fd)
        repairs.append(TailRepair(offset: offset, length: length, savedAs: aside, reason: reason))
    }

    /// "20261130T145559Z" (plus milliseconds when two events share a second).
    public static func fileStamp(_ millis: Int64) -> String {
        let t = Timestamp.format(millis: millis)  // 2026-11-30T14:55:59.123Z
        let digits = t.filter { $0 != "-" && $0 != ":" }
        return String(digits.prefix(15)) + "Z"
    }

    // MARK: - catching up

    /// Picks up what other processes appended (or a replaced file) without taking the lock.
    /// Safe for readers: an incomplete last line is left alone.
    public func refresh() throws -> Update {
        cond.lock(); defer { cond.unlock() }
        return try catchUpLocked(repair: false)
    }

    private func catchUpLocked(repair: Bool) throws -> Update {
        if let st = try fileSystem.linkStatus(path), st.inode != inode {
            // Compacted or reset by another process: follow the name to the new file.
            let newFD = try fileSystem.open(path, writable ? [.read, .write, .append, .noFollow] : [.read, .noFollow], mode: 0o600)
            try? fileSystem.close(fd)
            fd = newFD
            inode = try fileSystem.status(fd).inode
            if sealInfo != nil && !fileSystem.exists(sealMarkerPath) { sealInfo = nil }
            return .reloaded(try reloadLocked(repair: repair))
        }
        let size = try fileSystem.status(fd).size
        if size == scannedEnd && pendingTail == .clean { return .appended([]) }
        if size < scannedEnd {
            // Someone truncated a file we had read: only a repair by another lock holder does
            // that, and only past our last whole line — re-read everything to be sure.
            return .reloaded(try reloadLocked(repair: repair))
        }
        if sealInfo != nil { return .appended([]) }
        let bytes = try fileSystem.read(fd, count: Int(size - scannedEnd), at: scannedEnd)
        let scan = LogScanner.scan(bytes, baseOffset: scannedEnd, baseLine: lineCount, lastSeq: lastSeq)
        try absorb(scan, repair: repair)
        if writtenEnd < scannedEnd { writtenEnd = scannedEnd }
        return .appended(scan.entries)
    }

    // MARK: - writing

    /// The heart of every write: take the in-process lock and the flock, catch up, let `body` fold
    /// what changed and decide what to append, append it in one write, release the flock, then
    /// wait for a group fdatasync that covers it. Returns `body`'s result and the new entries.
    /// `didAppend` runs with the new entries while the lock is still held, so the owner's fold
    /// stays in step with the file for the next transaction (group commit releases the lock
    /// before the sync).
    public func transaction<T>(_ body: (Update) throws -> (records: [NewRecord], result: T),
                               didAppend: ([LogEntry]) -> Void = { _ in }) throws -> (T, [LogEntry]) {
        guard writable, let lockFD else { throw StoreError.invalidInput("\(path) was opened read-only") }
        cond.lock()
        defer { cond.unlock() }
        let written: [LogEntry]
        let result: T
        do {
            _ = try fileSystem.lock(lockFD, .exclusive, wait: true)
            defer { try? fileSystem.unlock(lockFD) }
            let update = try catchUpLocked(repair: true)
            if let s = sealInfo { throw StoreError.sealed(s) }
            let (records, r) = try body(update)
            result = r
            if records.isEmpty {
                written = []
            } else {
                if let s = sealInfo { throw StoreError.sealed(s) }
                written = try appendLocked(records)
                didAppend(written)
            }
        } catch let e as IOError {
            throw StoreError.io(e, context: "cannot write the log \(path)")
        }
        try waitForSync(upTo: writtenEnd)
        return (result, written)
    }

    /// Appends records outside any fold (the engine uses this; it is the only writer of its log).
    public func append(_ records: [NewRecord]) throws -> [LogEntry] {
        try transaction { _ in (records, ()) }.1
    }

    /// Keys the envelope owns: a record field by one of these names could not be read back.
    static func isEnvelopeKey(_ k: String) -> Bool {
        // Compared by length first: this runs for every field of every record written.
        switch k.utf8.count {
        case 1: return k == "v"
        case 2: return k == "at"
        case 3: return k == "seq" || k == "crc"
        case 4: return k == "type"
        default: return false
        }
    }

    static func checkFieldNames(_ records: [NewRecord]) throws {
        for r in records {
            if let clash = r.fields.pairs.first(where: { isEnvelopeKey($0.key) })?.key {
                throw StoreError.invalidInput("record type \(r.type) uses the reserved field name \"\(clash)\"")
            }
        }
    }

    private func appendLocked(_ records: [NewRecord]) throws -> [LogEntry] {
        try Self.checkFieldNames(records)
        let now = Timestamp.format(millis: clock())
        var bytes: [UInt8] = []
        var entries: [LogEntry] = []
        var seq = (lastSeq ?? 0)
        var offset = scannedEnd
        var line = lineCount
        for r in records {
            seq += 1; line += 1
            let at = r.at ?? now
            let encoded = LineCodec.encode(seq: seq, type: r.type, at: at, fields: r.fields)
            if encoded.count > LineCodec.maxLineLength {
                throw StoreError.invalidInput("record of \(encoded.count) bytes is over the \(LineCodec.maxLineLength)-byte limit")
            }
            entries.append(LogEntry(seq: seq, type: r.type, at: at, fields: r.fields, offset: offset, line: line, length: encoded.count))
            offset += Int64(encoded.count)
            bytes += encoded
        }
        let start = scannedEnd
        do {
            try fileSystem.writeAll(fd, bytes)
        } catch {
            let failure = (error as? WriteError)?.error ?? IOError(.io, "write", path)
            // Step A3: never leave part of a line behind. Cut back to where this append began.
            if let cleanup = cutBack(to: start) {
                sealLocked(SealInfo(path: path, line: lineCount + 1, offset: start,
                                    reason: "a failed append (\(failure)) could not be cut back (\(cleanup)); the tail cannot be trusted"))
            }
            throw StoreError.io(failure, context: "cannot append to \(path) (nothing was saved)")
        }
        scannedEnd = offset
        lineCount = line
        lastSeq = seq
        writtenEnd = offset
        return entries
    }

    private func cutBack(to offset: Int64) -> IOError? {
        do {
            try fileSystem.truncate(fd, to: offset)
            try fileSystem.fdatasync(fd)
            return nil
        } catch {
            return error as? IOError ?? IOError(.io, "truncate", path)
        }
    }

    /// Group commit: one caller syncs for everyone whose write landed before its sync began.
    /// Caller holds `cond`.
    private func waitForSync(upTo target: Int64) throws {
        while syncedEnd < target {
            if let s = sealInfo { throw StoreError.sealed(s) }
            if syncing { cond.wait(); continue }
            syncing = true
            let goal = writtenEnd
            let syncFD = fd
            cond.unlock()
            var failure: IOError?
            do { try fileSystem.fdatasync(syncFD) } catch { failure = error as? IOError ?? IOError(.io, "fdatasync", path) }
            cond.lock()
            syncing = false
            if let failure {
                // Step A4: a failed fdatasync is never retried and trusted. Seal.
                sealLocked(SealInfo(path: path, line: nil, offset: syncedEnd,
                                    reason: "fdatasync failed (\(failure.errno)); records after byte \(syncedEnd) may not be on disk, so writes stop here"))
                cond.broadcast()
                throw StoreError.io(failure, context: "cannot make the log durable (the outbox is now sealed)")
            }
            syncedEnd = max(syncedEnd, goal)
            cond.broadcast()
        }
        if let s = sealInfo, syncedEnd < target { throw StoreError.sealed(s) }
    }

    /// Seals in memory and, best effort, in a marker file so every later open stays sealed.
    private func sealLocked(_ info: SealInfo) {
        if sealInfo == nil { sealInfo = info }
        if let data = try? JSONEncoder().encode(info) {
            try? fileSystem.writeFileDurably(sealMarkerPath, Array(data))
        }
    }

    /// Seals because of something only the owner can judge (a record that makes no sense).
    /// Not persisted: the same file seals the same way at every open.
    public func seal(_ info: SealInfo) {
        cond.lock(); defer { cond.unlock() }
        if sealInfo == nil { sealInfo = info }
    }

    // MARK: - rewriting (compaction)

    /// Replaces the log with `records` (seq numbers continue from the last one), durably:
    /// temp file, fdatasync, rename over the log, fsync the directory. Runs inside a transaction
    /// body's caller-provided snapshot; other processes notice the inode change and reload.
    public func rewrite(_ makeRecords: (Update) throws -> [NewRecord]) throws -> [LogEntry] {
        guard writable, let lockFD else { throw StoreError.invalidInput("\(path) was opened read-only") }
        cond.lock(); defer { cond.unlock() }
        do {
            _ = try fileSystem.lock(lockFD, .exclusive, wait: true)
            defer { try? fileSystem.unlock(lockFD) }
            let update = try catchUpLocked(repair: true)
            if let s = sealInfo { throw StoreError.sealed(s) }
            try waitForSyncHeld()
            let records = try makeRecords(update)
            try Self.checkFieldNames(records)
            var seq = (lastSeq ?? 0)
            var bytes: [UInt8] = []
            var entries: [LogEntry] = []
            var line = 0
            for r in records {
                seq += 1; line += 1
                let at = r.at ?? Timestamp.format(millis: clock())
                let encoded = LineCodec.encode(seq: seq, type: r.type, at: at, fields: r.fields)
                entries.append(LogEntry(seq: seq, type: r.type, at: at, fields: r.fields, offset: Int64(bytes.count), line: line, length: encoded.count))
                bytes += encoded
            }
            let tmp = path + ".compact-tmp"
            try? fileSystem.unlink(tmp)
            let tfd = try fileSystem.open(tmp, [.read, .write, .create, .exclusive, .noFollow], mode: 0o600)
            do {
                try fileSystem.writeAll(tfd, bytes)
                try fileSystem.fdatasync(tfd)
            } catch {
                try? fileSystem.close(tfd)
                try? fileSystem.unlink(tmp)
                throw error
            }
            try fileSystem.rename(tmp, path)
            do { try fileSystem.syncDirectory(parentDirectory(of: path)) } catch {
                try? fileSystem.close(tfd)
                throw error
            }
            try? fileSystem.close(fd)
            fd = tfd
            inode = try fileSystem.status(fd).inode
            scannedEnd = Int64(bytes.count); writtenEnd = scannedEnd; syncedEnd = scannedEnd
            lineCount = line; lastSeq = records.isEmpty ? lastSeq : seq
            return entries
        } catch let e as IOError {
            throw StoreError.io(e, context: "cannot compact \(path) (the old log is untouched)")
        }
    }

    /// Inside the flock: make sure nothing of ours is still waiting for its sync.
    private func waitForSyncHeld() throws {
        while syncing { cond.wait() }
        if syncedEnd < writtenEnd {
            do {
                try fileSystem.fdatasync(fd)
            } catch {
                // Same rule as A4′: records written but not known durable — seal, never retry.
                let failure = error as? IOError ?? IOError(.io, "fdatasync", path)
                sealLocked(SealInfo(path: path, line: nil, offset: syncedEnd,
                                    reason: "fdatasync failed (\(failure.errno)); records after byte \(syncedEnd) may not be on disk, so writes stop here"))
                throw StoreError.io(failure, context: "cannot make the log durable (the outbox is now sealed)")
            }
            syncedEnd = writtenEnd
        }
    }

    /// Runs `body` holding the flock exclusively, after catching up (for sweeps that must not
    /// race an append). `body` must not call back into the journal.
    public func withExclusiveLock<T>(_ body: (Update) throws -> T) throws -> T {
        guard let lockFD else { throw StoreError.invalidInput("\(path) was opened read-only") }
        cond.lock(); defer { cond.unlock() }
        _ = try fileSystem.lock(lockFD, .exclusive, wait: true)
        defer { try? fileSystem.unlock(lockFD) }
        return try body(try catchUpLocked(repair: true))
    }
}
