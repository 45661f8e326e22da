import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import EngineProtocol
import HTTPWire
import OutboxEngine

/// A fake OpenAI-compatible server on loopback, built on the engine's own HTTP server.
final class FakeOpenAI: @unchecked Sendable {
    private let lock = NSLock()
    private var seen: [[UInt8]] = []
    private var auths: [String?] = []
    private var paths: [String] = []
    var server: HTTPServer!
    var port: UInt16 = 0

    init(delay: Double = 0) throws {
        server = HTTPServer(configuration: .init(), handler: { [unowned self] request in
            lock.lock(); seen.append(request.body); auths.append(request.headers["Authorization"]); paths.append(request.path); lock.unlock()
            if delay > 0 { Thread.sleep(forTimeInterval: delay) }
            let json = (try? JSONSerialization.jsonObject(with: Data(request.body))) as? [String: Any]
            let messages = json?["messages"] as? [[String: Any]] ?? []
            let last = messages.last?["content"] as? String ?? ""
            var h = HTTPHeaders()
            h.add("Content-Type", "application/json")
            if last.contains("please fail") {
                return .response(HTTPResponse(status: 500, headers: h, body: Array("{\"error\":{\"message\":\"model exploded\"}}".utf8)))
            }
            let reply = "model saw \(messages.count) messages, last: \(last)"
            let body: [String: Any] = ["id": "x", "object": "chat.completion",
                                       "choices": [["index": 0, "message": ["role": "assistant", "content": reply], "finish_reason": "stop"]]]
            return .response(HTTPResponse(status: 200, headers: h, body: Array(try! JSONSerialization.data(withJSONObject: body))))
        }, errorResponder: { status, _, message in HTTPResponse(status: status, body: Array(message.utf8)) })
        port = try server.start()
    }

    func requests() -> [(path: String, auth: String?, json: [String: Any])] {
        lock.lock(); defer { lock.unlock() }
        return zip(paths, zip(auths, seen)).map { ($0, $1.0, (try? JSONSerialization.jsonObject(with: Data($1.1))) as? [String: Any] ?? [:]) }
    }

    deinit { server.stop() }
}

@Suite("openai responder", .serialized)
struct OpenAIResponderTests {
    @Test func repliesComeFromTheModelWithTheHistoryAndFailuresKeepTheTurn() throws {
        let fake = try FakeOpenAI()
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.path, extraArgs: [
            "--responder", "openai", "--openai-base-url", "http://127.0.0.1:\(fake.port)/v1",
            "--openai-model", "tiny-model", "--openai-api-key", "sk-test",
        ])
        let c = engine.client()
        _ = try c.post("/api/conversations", conversation("c1"))
        #expect(try c.post("/api/conversations/c1/turns", turn("r1", "first question"), headers: [("Idempotency-Key", "r1")]).status == 201)
        let first = try eventually { try c.get("/api/turns/r1").decode(TurnStatus.self).reply }
        #expect(first?.text == "model saw 1 messages, last: first question")
        #expect(first?.responder == "openai")

        #expect(try c.post("/api/conversations/c1/turns", turn("r2", "second"), headers: [("Idempotency-Key", "r2")]).status == 201)
        let second = try eventually { try c.get("/api/turns/r2").decode(TurnStatus.self).reply }
        #expect(second?.text == "model saw 3 messages, last: second")

        let seen = fake.requests()
        #expect(seen.count == 2)
        #expect(seen.allSatisfy { $0.path == "/v1/chat/completions" })
        #expect(seen.allSatisfy { $0.auth == "Bearer sk-test" })
        #expect(seen[1].json["model"] as? String == "tiny-model")
        let history = (seen[1].json["messages"] as? [[String: Any]] ?? []).map { "\($0["role"]!): \($0["content"]!)" }
        #expect(history == ["user: first question", "assistant: model saw 1 messages, last: first question", "user: second"])

