import OutboxFormat
import OutboxIO

public struct SweepReport: Sendable, Equatable {
    public var deletedBlobs: [String] = []
    public var deletedTemps: [String] = []
    /// True when an enqueue was staging attachments, so blobs were left for a later sweep.
    public var skippedBecauseBusy = false
}

public struct VerifyReport: Sendable {
    public var sealed: SealInfo?
    public var lines: Int
    public var conversations: Int
    public var liveTurns: Int
    public var blobsChecked: Int
    /// Live turns whose attachment is missing or does not hash to its name.
    public var missingBlobs: [(turn: String, sha256: String)] = []
    public var corruptBlobs: [(turn: String, sha256: String)] = []
    public var orphanBlobs: [String] = []
    public var tempFiles: [String] = []
    public var pendingTail: LogScan.Tail = .clean
    public var healthy: Bool {
        sealed == nil && missingBlobs.isEmpty && corruptBlobs.isEmpty && pendingTail == .clean
    }
}

public struct CompactReport: Sendable {
    public var recordsBefore: Int
    public var recordsAfter: Int
    public var bytesBefore: Int64
    public var bytesAfter: Int64
}

extension Outbox {
    /// Recovery at open, after the journal has dealt with a torn tail (docs/DURABILITY.md, O1–O5):
    /// turns left `syncing` by a dead drain go back to `queued`; live turns whose attachment is
    /// missing or damaged go to `failedNeedsAttention`; orphans are swept.
    func recover() throws {
        // Attachment checks read files: do them before taking the log lock.
        var broken: [(String, String)] = []
        var unreadable: [String] = []
        for t in turns where t.state == .queued || t.state == .syncing {
            for a in t.attachments {
                // A read that fails (EIO, EMFILE…) is no evidence of damage: never write a
                // durable verdict from it. The turn stays as it is; the next open checks again.
                let ok: Bool
                do { ok = try blobStore.verify(a.sha256) } catch {
                    unreadable.append("could not check attachment \(a.name) of turn \(t.id) (\(error)); left as it is")
                    break
                }
                if !ok {
                    let exists = fileSystem.exists(blobStore.path(for: a.sha256))
                    broken.append((t.id, exists
                        ? "attachment \(a.name) (\(a.sha256)) does not match its hash; the file is damaged"
                        : "attachment \(a.name) (\(a.sha256)) is missing from \(paths.blobs)"))
                    break
                }
            }
        }
        // Only when no drain holds its lock may a `syncing` turn be called interrupted.
        let drain = try FileLock.acquire(paths.drainLock, .exclusive, wait: false, fileSystem: fileSystem)
        defer { drain?.release() }
        let requeued: Int = try commit { state in
            var records: [OutboxRecord] = []
            if drain != nil {
                for t in state.orderedTurns where t.state == .syncing {
                    records.append(.state(id: t.id, state: .queued, attempt: t.attempt, nextAttemptAt: nil, error: t.lastError,
                                          answer: nil, reason: "interrupted: found syncing at open; the engine is asked before any resend"))
                }
            }
            let requeuedCount = records.count
            for (id, why) in broken {
                if let t = state.turns[id], t.state == .queued || t.state == .syncing {
                    records.append(.state(id: id, state: .failedNeedsAttention, attempt: t.attempt, nextAttemptAt: nil,
                                          error: why, answer: nil, reason: nil))
                }
            }
            return (records, requeuedCount)
        }
        if requeued > 0 { recoveryNotes.append("\(requeued) turn(s) found syncing went back to queued") }
        if !broken.isEmpty { recoveryNotes.append("\(broken.count) turn(s) need attention: attachment missing or damaged") }
        recoveryNotes += unreadable
        let swept = try sweep()
        if !swept.deletedBlobs.isEmpty || !swept.deletedTemps.isEmpty {
            recoveryNotes.append("swept \(swept.deletedBlobs.count) orphan blob(s) and \(swept.deletedTemps.count) temp file(s)")
        }
    }

