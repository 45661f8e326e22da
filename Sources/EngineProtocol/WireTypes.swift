import Foundation

// The JSON bodies of the engine protocol (docs/PROTOCOL.md). Dates travel as RFC 3339 strings and
// are kept as the client sent them, so a retried request is byte-for-byte the same request.

/// `POST /api/conversations` body, and the stored conversation the engine answers with.
public struct Conversation: Codable, Sendable, Equatable, Hashable {
    /// Client-minted id: 1–128 characters of `A–Z a–z 0–9 - _ . :`.
    public var id: String
    public var title: String
    /// The surface (CLI, phone, web, …) the conversation was started from. Provenance only.
    public var originSurface: String
    /// RFC 3339, minted by the client.
    public var createdAt: String

    public init(id: String, title: String, originSurface: String, createdAt: String) {
        self.id = id; self.title = title; self.originSurface = originSurface; self.createdAt = createdAt
    }
}

/// `GET /api/conversations` body.
public struct ConversationList: Codable, Sendable, Equatable {
    public var conversations: [Conversation]
    public init(conversations: [Conversation]) { self.conversations = conversations }
}

/// `GET /api/conversations/{id}` body: the conversation and its turns in the order received.
public struct ConversationDetail: Codable, Sendable, Equatable {
    public var id: String
    public var title: String
    public var originSurface: String
    public var createdAt: String
    public var turns: [Turn]

    public init(conversation: Conversation, turns: [Turn]) {
        id = conversation.id; title = conversation.title
        originSurface = conversation.originSurface; createdAt = conversation.createdAt
        self.turns = turns
    }
    public var conversation: Conversation {
        Conversation(id: id, title: title, originSurface: originSurface, createdAt: createdAt)
    }
}

/// A file attached to a turn; its bytes are uploaded first with `PUT /api/blobs/{sha256}`.
public struct Attachment: Codable, Sendable, Equatable, Hashable {
    /// Lowercase hex SHA-256 of the bytes.
    public var sha256: String
    public var name: String
    public var size: Int64
    /// Media type, e.g. `image/png`.
    public var type: String
    public init(sha256: String, name: String, size: Int64, type: String) {
        self.sha256 = sha256; self.name = name; self.size = size; self.type = type
    }
}

/// `POST /api/conversations/{id}/turns` body. Sent with `Idempotency-Key: <requestId>`.
public struct TurnPost: Codable, Sendable, Equatable, Hashable {
    public var requestId: String
    public var text: String
    public var attachments: [Attachment]
    public var createdAt: String
    /// The surface that sent this turn (any surface may post to any conversation).
    public var surface: String

    public init(requestId: String, text: String, attachments: [Attachment] = [], createdAt: String, surface: String) {
        self.requestId = requestId; self.text = text; self.attachments = attachments
        self.createdAt = createdAt; self.surface = surface
    }
}

/// The 201 body for a new turn, replayed verbatim (with 200) for a retry with the same key.
public struct TurnReceipt: Codable, Sendable, Equatable {
    public var requestId: String
    public var conversationId: String
    /// Always `received` here: the turn is durable at the engine.
    public var status: TurnState
    /// RFC 3339, when the engine made the turn durable.
    public var receivedAt: String

    public init(requestId: String, conversationId: String, status: TurnState = .received, receivedAt: String) {
        self.requestId = requestId; self.conversationId = conversationId
        self.status = status; self.receivedAt = receivedAt
    }
}

public enum TurnState: String, Codable, Sendable, Equatable, CaseIterable {
    /// Durable at the engine; the reply is not there yet.
    case received
    /// A reply exists.
    case answered
    /// The responder failed; `reply.error` says why. The turn itself is kept.
    case failed
}

/// A responder's answer to a turn.
public struct Reply: Codable, Sendable, Equatable {
    /// The reply text when answered.
    public var text: String?
    /// Why it failed, when failed.
    public var error: String?
    /// `echo`, `openai`, …
    public var responder: String
    /// RFC 3339.
    public var at: String

    public init(text: String? = nil, error: String? = nil, responder: String, at: String) {
        self.text = text; self.error = error; self.responder = responder; self.at = at
    }
}

/// `GET /api/turns/{requestId}` body: what a drain asks before it resends.
public struct TurnStatus: Codable, Sendable, Equatable {
    public var requestId: String
    public var conversationId: String
    public var status: TurnState
    public var reply: Reply?

    public init(requestId: String, conversationId: String, status: TurnState, reply: Reply?) {
        self.requestId = requestId; self.conversationId = conversationId; self.status = status; self.reply = reply
    }
}

/// A turn as listed in a conversation.
public struct Turn: Codable, Sendable, Equatable {
    public var requestId: String
    public var conversationId: String
    public var text: String
    public var attachments: [Attachment]
    public var createdAt: String
    public var surface: String
    public var receivedAt: String
    public var status: TurnState
    public var reply: Reply?

    public init(post: TurnPost, conversationId: String, receivedAt: String, reply: Reply?) {
        requestId = post.requestId; self.conversationId = conversationId; text = post.text
        attachments = post.attachments; createdAt = post.createdAt; surface = post.surface
        self.receivedAt = receivedAt; self.reply = reply
        status = reply.map { $0.error == nil ? .answered : .failed } ?? .received
    }

