import OutboxFormat
import OutboxIO

public struct EnqueueResult: Sendable {
    public var turn: Turn
    /// False when the request id was already held with the same content: nothing was written.
    public var created: Bool
}

extension Outbox {
    /// Makes a turn durable: attachments first (each fsynced and renamed to its hash, blobs/
    /// fsynced), then the one line that commits the turn and its files (docs/DURABILITY.md, E1–E5).
    /// Idempotent on the request id: the same id with the same content returns the entry already
    /// held and writes nothing; the same id with other content is an error.
    @discardableResult
    public func enqueue(_ draft: TurnDraft) throws -> EnqueueResult {
        try Validate.id(draft.requestID, what: "request id")
        try Validate.id(draft.conversationID, what: "conversation id")
        try Validate.surface(draft.surface)
        try Validate.text(draft.text, attachments: draft.attachments.count)
        if let s = sealed { throw StoreError.sealed(s) }

        // Cheap idempotency check before touching any attachment, on what this process has seen;
        // the commit below checks again after catching up with every other writer.
        if let existing = turn(draft.requestID) {
            let refs = try draft.attachments.map { try reference(for: $0, hashOnly: true) }
            return try sameOrConflict(existing, draft, refs)
        }

        // Stage attachments while holding blobs.lock shared: a sweep cannot delete them before the
        // line that names them is durable.
        // A text-only turn stages nothing, so it needs no guard.
        let guardLock = draft.attachments.isEmpty ? nil
            : try FileLock.acquire(paths.blobsLock, .shared, wait: true, fileSystem: fileSystem)
        defer { guardLock?.release() }
        let refs = try draft.attachments.map { try reference(for: $0, hashOnly: false) }

        let createdAt = draft.createdAt ?? now()
        let created: Bool = try commit { state in
            if let existing = state.turns[draft.requestID], existing.isLive {
                _ = try sameOrConflict(existing, draft, refs)
                return ([], false)
            }
            guard state.conversations[draft.conversationID] != nil else {
                throw StoreError.notFound("conversation \(draft.conversationID) does not exist in this outbox")
            }
            let rec = OutboxRecord.turn(id: draft.requestID, conversation: draft.conversationID, text: draft.text,
                                        attachments: refs, surface: draft.surface, createdAt: createdAt)
            return ([rec], true)
        }
        guard let t = turn(draft.requestID) else { throw StoreError.notFound("turn \(draft.requestID) vanished after it was written") }
        return EnqueueResult(turn: t, created: created)
    }

    private func reference(for source: AttachmentSource, hashOnly: Bool) throws -> AttachmentRef {
        if hashOnly {
            switch source.content {
            case .bytes(let b): return AttachmentRef(sha256: SHA256.hex(b), name: source.name, size: Int64(b.count), type: source.type)
            case .file(let path):
                let size: Int64
                do {
                    guard let st = try fileSystem.linkStatus(path) else { throw StoreError.invalidInput("attachment \(path) does not exist") }
                    size = st.size
                }
                let sha: String
                do { sha = try blobStore.hash(of: path) } catch let e as IOError {
                    throw StoreError.invalidInput("cannot read attachment \(path): \(e)")
                }
                return AttachmentRef(sha256: sha, name: source.name, size: size, type: source.type)
            }
        }
        do {
            let (sha, size) = try blobStore.put(source.content)
            return AttachmentRef(sha256: sha, name: source.name, size: size, type: source.type)
        } catch let e as IOError {
            throw StoreError.io(e, context: "cannot store attachment \(source.name) (nothing was saved)")
        }
    }

    private func sameOrConflict(_ existing: Turn, _ draft: TurnDraft, _ refs: [AttachmentRef]) throws -> EnqueueResult {
        guard existing.conversationID == draft.conversationID, existing.text == draft.text,
              existing.attachments == refs, existing.surface == draft.surface else {
            throw StoreError.conflict("request id \(draft.requestID) is already used by another turn (in conversation \(existing.conversationID)); a new message needs a new id")
        }
        return EnqueueResult(turn: existing, created: false)
    }
}
