import OutboxFormat
import OutboxIO

public struct ResetReport: Sendable {
    /// The directory holding the damaged log, its seal marker and hard links to every blob.
    public var asideDirectory: String
    public var damagedLog: String
    public var blobsKept: Int
    public var wasSealed: SealInfo?
}

public struct SalvageReport: Sendable {
    public var linesRead = 0
    public var unreadableLines: [Int] = []
    public var conversationsCreated = 0
    public var imported: [String] = []
    public var alreadyPresent: [String] = []
    /// Turns the damaged log says the engine already holds.
    public var skippedDelivered: [String] = []
    public var missingAttachments: [(turn: String, sha256: String)] = []
    /// Lines whose checksum failed but that still read as a whole record, and were used.
    public var acceptedDespiteChecksum: [Int] = []
}

extension Outbox {
    /// Starts a fresh log, keeping the damaged one (X1–X5 in docs/DURABILITY.md). Refuses on a
    /// healthy outbox unless `force`. Deletes nothing: the old log, its seal marker and hard
    /// links to every blob go to `turns.damaged-<UTC stamp>/` beside the new log.
    public static func reset(directory: String, force: Bool, fileSystem fs: any FileSystem = PosixFileSystem(),
                             clock: @escaping @Sendable () -> Int64 = Journal.systemClock) throws -> ResetReport {
        let paths = OutboxPaths(directory: directory)
        guard try fs.linkStatus(paths.log) != nil else {
            throw StoreError.notFound("no outbox at \(paths.directory); there is nothing to reset")
        }
        var options = Options()
        options.recoverAtOpen = false
        let current = try Outbox.open(directory: directory, mode: .readOnly, fileSystem: fs, options: options, clock: clock)
        let seal = current.sealed
        if seal == nil && !force {
            throw StoreError.invalidInput("the outbox at \(paths.directory) is healthy; reset only starts over a sealed outbox (use --force to start over anyway; nothing is deleted)")
        }
        guard let lock = try FileLock.acquire(paths.lock, .exclusive, wait: true, fileSystem: fs) else {
            throw StoreError.busy("the outbox is locked")
        }
        defer { lock.release() }
        let stamp = Journal.fileStamp(clock())
        var aside = "\(paths.directory)/turns.damaged-\(stamp)"
        var n = 1
        while fs.exists(aside) { n += 1; aside = "\(paths.directory)/turns.damaged-\(stamp)-\(n)" }
        do {
            // X1: the aside directory.
            try fs.makeDirectory(aside, mode: 0o700)
            try fs.syncDirectory(paths.directory)
            // X2: hard links to every blob, so a sweep of the new log cannot take salvageable bytes.
            let blobs = BlobStore(directory: paths.blobs, fileSystem: fs)
            let names = try blobs.list().blobs
            try fs.makeDirectory(aside + "/blobs", mode: 0o700)
            for name in names { try fs.link(blobs.path(for: name), "\(aside)/blobs/\(name)") }
            try fs.syncDirectory(aside + "/blobs")
            try fs.syncDirectory(aside)
            // X3: the damaged log (and its seal marker) move aside.
            let marker = paths.log + ".sealed"
            if fs.exists(marker) { try fs.rename(marker, aside + "/turns.jsonl.sealed") }
            try fs.rename(paths.log, aside + "/turns.jsonl")
            try fs.syncDirectory(aside)
            try fs.syncDirectory(paths.directory)
            // X4: a fresh, empty log.
            let fd = try fs.open(paths.log, [.write, .create, .exclusive, .noFollow], mode: 0o600)
            try fs.close(fd)
            try fs.syncDirectory(paths.directory)
            return ResetReport(asideDirectory: aside, damagedLog: aside + "/turns.jsonl", blobsKept: names.count, wasSealed: seal)
        } catch let e as IOError {
            throw StoreError.io(e, context: "reset stopped part-way; the damaged log is still at \(fs.exists(paths.log) ? paths.log : aside + "/turns.jsonl") and nothing was deleted")
        }
    }

    /// A line that is a JSON object with a record's envelope, ignoring its checksum.
    static func readDespiteChecksum(_ line: [UInt8]) -> LogEntry? {
        guard let o = try? JSONParser.parseObject(line), o["v"]?.intValue == Int64(LineCodec.version),
              let seq = o["seq"]?.intValue, let type = o["type"]?.stringValue, let at = o["at"]?.stringValue else { return nil }
        var fields = JSONObject()
        fields.pairs = o.pairs.filter { !["v", "seq", "type", "at", "crc"].contains($0.key) }
        return LogEntry(seq: seq, type: type, at: at, fields: fields)
    }