    public var post: TurnPost {
        TurnPost(requestId: requestId, text: text, attachments: attachments, createdAt: createdAt, surface: surface)
    }
}

/// `GET /api/health` body.
public struct Health: Codable, Sendable, Equatable {
    public var status: String
    public var version: String
    public init(status: String = "ok", version: String) { self.status = status; self.version = version }
}

/// `PUT /api/blobs/{sha256}` body.
public struct BlobReceipt: Codable, Sendable, Equatable {
    public var sha256: String
    public var size: Int64
    public init(sha256: String, size: Int64) { self.sha256 = sha256; self.size = size }
}

/// `GET /api/stats` body. `conversations`, `turns`, `blobs`, `answered`, `failed` count durable
/// state; the request counters count since the engine process started.
public struct Stats: Codable, Sendable, Equatable {
    public var conversations: Int
    public var turns: Int
    public var blobs: Int
    public var answered: Int
    public var failed: Int
    /// Turn POSTs that reached the idempotency check (new, replayed or rejected).
    public var turnPosts: Int
    /// Turn POSTs answered 200 with the original response.
    public var idempotentReplays: Int
    /// `GET /api/turns/{requestId}` requests.
    public var statusChecks: Int
    /// Requests answered with a 4xx or 5xx status.
    public var rejected: Int
    /// Seconds since the engine process started.
    public var uptimeSeconds: Double

    public init(conversations: Int, turns: Int, blobs: Int, answered: Int, failed: Int, turnPosts: Int,
                idempotentReplays: Int, statusChecks: Int, rejected: Int, uptimeSeconds: Double) {
        self.conversations = conversations; self.turns = turns; self.blobs = blobs
        self.answered = answered; self.failed = failed; self.turnPosts = turnPosts
        self.idempotentReplays = idempotentReplays; self.statusChecks = statusChecks
        self.rejected = rejected; self.uptimeSeconds = uptimeSeconds
    }
}

/// Every error body: `{"error": {"code": "...", "message": "..."}}`.
public struct ErrorEnvelope: Codable, Sendable, Equatable, Error {
    public struct Body: Codable, Sendable, Equatable {
        public var code: String
        public var message: String
    }
    public var error: Body
    public init(code: String, message: String) { error = Body(code: code, message: message) }
    public var code: String { error.code }
    public var message: String { error.message }
}

/// Error codes. Clients branch on these, not on the message.
public enum ErrorCode {
    // 400
    public static let badRequest = "bad_request"
    public static let invalidJSON = "invalid_json"
    public static let invalidField = "invalid_field"
    public static let idempotencyKeyMissing = "idempotency_key_missing"
    public static let idempotencyKeyMismatch = "idempotency_key_mismatch"
    public static let blobHashMismatch = "blob_hash_mismatch"
    // 401
    public static let unauthorized = "unauthorized"
    // 404
    public static let notFound = "not_found"
    public static let conversationNotFound = "conversation_not_found"
    public static let turnNotFound = "turn_not_found"
    public static let blobNotFound = "blob_not_found"
    // 405
    public static let methodNotAllowed = "method_not_allowed"
    // 408 (then the connection closes)
    public static let requestTimeout = "request_timeout"
    // 409
    public static let idempotencyInProgress = "idempotency_in_progress"
    // 413
    public static let bodyTooLarge = "body_too_large"
    // 415
    public static let unsupportedMediaType = "unsupported_media_type"
    // 417
    public static let expectationFailed = "expectation_failed"
    // 422
    public static let idempotencyKeyReused = "idempotency_key_reused"
    public static let conversationConflict = "conversation_conflict"
    public static let attachmentSizeMismatch = "attachment_size_mismatch"
    // 424
    public static let blobMissing = "blob_missing"
    // 431
    public static let headersTooLarge = "headers_too_large"
    // 501 / 505
    public static let unsupportedTransferEncoding = "unsupported_transfer_encoding"
    public static let httpVersionNotSupported = "http_version_not_supported"
    // 500 / 503
    public static let internalError = "internal"
    public static let storageFailed = "storage_failed"
    public static let tooManyConnections = "too_many_connections"
    public static let shuttingDown = "shutting_down"
}

/// Encoders and decoders with the protocol's settings: sorted keys, unescaped slashes.
public enum WireJSON {
    public static func encode<T: Encodable>(_ value: T) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Our types contain only strings, numbers, arrays and optionals: encoding cannot fail.
        return Array((try? encoder.encode(value)) ?? Data("{}".utf8))
    }

    public static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        try JSONDecoder().decode(type, from: Data(bytes))
    }
}

/// RFC 3339 timestamps (`2025-01-31T12:00:00.123Z`).
public enum RFC3339 {
    public static func string(from date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }

    public static func now() -> String { string(from: Date()) }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`; nil if it is not RFC 3339.
    public static func date(from text: String) -> Date? {
        if let d = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text) { return d }
        return try? Date.ISO8601FormatStyle().parse(text)
    }
}