    /// Retires synced turns: the retired records are made durable first, then attachment bytes no
    /// live turn names are deleted, then blobs/ is fsynced (R1–R3). A kill in between leaves
    /// orphans for the sweep.
    @discardableResult
    public func retire(_ ids: [String]) throws -> Int {
        let n: Int = try commit { state in
            var records: [OutboxRecord] = []
            for id in ids {
                guard let t = state.turns[id] else { throw StoreError.notFound("no turn \(id) in this outbox") }
                guard t.state == .synced else {
                    throw StoreError.illegalTransition("turn \(id) is \(t.state.rawValue); only a synced turn can be retired")
                }
                records.append(.retired(id: id))
            }
            return (records, records.count)
        }
        if n > 0 { try deleteUnreferencedBlobs() }
        return n
    }

    /// Deletes blobs that no live turn names, if no enqueue is staging attachments right now.
    @discardableResult
    func deleteUnreferencedBlobs() throws -> [String] {
        try sweep().deletedBlobs
    }

    /// Deletes orphan blobs and leftover temp files. Holds the log lock (so no append can name a
    /// blob meanwhile) and blobs.lock exclusively (so no enqueue is between staging and its line);
    /// if an enqueue holds blobs.lock, the sweep leaves everything for next time.
    @discardableResult
    public func sweep() throws -> SweepReport {
        guard mode == .readWrite else { throw StoreError.invalidInput("the outbox was opened read-only") }
        var report = SweepReport()
        try journal.withExclusiveLock { update in
            if let s = mutex_fold(update) { throw StoreError.sealed(s) }
            guard let stagingGuard = try FileLock.acquire(paths.blobsLock, .exclusive, wait: false, fileSystem: fileSystem) else {
                report.skippedBecauseBusy = true
                return
            }
            defer { stagingGuard.release() }
            let referenced = Set(turns.filter(\.isLive).flatMap { $0.attachments.map(\.sha256) })
            let (blobs, temps) = try blobStore.list()
            for b in blobs where !referenced.contains(b) {
                try fileSystem.unlink(blobStore.path(for: b))
                report.deletedBlobs.append(b)
            }
            for t in temps {
                try fileSystem.unlink("\(paths.blobs)/\(t)")
                report.deletedTemps.append(t)
            }
            if !report.deletedBlobs.isEmpty || !report.deletedTemps.isEmpty {
                try fileSystem.syncDirectory(paths.blobs)
            }
        }
        return report
    }

    /// Checks every line (done at open), every live attachment's hash, and lists orphans.
    public func verify() throws -> VerifyReport {
        try refresh()
        let st = snapshot
        var r = VerifyReport(sealed: sealed, lines: st.recordCount, conversations: st.conversations.count,
                             liveTurns: st.turns.values.filter(\.isLive).count, blobsChecked: 0)
        r.pendingTail = pendingTail
        var referenced = Set<String>()
        for t in st.orderedTurns where t.isLive {
            for a in t.attachments {
                referenced.insert(a.sha256)
                r.blobsChecked += 1
                if !fileSystem.exists(blobStore.path(for: a.sha256)) {
                    r.missingBlobs.append((t.id, a.sha256))
                } else if !((try? blobStore.verify(a.sha256)) ?? false) {
                    r.corruptBlobs.append((t.id, a.sha256))
                }
            }
        }
        let (blobs, temps) = try blobStore.list()
        r.orphanBlobs = blobs.filter { !referenced.contains($0) }
        r.tempFiles = temps
        return r
    }

    /// Rewrites the log with only the live state (C1–C4). Other processes reload on their next
    /// look because the file's inode changes.
    @discardableResult
    public func compact() throws -> CompactReport {
        guard mode == .readWrite else { throw StoreError.invalidInput("the outbox was opened read-only") }
        let before = snapshot.recordCount
        let bytesBefore = journal.size
        let entries = try journal.rewrite { update in
            if let s = mutex_fold(update) { throw StoreError.sealed(s) }
            return snapshot.compactedRecords()
        }
        mutex_fold(.reloaded(entries))
        return CompactReport(recordsBefore: before, recordsAfter: entries.count, bytesBefore: bytesBefore, bytesAfter: journal.size)
    }

    func compactIfDominatedByDeadRecords() throws {
        guard journal.size > options.autoCompactBytes else { return }
        let st = snapshot
        guard st.recordCount > 2 * max(1, st.liveRecordEstimate) else { return }
        try compact()
    }
}
