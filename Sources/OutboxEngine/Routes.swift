import Foundation
import EngineProtocol
import HTTPWire

/// Maps requests to the store: authentication, routing, decoding, status codes.
struct EngineRoutes: Sendable {
    let store: EngineStore
    let token: [UInt8]
    let worker: ReplyWorker
    let startedAt: Date
    let sseTimeout: Double

    static let version = "0.1.0"
    static let jsonBodyLimit = 1 << 20
    static let smallBodyLimit = 64 * 1024

    static func bodyLimit(for head: HTTPRequestHead, maxBlobBytes: Int) -> Int {
        if head.path.hasPrefix("/api/blobs/") { return maxBlobBytes }
        if head.method == "POST" { return jsonBodyLimit }
        return smallBodyLimit
    }

    func handle(_ request: HTTPRequest) -> HTTPServer.Answer {
        let answer = route(request)
        if case .response(let r) = answer, r.status >= 400 { store.count { $0.rejected += 1 } }
        return answer
    }

    private func route(_ request: HTTPRequest) -> HTTPServer.Answer {
        let segments = request.path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
        guard segments.first == "api" else {
            return .response(error(404, ErrorCode.notFound, "no route \(request.method) \(request.path); the API is under /api"))
        }
        let rest = Array(segments.dropFirst())
        let method = request.method

        if rest == ["health"] {
            guard method == "GET" || method == "HEAD" else { return .response(notAllowed(request, "GET")) }
            return .response(json(200, Health(version: Self.version)))
        }
        guard authorized(request) else {
            return .response(error(401, ErrorCode.unauthorized,
                                   request.headers["Authorization"] == nil
                                       ? "missing Authorization: Bearer <token> (the token is in the engine's token file)"
                                       : "the bearer token does not match this engine's token"))
        }
        do {
            switch rest.count {
            case 1 where rest[0] == "conversations":
                switch method {
                case "GET": return .response(json(200, ConversationList(conversations: store.read { $0.conversationList })))
                case "POST": return .response(try createConversation(request))
                default: return .response(notAllowed(request, "GET, POST"))
                }
            case 1 where rest[0] == "stats":
                guard method == "GET" else { return .response(notAllowed(request, "GET")) }
                return .response(json(200, store.stats(uptime: Date().timeIntervalSince(startedAt))))
            case 2 where rest[0] == "conversations":
                guard method == "GET" else { return .response(notAllowed(request, "GET")) }
                guard let detail = store.read({ $0.detail(of: rest[1]) }) else {
                    throw EngineError(404, ErrorCode.conversationNotFound, "conversation \(rest[1]) does not exist")
                }
                return .response(json(200, detail))
            case 3 where rest[0] == "conversations" && rest[2] == "turns":
                guard method == "POST" else { return .response(notAllowed(request, "POST")) }
                return .response(try postTurn(request, conversationId: rest[1]))
            case 2 where rest[0] == "turns":
                guard method == "GET" else { return .response(notAllowed(request, "GET")) }
                store.count { $0.statusChecks += 1 }
                return .response(json(200, try turnStatus(rest[1])))
            case 3 where rest[0] == "turns" && rest[2] == "events":
                guard method == "GET" else { return .response(notAllowed(request, "GET")) }
                return try events(rest[1])
            case 2 where rest[0] == "blobs":
                switch method {
                case "HEAD", "GET":
                    guard Validate.sha256Hex(rest[1]) else { throw badSHA(rest[1]) }
                    guard let size = store.hasBlob(rest[1]) else {
                        throw EngineError(404, ErrorCode.blobNotFound, "blob \(rest[1]) is not stored")
                    }
                    return .response(json(200, BlobReceipt(sha256: rest[1], size: size)))
                case "PUT":
                    guard Validate.sha256Hex(rest[1]) else { throw badSHA(rest[1]) }
                    let created = try store.putBlob(rest[1], request.body)
                    return .response(json(created ? 201 : 200, BlobReceipt(sha256: rest[1], size: Int64(request.body.count))))
                default: return .response(notAllowed(request, "HEAD, PUT"))
                }
            default:
                throw EngineError(404, ErrorCode.notFound, "no route \(method) \(request.path)")
            }
        } catch let e as EngineError {
            return .response(error(e.status, e.code, e.message))
        } catch {
            return .response(self.error(500, ErrorCode.internalError, "\(error)"))
        }
    }

    // MARK: - Handlers

    private func createConversation(_ request: HTTPRequest) throws -> HTTPResponse {
        let c = try decode(Conversation.self, request)
        guard Validate.id(c.id) else { throw invalid("id", c.id) }
        guard RFC3339.date(from: c.createdAt) != nil else { throw invalid("createdAt", c.createdAt, "an RFC 3339 timestamp") }
        guard !c.originSurface.isEmpty else { throw invalid("originSurface", c.originSurface, "a non-empty surface name") }
        let (created, stored) = try store.createConversation(c)
        return json(created ? 201 : 200, stored)
    }

