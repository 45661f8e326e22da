/// The outbox's record types, as they appear in turns.jsonl. Each maps to and from the `fields`
/// of a `LogEntry`; docs/FORMAT.md lists every field.
public enum TurnState: String, Sendable, CaseIterable, Codable {
    case queued, syncing, synced, failedNeedsAttention, cancelled, retired
}

public struct AttachmentRef: Sendable, Equatable, Hashable, Codable {
    public var sha256: String
    public var name: String
    public var size: Int64
    public var type: String
    public init(sha256: String, name: String, size: Int64, type: String) {
        self.sha256 = sha256; self.name = name; self.size = size; self.type = type
    }
}

/// The engine's answer to a delivered turn, kept in the `synced` record.
public struct EngineAnswer: Sendable, Equatable, Codable {
    public var httpStatus: Int
    public var status: String
    public var replayed: Bool
    public init(httpStatus: Int, status: String, replayed: Bool) {
        self.httpStatus = httpStatus; self.status = status; self.replayed = replayed
    }
}

public enum OutboxRecord: Sendable, Equatable {
    case conversation(id: String, title: String, originSurface: String, createdAt: String)
    /// The engine holds the conversation; `originSurface` is what it reported back.
    case conversationSynced(id: String, originSurface: String)
    case turn(id: String, conversation: String, text: String, attachments: [AttachmentRef], surface: String, createdAt: String)
    case state(id: String, state: TurnState, attempt: Int, nextAttemptAt: String?, error: String?, answer: EngineAnswer?, reason: String?)
    case reply(id: String, status: String, text: String?, error: String?)
    case retired(id: String)
    case cancelled(id: String)

    public static let maxErrorBytes = 512

    public var typeName: String {
        switch self {
        case .conversation: return "conversation"
        case .conversationSynced: return "conversation.synced"
        case .turn: return "turn"
        case .state: return "state"
        case .reply: return "reply"
        case .retired: return "retired"
        case .cancelled: return "cancelled"
        }
    }

    /// The turn a record is about (nil for conversation records).
    public var turnID: String? {
        switch self {
        case .turn(let id, _, _, _, _, _), .state(let id, _, _, _, _, _, _), .reply(let id, _, _, _),
             .retired(let id), .cancelled(let id): return id
        case .conversation, .conversationSynced: return nil
        }
    }

    public var fields: JSONObject {
        switch self {
        case let .conversation(id, title, origin, createdAt):
            return ["conversation": .string(id), "title": .string(title), "originSurface": .string(origin), "createdAt": .string(createdAt)]
        case let .conversationSynced(id, origin):
            return ["conversation": .string(id), "originSurface": .string(origin)]
        case let .turn(id, conversation, text, attachments, surface, createdAt):
            return ["id": .string(id), "conversation": .string(conversation), "text": .string(text),
                    "attachments": .array(attachments.map { a in
                        .object(["sha256": .string(a.sha256), "name": .string(a.name), "size": .int(a.size), "type": .string(a.type)])
                    }),
                    "surface": .string(surface), "createdAt": .string(createdAt)]
        case let .state(id, state, attempt, next, error, answer, reason):
            var o: JSONObject = ["id": .string(id), "state": .string(state.rawValue), "attempt": .int(Int64(attempt))]
            if let next { o["nextAttemptAt"] = .string(next) }
            if let error { o["error"] = .string(Self.clip(error)) }
            if let answer {
                o["engine"] = .object(["http": .int(Int64(answer.httpStatus)), "status": .string(answer.status), "replayed": .bool(answer.replayed)])
            }
            if let reason { o["reason"] = .string(reason) }
            return o
        case let .reply(id, status, text, error):
            var o: JSONObject = ["id": .string(id), "status": .string(status)]
            if let text { o["text"] = .string(text) }
            if let error { o["error"] = .string(Self.clip(error)) }
            return o
        case let .retired(id): return ["id": .string(id)]
        case let .cancelled(id): return ["id": .string(id)]
        }
    }

    /// Cuts an error message to 512 UTF-8 bytes without splitting a character.
    public static func clip(_ s: String) -> String {
        if s.utf8.count <= maxErrorBytes { return s }
        var out = ""
        var used = 0
        for ch in s {
            let n = String(ch).utf8.count
            if used + n > maxErrorBytes - 3 { break }
            out.append(ch); used += n
        }
        return out + "..."
    }

    public init(type: String, fields f: JSONObject) throws(LineError) {
        func str(_ k: String) throws(LineError) -> String {
            guard let v = f[k] else { throw .missingField(k) }
            guard case .string(let s) = v else { throw .invalidField(k, "not a string") }
            return s
        }
        func optStr(_ k: String) throws(LineError) -> String? {
            guard let v = f[k], v != .null else { return nil }
            guard case .string(let s) = v else { throw .invalidField(k, "not a string") }
            return s
        }
        func int(_ k: String) throws(LineError) -> Int64 {
            guard let v = f[k] else { throw .missingField(k) }
            guard case .int(let i) = v else { throw .invalidField(k, "not an integer") }
            return i
        }
        switch type {
        case "conversation":
            self = .conversation(id: try str("conversation"), title: try str("title"),
                                 originSurface: try str("originSurface"), createdAt: try str("createdAt"))
        case "conversation.synced":
            self = .conversationSynced(id: try str("conversation"), originSurface: try str("originSurface"))
        case "turn":
            guard case .array(let items)? = f["attachments"] else { throw .missingField("attachments") }
            var refs: [AttachmentRef] = []
            for item in items {
                guard case .object(let a) = item,
                      case .string(let sha)? = a["sha256"], Hex.isSHA256(sha),
                      case .string(let name)? = a["name"], case .int(let size)? = a["size"], size >= 0,
                      case .string(let t)? = a["type"] else { throw .invalidField("attachments", "each needs sha256, name, size, type") }
                refs.append(AttachmentRef(sha256: sha, name: name, size: size, type: t))
            }
            self = .turn(id: try str("id"), conversation: try str("conversation"), text: try str("text"),
                         attachments: refs, surface: try str("surface"), createdAt: try str("createdAt"))
        case "state":
            guard let state = TurnState(rawValue: try str("state")) else { throw .invalidField("state", "unknown state") }
            var answer: EngineAnswer?
            if let e = f["engine"], e != .null {
                guard case .object(let o) = e, case .int(let http)? = o["http"], case .string(let st)? = o["status"] else {
                    throw .invalidField("engine", "needs http and status")
                }
                answer = EngineAnswer(httpStatus: Int(http), status: st, replayed: o["replayed"]?.boolValue ?? false)
            }
            let attempt = try int("attempt")
            guard attempt >= 0 else { throw .invalidField("attempt", "negative") }
            self = .state(id: try str("id"), state: state, attempt: Int(attempt), nextAttemptAt: try optStr("nextAttemptAt"),
                          error: try optStr("error"), answer: answer, reason: try optStr("reason"))
        case "reply":
            self = .reply(id: try str("id"), status: try str("status"), text: try optStr("text"), error: try optStr("error"))
        case "retired": self = .retired(id: try str("id"))
        case "cancelled": self = .cancelled(id: try str("id"))
        default: throw .invalidField("type", "unknown record type \"\(type)\"")
        }
    }
}