    /// Re-imports every decodable turn of a damaged log that it does not show as delivered,
    /// keeping request ids and attachments, so the engine's idempotency makes it safe.
    public func salvage(from logPath: String) throws -> SalvageReport {
        var report = SalvageReport()
        let bytes: [UInt8]
        do { bytes = try fileSystem.readFile(logPath) } catch let e as IOError {
            throw StoreError.io(e, context: "cannot read \(logPath)")
        }
        // Decode line by line, skipping what does not decode: salvage reads past damage. The
        // outbox's own conversations are known too, so a turn cut aside on its own can come back.
        var state = OutboxState()
        for c in conversations {
            let rec = OutboxRecord.conversation(id: c.id, title: c.title, originSurface: c.originSurface, createdAt: c.createdAt)
            _ = state.apply(LogEntry(seq: 0, type: rec.typeName, at: c.recordedAt, fields: rec.fields))
        }
        var attempted = Set<String>()
        var lineNo = 0
        var start = 0
        while start < bytes.count {
            let end = bytes[start...].firstIndex(of: 0x0A) ?? bytes.count
            lineNo += 1
            let line = Array(bytes[start..<end])
            start = end + 1
            if line.isEmpty { continue }
            report.linesRead += 1
            let entry: LogEntry
            switch LineCodec.decode(line) {
            case .success(let e): entry = e
            case .failure(let error) where error.isChecksumFailure:
                // A whole record whose checksum fails (a bit flip, or a torn line cut aside at
                // open): salvage is a person's explicit act, so take it if it still reads as one.
                guard let e = Self.readDespiteChecksum(line) else { report.unreadableLines.append(lineNo); continue }
                entry = e
                report.acceptedDespiteChecksum.append(lineNo)
            case .failure:
                report.unreadableLines.append(lineNo); continue
            }
            if entry.type == "state", entry.fields["state"]?.stringValue == "syncing", let id = entry.fields["id"]?.stringValue {
                attempted.insert(id)
            }
            _ = state.apply(entry)  // a record the fold refuses is simply not salvaged
        }
        let aside = parentDirectory(of: logPath)
        let candidates = [aside + "/blobs", paths.blobs]
        for t in state.orderedTurns {
            if t.state == .synced || t.state == .retired || t.state == .cancelled {
                report.skippedDelivered.append(t.id); continue
            }
            if turn(t.id) != nil { report.alreadyPresent.append(t.id); continue }
            var sources: [AttachmentSource] = []
            var missing = false
            for a in t.attachments {
                var readError: IOError?
                let found = candidates.map { "\($0)/\(a.sha256)" }.first { p in
                    guard fileSystem.exists(p) else { return false }
                    do { return try blobStore.hash(of: p) == a.sha256 } catch {
                        readError = readError ?? (error as? IOError)
                        return false
                    }
                }
                if found == nil, let readError {
                    // Not missing, unreadable: stop rather than report it missing. Salvage again imports the rest.
                    throw StoreError.io(readError, context: "cannot read attachment \(a.name) of turn \(t.id) to salvage it (imported so far: \(report.imported.count))")
                }
                guard let found else { report.missingAttachments.append((t.id, a.sha256)); missing = true; break }
                sources.append(AttachmentSource(file: found, name: a.name, type: a.type))
            }
            if missing { continue }
            guard let c = state.conversations[t.conversationID] else { continue }
            if conversation(c.id) == nil {
                let (_, created) = try createConversation(id: c.id, title: c.title, originSurface: c.originSurface, createdAt: c.createdAt)
                if created { report.conversationsCreated += 1 }
            }
            let result = try enqueue(TurnDraft(requestID: t.id, conversationID: t.conversationID, text: t.text,
                                               attachments: sources, surface: t.surface, createdAt: t.createdAt))
            if result.created && (attempted.contains(t.id) || t.mayHaveLanded) {
                // It may already be on the engine: make the drain ask before sending.
                try apply([.syncing(t.id), .requeue(t.id, reason: "salvaged: may have reached the engine; ask before resending")])
            }
            report.imported.append(t.id)
        }
        return report
    }
}
