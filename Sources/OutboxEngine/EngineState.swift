import EngineProtocol
import enum OutboxFormat.JSONValue
import struct OutboxFormat.JSONObject
import struct OutboxFormat.LogEntry

// The engine's pure core: records ↔ values, the fold of the journal into state, and the decisions
// each request needs. No I/O here; EngineStore is the shell that makes decisions durable.

/// A turn as the engine holds it.
struct StoredTurn: Sendable, Equatable {
    var conversationId: String
    var post: TurnPost
    var receivedAt: String

    var receipt: TurnReceipt {
        TurnReceipt(requestId: post.requestId, conversationId: conversationId, receivedAt: receivedAt)
    }
}

/// Journal record types and their fields (docs/PROTOCOL.md, "Engine state"). Fields sit beside
/// the line's own `v`, `seq`, `type`, `at` and `crc`, so none of those names is used here.
enum EngineRecord {
    static let conversation = "engine.conversation"
    static let turn = "engine.turn"
    static let reply = "engine.reply"
    static let blob = "engine.blob"

    static func fields(_ c: Conversation) -> JSONObject {
        JSONObject([("id", .string(c.id)), ("title", .string(c.title)),
                    ("originSurface", .string(c.originSurface)), ("createdAt", .string(c.createdAt))])
    }

    static func fields(_ t: StoredTurn) -> JSONObject {
        JSONObject([
            ("requestId", .string(t.post.requestId)), ("conversationId", .string(t.conversationId)),
            ("text", .string(t.post.text)),
            ("attachments", .array(t.post.attachments.map { a in
                .object(JSONObject([("sha256", .string(a.sha256)), ("name", .string(a.name)),
                                    ("size", .int(a.size)), ("type", .string(a.type))]))
            })),
            ("createdAt", .string(t.post.createdAt)), ("surface", .string(t.post.surface)),
            ("receivedAt", .string(t.receivedAt)),
        ])
    }

    static func fields(requestId: String, _ r: Reply) -> JSONObject {
        var pairs: [(String, JSONValue)] = [("requestId", .string(requestId)), ("responder", .string(r.responder)), ("repliedAt", .string(r.at))]
        if let text = r.text { pairs.append(("text", .string(text))) }
        if let error = r.error { pairs.append(("error", .string(error))) }
        return JSONObject(pairs)
    }

    static func fields(blob sha256: String, size: Int64) -> JSONObject {
        JSONObject([("sha256", .string(sha256)), ("size", .int(size))])
    }
}

/// A journal record the engine cannot read: names the record so an operator can find it.
struct EngineRecordError: Error, CustomStringConvertible {
    var seq: Int64
    var type: String
    var field: String
    var description: String { "engine journal record seq \(seq) (\(type)): field \"\(field)\" missing or of the wrong type" }
}

struct EngineState: Sendable {
    private(set) var conversations: [String: Conversation] = [:]
    private(set) var conversationOrder: [String] = []
    private(set) var turns: [String: StoredTurn] = [:]
    private(set) var turnsByConversation: [String: [String]] = [:]
    private(set) var replies: [String: Reply] = [:]
    private(set) var blobs: [String: Int64] = [:]

    /// Applies one journal record. Unknown types are skipped (a newer engine may add some).
    mutating func apply(type: String, fields f: JSONObject, seq: Int64) throws {
        func str(_ k: String) throws -> String {
            guard case .string(let s)? = f[k] else { throw EngineRecordError(seq: seq, type: type, field: k) }
            return s
        }
        func optStr(_ k: String) -> String? { if case .string(let s)? = f[k] { return s }; return nil }
        switch type {
        case EngineRecord.conversation:
            let c = Conversation(id: try str("id"), title: try str("title"),
                                 originSurface: try str("originSurface"), createdAt: try str("createdAt"))
            if conversations[c.id] == nil { conversationOrder.append(c.id) }
            conversations[c.id] = c
        case EngineRecord.turn:
            guard case .array(let items)? = f["attachments"] else { throw EngineRecordError(seq: seq, type: type, field: "attachments") }
            var attachments: [Attachment] = []
            for item in items {
                guard case .object(let a) = item, case .string(let sha)? = a["sha256"], case .string(let name)? = a["name"],
                      case .int(let size)? = a["size"], case .string(let kind)? = a["type"] else {
                    throw EngineRecordError(seq: seq, type: type, field: "attachments")
                }
                attachments.append(Attachment(sha256: sha, name: name, size: size, type: kind))
            }
            let t = StoredTurn(conversationId: try str("conversationId"),
                               post: TurnPost(requestId: try str("requestId"), text: try str("text"), attachments: attachments,
                                              createdAt: try str("createdAt"), surface: try str("surface")),
                               receivedAt: try str("receivedAt"))
            if turns[t.post.requestId] == nil { turnsByConversation[t.conversationId, default: []].append(t.post.requestId) }
            turns[t.post.requestId] = t
        case EngineRecord.reply:
            replies[try str("requestId")] = Reply(text: optStr("text"), error: optStr("error"),
                                                   responder: try str("responder"), at: try str("repliedAt"))
        case EngineRecord.blob:
            guard case .int(let size)? = f["size"] else { throw EngineRecordError(seq: seq, type: type, field: "size") }
            blobs[try str("sha256")] = size
        default:
            break
        }
    }

