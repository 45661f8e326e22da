import EngineProtocol
import Foundation
import OutboxFormat

/// A failed engine call, with what was asked, of whom, for which turn, and what came back.
public struct EngineError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable {
        /// No HTTP answer at all.
        case transport(TransportError)
        /// An HTTP answer other than the success we expected. `code` and `message` come from the
        /// engine's error body when it sent one.
        case http(status: Int, code: String?, message: String)
        /// A success status whose body we could not understand.
        case malformed(status: Int, reason: String)
    }
    public var method: String
    public var url: String
    /// The turn's request id (Idempotency-Key), when the call was about a turn.
    public var requestID: String?
    public var kind: Kind
    /// From a Retry-After header, in milliseconds.
    public var retryAfterMillis: Int64?

    public var httpStatus: Int? {
        switch kind {
        case .http(let s, _, _), .malformed(let s, _): return s
        case .transport: return nil
        }
    }
    public var code: String? { if case .http(_, let c, _) = kind { return c }; return nil }
    public var isTransport: Bool { if case .transport = kind { return true }; return false }

    public var description: String {
        let turn = requestID.map { " (turn \($0))" } ?? ""
        switch kind {
        case .transport(let t):
            return "\(method) \(url)\(turn): engine unreachable: \(t.message) (NSURLErrorDomain \(t.code))"
        case .http(let status, let code, let message):
            return "\(method) \(url)\(turn): HTTP \(status)\(code.map { " \($0)" } ?? ""): \(message)"
        case .malformed(let status, let reason):
            return "\(method) \(url)\(turn): HTTP \(status) with a body we cannot read: \(reason)"
        }
    }
}

/// What the engine said to a turn POST.
public struct TurnPostResult: Sendable, Equatable {
    public var httpStatus: Int
    public var status: String
    /// 200: the engine already held this request id and replayed its original answer.
    public var replayed: Bool
}

/// A turn as the engine holds it (`GET /api/turns/{id}` or a conversation listing).
public struct EngineTurnStatus: Sendable, Equatable {
    public var requestID: String
    public var conversationID: String
    /// received | answered | failed
    public var status: String
    public var replyText: String?
    public var replyError: String?
    public var hasReply: Bool { status == "answered" || status == "failed" }
}

/// The protocol of docs/PROTOCOL.md over a transport: bearer token, JSON bodies, error bodies
/// turned into `EngineError`s. Synchronous: the drain is one loop and the transport blocks.
public struct EngineClient: Sendable {
    public let transport: any EngineTransport
    let token: String
    let clock: @Sendable () -> Int64