    private func postTurn(_ request: HTTPRequest, conversationId: String) throws -> HTTPResponse {
        store.count { $0.turnPosts += 1 }
        guard let key = request.headers["Idempotency-Key"], !key.isEmpty else {
            throw EngineError(400, ErrorCode.idempotencyKeyMissing, "POST a turn with the header Idempotency-Key: <requestId>")
        }
        let post: TurnPost
        post = try decode(TurnPost.self, request)
        guard post.requestId == key else {
            throw EngineError(400, ErrorCode.idempotencyKeyMismatch,
                              "Idempotency-Key \(key) differs from the body's requestId \(post.requestId); they must be equal")
        }
        guard Validate.id(post.requestId) else { throw invalid("requestId", post.requestId) }
        guard RFC3339.date(from: post.createdAt) != nil else { throw invalid("createdAt", post.createdAt, "an RFC 3339 timestamp") }
        for a in post.attachments {
            guard Validate.sha256Hex(a.sha256) else { throw invalid("attachments[].sha256", a.sha256, "64 lowercase hex digits") }
            guard a.size >= 0 else { throw invalid("attachments[].size", "\(a.size)", "a size ≥ 0") }
        }
        switch try store.postTurn(conversationId: conversationId, post) {
        case .created(let receipt):
            worker.enqueue(receipt.requestId)
            return json(201, receipt)
        case .replayed(let receipt):
            var r = json(200, receipt)
            r.headers.add("Idempotent-Replayed", "true")
            return r
        }
    }

    private func turnStatus(_ id: String) throws -> TurnStatus {
        guard let status = store.read({ $0.status(of: id) }) else {
            throw EngineError(404, ErrorCode.turnNotFound, "no turn with requestId \(id) was received; it is safe to send it")
        }
        return status
    }

    /// SSE: one `status` event now; when the reply arrives a final `reply` event; then close.
    private func events(_ id: String) throws -> HTTPServer.Answer {
        let first = try turnStatus(id)
        var headers = HTTPHeaders()
        headers.add("Content-Type", "text/event-stream")
        headers.add("Cache-Control", "no-cache")
        let store = self.store
        let timeout = sseTimeout
        return .stream(status: 200, headers: headers) { sink in
            guard sink.send(event: "status", data: String(decoding: WireJSON.encode(first), as: UTF8.self)) else { return }
            if first.reply != nil { return }
            let deadline = Date().addingTimeInterval(timeout)
            guard let final = store.waitForReply(id, until: deadline, cancelled: { sink.isCancelled }), final.reply != nil else {
                sink.send(event: "timeout", data: "{\"requestId\":\"\(id)\"}")
                return
            }
            sink.send(event: "reply", data: String(decoding: WireJSON.encode(final), as: UTF8.self))
        }
    }

    // MARK: - Helpers

    /// Constant-time comparison of the presented bearer token with ours.
    private func authorized(_ request: HTTPRequest) -> Bool {
        guard let header = request.headers["Authorization"] else { return false }
        let presented = Array(header.utf8)
        let prefix = Array("Bearer ".utf8)
        guard presented.count >= prefix.count,
              zip(presented.prefix(prefix.count), prefix).allSatisfy({ lowerASCII($0) == lowerASCII($1) }) else { return false }
        return constantTimeEquals(Array(presented.dropFirst(prefix.count)), token)
    }

    private func decode<T: Decodable>(_ type: T.Type, _ request: HTTPRequest) throws -> T {
        do { return try WireJSON.decode(type, from: request.body) }
        catch DecodingError.keyNotFound(let key, _) {
            throw EngineError(400, ErrorCode.invalidJSON, "\(T.self) body is missing the field \"\(key.stringValue)\"")
        } catch DecodingError.typeMismatch(_, let ctx), DecodingError.valueNotFound(_, let ctx) {
            let path = ctx.codingPath.map(\.stringValue).joined(separator: ".")
            throw EngineError(400, ErrorCode.invalidJSON, "\(T.self) body field \"\(path)\" has the wrong type")
        } catch {
            throw EngineError(400, ErrorCode.invalidJSON, "body is not valid JSON for \(T.self) (\(request.body.count) bytes)")
        }
    }

    private func invalid(_ field: String, _ value: String, _ expected: String = "1–128 characters of A–Z a–z 0–9 - _ . :") -> EngineError {
        EngineError(400, ErrorCode.invalidField, "field \(field) = \"\(value.prefix(80))\" must be \(expected)")
    }

    private func badSHA(_ s: String) -> EngineError {
        EngineError(400, ErrorCode.invalidField, "blob name \"\(s.prefix(80))\" must be a SHA-256 in 64 lowercase hex digits")
    }

    private func notAllowed(_ request: HTTPRequest, _ allowed: String) -> HTTPResponse {
        var r = error(405, ErrorCode.methodNotAllowed, "\(request.method) is not allowed on \(request.path); use \(allowed)")
        r.headers.add("Allow", allowed)
        return r
    }

    func json<T: Encodable>(_ status: Int, _ value: T) -> HTTPResponse {
        var h = HTTPHeaders()
        h.add("Content-Type", "application/json")
        return HTTPResponse(status: status, headers: h, body: WireJSON.encode(value))
    }

    func error(_ status: Int, _ code: String, _ message: String) -> HTTPResponse {
        Self.errorResponse(status, code, message)
    }

    static func errorResponse(_ status: Int, _ code: String, _ message: String) -> HTTPResponse {
        var h = HTTPHeaders()
        h.add("Content-Type", "application/json")
        return HTTPResponse(status: status, headers: h, body: WireJSON.encode(ErrorEnvelope(code: code, message: message)))
    }
}

@inline(__always) private func lowerASCII(_ c: UInt8) -> UInt8 { (c >= 65 && c <= 90) ? c + 32 : c }

/// Compares in time that depends only on the lengths, never on where the bytes first differ.
func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    var diff = UInt8(a.count == b.count ? 0 : 1)
    let n = max(a.count, b.count)
    for i in 0..<n {
        let x = i < a.count ? a[i] : 0
        let y = i < b.count ? b[i] : 0
        diff |= x ^ y
    }
    return diff == 0
}
