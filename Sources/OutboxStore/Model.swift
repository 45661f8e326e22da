import OutboxFormat

public struct Conversation: Sendable, Equatable {
    public var id: String
    public var title: String
    public var originSurface: String
    public var createdAt: String
    /// Set once the engine has confirmed the conversation; the origin surface it reported.
    public var engineOriginSurface: String?
    public var isOnEngine: Bool { engineOriginSurface != nil }
    public var seq: Int64
    /// When its record was written (kept through compaction).
    public var recordedAt: String
}

public struct Reply: Sendable, Equatable {
    /// "answered" or "failed".
    public var status: String
    public var text: String?
    public var error: String?
    public var at: String
}

public struct Turn: Sendable, Equatable {
    public var id: String
    public var conversationID: String
    public var text: String
    public var attachments: [AttachmentRef]
    public var surface: String
    public var createdAt: String
    public var state: TurnState
    /// Attempts spent against the budget (a person's retry resets it to 0).
    public var attempt: Int
    public var nextAttemptAt: String?
    public var lastError: String?
    public var engineAnswer: EngineAnswer?
    public var reply: Reply?
    /// True once any attempt was made: the engine may hold it, so ask before resending.
    public var mayHaveLanded: Bool
    public var enqueuedSeq: Int64
    public var enqueuedAt: String
    public var updatedAt: String
    public var syncedAt: String?

    /// Still owned by the outbox (not retired or cancelled).
    public var isLive: Bool { state != .retired && state != .cancelled }
    /// Waiting to be delivered.
    public var isPending: Bool { state == .queued || state == .syncing }
}

/// What a person asks to enqueue.
public struct TurnDraft: Sendable {
    public var requestID: String
    public var conversationID: String
    public var text: String
    public var attachments: [AttachmentSource]
    public var surface: String
    public var createdAt: String?

    public init(requestID: String, conversationID: String, text: String, attachments: [AttachmentSource] = [],
                surface: String, createdAt: String? = nil) {
        self.requestID = requestID; self.conversationID = conversationID; self.text = text
        self.attachments = attachments; self.surface = surface; self.createdAt = createdAt
    }
}

public struct AttachmentSource: Sendable {
    public enum Content: Sendable { case file(String), bytes([UInt8]) }
    public var content: Content
    public var name: String
    public var type: String
    public init(file: String, name: String? = nil, type: String? = nil) {
        content = .file(file)
        self.name = name ?? lastComponentOfPath(file)
        self.type = type ?? MediaType.guess(for: self.name)
    }
    public init(bytes: [UInt8], name: String, type: String? = nil) {
        content = .bytes(bytes); self.name = name; self.type = type ?? MediaType.guess(for: name)
    }
}

func lastComponentOfPath(_ p: String) -> String {
    p.split(separator: "/").last.map(String.init) ?? p
}

public enum MediaType {
    public static func guess(for name: String) -> String {
        let ext = name.split(separator: ".").last.map { $0.lowercased() } ?? ""
        switch ext {
        case "txt", "md", "log": return "text/plain"
        case "json": return "application/json"
        case "png": return "image/png"
        case "jpg", "jpeg": return "image/jpeg"
        case "gif": return "image/gif"
        case "webp": return "image/webp"
        case "pdf": return "application/pdf"
        case "csv": return "text/csv"
        case "html", "htm": return "text/html"
        case "mp3": return "audio/mpeg"
        case "wav": return "audio/wav"
        case "mp4": return "video/mp4"
        case "zip": return "application/zip"
        default: return "application/octet-stream"
        }
    }
}

/// The engine-facing transitions a drain records (docs/FORMAT.md, "state").
public enum Transition: Sendable {
    /// An attempt starts: attempt n is recorded before the request goes out.
    case syncing(String)
    /// The engine holds the turn.
    case synced(String, EngineAnswer)
    /// A retryable failure: back to queued until `nextAttemptAt`.
    case failed(String, error: String, nextAttemptAt: String, spendsAttempt: Bool)
    /// Retrying cannot fix it: a person must look.
    case needsAttention(String, error: String)
    /// The engine refused the turn itself (a 4xx to its POST): a person must look, and the turn
    /// is known not to be on the engine, so it may be cancelled.
    case rejected(String, error: String)
    /// An interrupted attempt goes back to queued, keeping its attempt count.
    case requeue(String, reason: String)
    /// A person's retry: back to queued with a fresh attempt budget.
    case retry(String)
    case reply(String, status: String, text: String?, error: String?)
    case conversationSynced(String, originSurface: String)

    var turnID: String {
        switch self {
        case .syncing(let id), .synced(let id, _), .failed(let id, _, _, _), .needsAttention(let id, _), .rejected(let id, _),
             .requeue(let id, _), .retry(let id), .reply(let id, _, _, _), .conversationSynced(let id, _): return id
        }
    }
}