    public init(transport: any EngineTransport, token: String, clock: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) }) {
        self.transport = transport; self.token = token.trimmingCharacters(in: .whitespacesAndNewlines); self.clock = clock
    }

    /// The engine at `baseURL`: `http://` over `SocketTransport` (poll-based, sleeps while it
    /// waits), `https://` over `URLSessionTransport`.
    public init(baseURL: String, token: String, timeout: TimeInterval = 30) {
        self.init(transport: makeEngineTransport(baseURL: baseURL, timeout: timeout), token: token)
    }

    // MARK: routes

    public func health() throws(EngineError) -> String {
        let r = try call("GET", "/api/health", expect: [200], auth: false)
        struct H: Decodable { var status: String; var version: String? }
        let h: H = try decode(H.self, r, "GET", "/api/health", nil)
        return h.version ?? h.status
    }

    /// Creates the conversation (201) or confirms the identical one (200). Returns the origin
    /// surface the engine holds.
    public func createConversation(id: String, title: String, originSurface: String, createdAt: String) throws(EngineError) -> String {
        let body = WireJSON.encode(EngineProtocol.Conversation(id: id, title: title, originSurface: originSurface, createdAt: createdAt))
        let r = try call("POST", "/api/conversations", body: body, expect: [200, 201])
        let c: EngineProtocol.Conversation = try decode(EngineProtocol.Conversation.self, r, "POST", "/api/conversations", nil)
        return c.originSurface
    }

    public func hasBlob(_ sha256: String) throws(EngineError) -> Bool {
        let path = "/api/blobs/\(sha256)"
        let r = try call("HEAD", path, expect: [200, 404])
        return r.status == 200
    }

    public func putBlob(_ sha256: String, bytes: [UInt8]) throws(EngineError) {
        _ = try call("PUT", "/api/blobs/\(sha256)", headers: ["Content-Type": "application/octet-stream"], body: bytes,
                     expect: [200, 201])
    }

    public func postTurn(conversationID: String, requestID: String, text: String, attachments: [AttachmentRef],
                         createdAt: String, surface: String) throws(EngineError) -> TurnPostResult {
        let post = TurnPost(requestId: requestID, text: text,
                            attachments: attachments.map { Attachment(sha256: $0.sha256, name: $0.name, size: $0.size, type: $0.type) },
                            createdAt: createdAt, surface: surface)
        let path = "/api/conversations/\(conversationID)/turns"
        let r = try call("POST", path, headers: ["Idempotency-Key": requestID], body: WireJSON.encode(post),
                         expect: [200, 201], requestID: requestID)
        let receipt: TurnReceipt = try decode(TurnReceipt.self, r, "POST", path, requestID)
        return TurnPostResult(httpStatus: r.status, status: receipt.status.rawValue, replayed: r.status == 200)
    }

    /// What the engine holds under this request id, or nil when it has never seen it.
    public func turnStatus(_ requestID: String) throws(EngineError) -> EngineTurnStatus? {
        let path = "/api/turns/\(requestID)"
        let r = try call("GET", path, expect: [200, 404], requestID: requestID)
        if r.status == 404 {
            let env = try? WireJSON.decode(ErrorEnvelope.self, from: r.body)
            // Only the engine's own "no such turn" means "not there"; any other 404 (a wrong base
            // URL, a proxy) must not be read as permission to send.
            guard env?.code == ErrorCode.turnNotFound else {
                throw error(from: r, "GET", path, requestID)
            }
            return nil
        }
        let s: TurnStatus = try decode(TurnStatus.self, r, "GET", path, requestID)
        return EngineTurnStatus(requestID: s.requestId, conversationID: s.conversationId, status: s.status.rawValue,
                                replyText: s.reply?.text, replyError: s.reply?.error)
    }

    /// Every turn of a conversation with its reply: one request to collect many replies.
    public func conversationTurns(_ conversationID: String) throws(EngineError) -> [EngineTurnStatus] {
        let path = "/api/conversations/\(conversationID)"
        let r = try call("GET", path, expect: [200])
        let d: ConversationDetail = try decode(ConversationDetail.self, r, "GET", path, nil)
        return d.turns.map {
            EngineTurnStatus(requestID: $0.requestId, conversationID: $0.conversationId, status: $0.status.rawValue,
                             replyText: $0.reply?.text, replyError: $0.reply?.error)
        }
    }

    public func stats() throws(EngineError) -> Stats {
        let r = try call("GET", "/api/stats", expect: [200])
        return try decode(Stats.self, r, "GET", "/api/stats", nil)
    }

    // MARK: plumbing

    func call(_ method: String, _ path: String, headers: [String: String] = [:], body: [UInt8]? = nil,
              expect: Set<Int>, auth: Bool = true, requestID: String? = nil) throws(EngineError) -> HTTPExchangeResponse {
        var h = headers
        if auth { h["Authorization"] = "Bearer \(token)" }
        if body != nil && h["Content-Type"] == nil { h["Content-Type"] = "application/json" }
        let response: HTTPExchangeResponse
        do {
            response = try transport.send(HTTPExchangeRequest(method: method, path: path, headers: h, body: body))
        } catch let t as TransportError {
            throw EngineError(method: method, url: transport.baseURL + path, requestID: requestID, kind: .transport(t))
        } catch {
            throw EngineError(method: method, url: transport.baseURL + path, requestID: requestID,
                              kind: .transport(TransportError(method: method, url: transport.baseURL + path, code: 0, message: "\(error)")))
        }
        guard expect.contains(response.status) else { throw self.error(from: response, method, path, requestID) }
        return response
    }

    func error(from r: HTTPExchangeResponse, _ method: String, _ path: String, _ requestID: String?) -> EngineError {
        var code: String?
        var message: String
        if let env = try? WireJSON.decode(ErrorEnvelope.self, from: r.body) {
            code = env.code; message = env.message
        } else {
            let text = String(decoding: r.body.prefix(300), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            message = text.isEmpty ? HTTPURLResponseReason.phrase(r.status) : text
        }
        let retryAfter = r.headers["retry-after"].flatMap { parseRetryAfter($0, nowMillis: clock()) }
        return EngineError(method: method, url: transport.baseURL + path, requestID: requestID,
                           kind: .http(status: r.status, code: code, message: message), retryAfterMillis: retryAfter)
    }

    func decode<T: Decodable>(_ type: T.Type, _ r: HTTPExchangeResponse, _ method: String, _ path: String,
                              _ requestID: String?) throws(EngineError) -> T {
        do { return try WireJSON.decode(type, from: r.body) } catch {
            throw EngineError(method: method, url: transport.baseURL + path, requestID: requestID,
                              kind: .malformed(status: r.status, reason: "\(error)"))
        }
    }
}

enum HTTPURLResponseReason {
    static func phrase(_ status: Int) -> String {
        switch status {
        case 408: return "request timeout"
        case 429: return "too many requests"
        case 500: return "internal server error"
        case 502: return "bad gateway"
        case 503: return "service unavailable"
        case 504: return "gateway timeout"
        default: return "no error body"
        }
    }
}