        // A model failure marks the reply failed with the reason; the turn stays.
        #expect(try c.post("/api/conversations/c1/turns", turn("r3", "please fail"), headers: [("Idempotency-Key", "r3")]).status == 201)
        let failed = try eventually { () -> TurnStatus? in
            let s = try c.get("/api/turns/r3").decode(TurnStatus.self)
            return s.status == .received ? nil : s
        }
        #expect(failed?.status == .failed)
        #expect(failed?.reply?.error?.contains("HTTP 500") == true)
        #expect(failed?.reply?.error?.contains("model exploded") == true)
        let detail = try c.get("/api/conversations/c1").decode(ConversationDetail.self)
        #expect(detail.turns.map(\.requestId) == ["r1", "r2", "r3"])
        let stats = try c.get("/api/stats").decode(Stats.self)
        #expect(stats.answered == 2 && stats.failed == 1)
    }

    @Test func unreachableModelFailsTheReplyNotTheTurn() throws {
        let dir = TempDir()
        // Port 1 on loopback: connection refused.
        let engine = try EngineProcess(dataDir: dir.path, extraArgs: [
            "--responder", "openai", "--openai-base-url", "http://127.0.0.1:1/v1", "--openai-model", "m",
        ])
        let c = engine.client()
        _ = try c.post("/api/conversations", conversation("c1"))
        #expect(try c.post("/api/conversations/c1/turns", turn("r1", "hello"), headers: [("Idempotency-Key", "r1")]).status == 201)
        let status = try eventually(timeout: 10) { () -> TurnStatus? in
            let s = try c.get("/api/turns/r1").decode(TurnStatus.self)
            return s.status == .received ? nil : s
        }
        #expect(status?.status == .failed)
        #expect(status?.reply?.error?.contains("127.0.0.1:1") == true)
    }

    @Test func eventStreamDeliversTheReplyWhenItArrives() throws {
        let fake = try FakeOpenAI(delay: 0.4)
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.path, extraArgs: [
            "--responder", "openai", "--openai-base-url", "http://127.0.0.1:\(fake.port)/v1", "--openai-model", "m",
        ])
        let c = engine.client()
        _ = try c.post("/api/conversations", conversation("c1"))
        _ = try c.post("/api/conversations/c1/turns", turn("r1", "slow one"), headers: [("Idempotency-Key", "r1")])
        let events = engine.client()
        try events.sendRaw(HTTPClient.requestBytes("GET", "/api/turns/r1/events", token: engine.token))
        let text = String(decoding: try events.readToEnd(), as: UTF8.self)
        let statusAt = try #require(text.range(of: "event: status\n"))
        let replyAt = try #require(text.range(of: "event: reply\n"))
        #expect(statusAt.lowerBound < replyAt.lowerBound)
        #expect(text.contains("\"status\":\"received\""))
        #expect(text.contains("model saw 1 messages, last: slow one"))
    }
}

/// URLSession (libcurl underneath) as the client: Expect: 100-continue and keep-alive interop.
@Suite("URLSession interop", .serialized)
struct URLSessionInteropTests {
    @Test func urlSessionPutsABlobAndPostsATurn() async throws {
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.path)
        let base = "http://127.0.0.1:\(engine.port)/api"
        let session = URLSession(configuration: .ephemeral)
        func send(_ method: String, _ path: String, _ body: Data?, _ headers: [String: String] = [:]) async throws -> (Int, Data) {
            var r = URLRequest(url: URL(string: base + path)!)
            r.httpMethod = method
            r.httpBody = body
            r.setValue("Bearer \(engine.token)", forHTTPHeaderField: "Authorization")
            for (k, v) in headers { r.setValue(v, forHTTPHeaderField: k) }
            let (data, response) = try await session.data(for: r)
            return ((response as! HTTPURLResponse).statusCode, data)
        }
        let bytes = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let sha = try sha256Hex(bytes)
        // libcurl sends `Expect: 100-continue` for this body; the interim response itself is
        // checked byte for byte in EngineProcessTests.expectContinueIsAnsweredBeforeTheBody.
        let (putStatus, _) = try await send("PUT", "/blobs/\(sha)", Data(bytes))
        #expect(putStatus == 201)
        #expect(try await send("POST", "/conversations", Data(WireJSON.encode(conversation("c1")))).0 == 201)
        let a = Attachment(sha256: sha, name: "x.bin", size: Int64(bytes.count), type: "application/octet-stream")
        let (status, data) = try await send("POST", "/conversations/c1/turns", Data(WireJSON.encode(turn("u1", "hi", attachments: [a]))),
                                            ["Idempotency-Key": "u1", "Content-Type": "application/json"])
        #expect(status == 201)
        #expect(try WireJSON.decode(TurnReceipt.self, from: Array(data)).requestId == "u1")
        let (health, _) = try await send("GET", "/health", nil)
        #expect(health == 200)
    }
}