    // MARK: - Queries

    func status(of requestId: String) -> TurnStatus? {
        guard let t = turns[requestId] else { return nil }
        let reply = replies[requestId]
        return TurnStatus(requestId: requestId, conversationId: t.conversationId,
                          status: Turn(post: t.post, conversationId: t.conversationId, receivedAt: t.receivedAt, reply: reply).status,
                          reply: reply)
    }

    func detail(of conversationId: String) -> ConversationDetail? {
        guard let c = conversations[conversationId] else { return nil }
        let list = (turnsByConversation[conversationId] ?? []).compactMap { id in
            turns[id].map { Turn(post: $0.post, conversationId: $0.conversationId, receivedAt: $0.receivedAt, reply: replies[id]) }
        }
        return ConversationDetail(conversation: c, turns: list)
    }

    var conversationList: [Conversation] { conversationOrder.compactMap { conversations[$0] } }

    /// Turns with no reply yet, in the order received: what the responder still owes after a restart.
    var unanswered: [String] {
        conversationOrder.flatMap { turnsByConversation[$0] ?? [] }.filter { replies[$0] == nil }
    }

    /// The conversation up to and including `requestId`, as chat messages (answered replies only).
    func history(upTo requestId: String) -> [ChatMessage] {
        guard let t = turns[requestId] else { return [] }
        var messages: [ChatMessage] = []
        for id in turnsByConversation[t.conversationId] ?? [] {
            guard let turn = turns[id] else { continue }
            messages.append(ChatMessage(role: "user", content: turn.post.text, attachments: turn.post.attachments))
            if id == requestId { break }
            if let text = replies[id]?.text { messages.append(ChatMessage(role: "assistant", content: text, attachments: [])) }
        }
        return messages
    }

    // MARK: - Decisions

    enum ConversationDecision: Equatable {
        case create
        case replay(Conversation)
        case conflict(existing: Conversation)
    }

    func decide(_ c: Conversation) -> ConversationDecision {
        guard let existing = conversations[c.id] else { return .create }
        return existing == c ? .replay(existing) : .conflict(existing: existing)
    }

    enum TurnDecision: Equatable {
        case create
        case replay(TurnReceipt)
        case keyReused(existing: StoredTurn)
        case conversationMissing
        case blobsMissing([String])
        case sizeMismatch(Attachment, stored: Int64)
    }

    /// The idempotency rule: a known key with the same conversation and body replays the original
    /// receipt; with anything else it is a conflict. Only a new key goes on to the other checks.
    func decide(conversationId: String, _ post: TurnPost) -> TurnDecision {
        if let existing = turns[post.requestId] {
            if existing.conversationId == conversationId && existing.post == post { return .replay(existing.receipt) }
            return .keyReused(existing: existing)
        }
        guard conversations[conversationId] != nil else { return .conversationMissing }
        let missing = post.attachments.map(\.sha256).filter { blobs[$0] == nil }
        if !missing.isEmpty { return .blobsMissing(missing) }
        for a in post.attachments where blobs[a.sha256] != a.size { return .sizeMismatch(a, stored: blobs[a.sha256]!) }
        return .create
    }

    var answeredCount: Int { replies.values.filter { $0.error == nil }.count }
    var failedCount: Int { replies.values.filter { $0.error != nil }.count }
}

/// One message of a conversation's history, as sent to a responder.
public struct ChatMessage: Sendable, Equatable {
    public var role: String
    public var content: String
    public var attachments: [Attachment]
    public init(role: String, content: String, attachments: [Attachment]) {
        self.role = role; self.content = content; self.attachments = attachments
    }
}

/// Validation of client-supplied fields, shared by the routes.
enum Validate {
    /// Ids (conversation ids, request ids): 1–128 of `A–Z a–z 0–9 - _ . :`.
    static func id(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= 128 && s.utf8.allSatisfy {
            ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || $0 == 45 || $0 == 95 || $0 == 46 || $0 == 58
        }
    }

    static func sha256Hex(_ s: String) -> Bool {
        s.utf8.count == 64 && s.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }
    }
}
