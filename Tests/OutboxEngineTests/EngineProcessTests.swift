import Foundation
import Testing
import EngineProtocol
import OutboxIO

/// Every route and error of docs/PROTOCOL.md against the real `outbox-engine` process.
@Suite("outbox-engine process", .serialized)
struct EngineProcessTests {
    @Test func healthIsOpenEverythingElseNeedsTheToken() throws {
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.path)
        let c = engine.client()

        let health = try c.request("GET", "/api/health", auth: false)
        #expect(health.status == 200)
        #expect(try health.decode(Health.self).status == "ok")

        for path in ["/api/stats", "/api/conversations", "/api/turns/x", "/api/conversations/c/turns"] {
            let r = try c.request("GET", path, auth: false)
            #expect(r.status == 401, "\(path)")
            #expect(r.errorCode == ErrorCode.unauthorized)
        }
        let wrong = try c.request("GET", "/api/stats", headers: [("Authorization", "Bearer " + engine.token.dropLast() + "x")], auth: false)
        #expect(wrong.status == 401)
        let empty = try c.request("GET", "/api/stats", headers: [("Authorization", "Bearer ")], auth: false)
        #expect(empty.status == 401)
        #expect(try c.get("/api/stats").status == 200)
        #expect(try c.get("/api/nope").status == 404)
        #expect(try c.get("/elsewhere").status == 404)
        let delete = try c.request("DELETE", "/api/conversations")
        #expect(delete.status == 405)
        #expect(delete.headers["Allow"] == "GET, POST")
    }

    @Test func generatedTokenIsPrivateAndKeptAcrossRestarts() throws {
        let dir = TempDir()
        var engine: EngineProcess? = try EngineProcess(dataDir: dir.path)
        let first = engine!.token
        #expect(first.count == 64)
        #expect(engine!.text.contains("\(dir.path)/token"))
        let mode = try #require(try PosixFileSystem().linkStatus(dir.path + "/token")).mode & 0o777
        #expect(mode == 0o600)
        #expect(engine!.terminate() == 0)
        engine = try EngineProcess(dataDir: dir.path)
        #expect(engine!.token == first)
        // The environment wins over the stored file.
        _ = engine!.terminate()
        let envEngine = try EngineProcess(dataDir: dir.path, environment: ["OUTBOX_ENGINE_TOKEN": "from-env"])
        #expect(try envEngine.client().get("/api/stats").status == 200)
        #expect(try HTTPClient(port: envEngine.port, token: first).get("/api/stats").status == 401)
    }

    @Test func conversationsCreateReplayConflictListAndGet() throws {
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.path)
        let c = engine.client()

        let created = try c.post("/api/conversations", conversation("c1", surface: "phone"))
        #expect(created.status == 201)
        #expect(try created.decode(Conversation.self) == conversation("c1", surface: "phone"))
        let again = try c.post("/api/conversations", conversation("c1", surface: "phone"))
        #expect(again.status == 200)
        #expect(again.body == created.body)
        let other = try c.post("/api/conversations", conversation("c1", title: "other", surface: "phone"))
        #expect(other.status == 422)
        #expect(other.errorCode == ErrorCode.conversationConflict)

        _ = try c.post("/api/conversations", conversation("c2", surface: "web"))
        let list = try c.get("/api/conversations").decode(ConversationList.self)
        #expect(list.conversations.map(\.id) == ["c1", "c2"])
        #expect(list.conversations.map(\.originSurface) == ["phone", "web"])
        #expect(list.conversations.allSatisfy { $0.createdAt == t0 })

        let one = try c.get("/api/conversations/c2")
        #expect(one.status == 200)
        #expect(try one.decode(ConversationDetail.self).turns.isEmpty)
        #expect(try c.get("/api/conversations/zz").errorCode == ErrorCode.conversationNotFound)

        #expect(try c.request("POST", "/api/conversations", body: Array("{nope".utf8)).errorCode == ErrorCode.invalidJSON)
        #expect(try c.post("/api/conversations", conversation("bad id!")).errorCode == ErrorCode.invalidField)
        #expect(try c.post("/api/conversations", Conversation(id: "c3", title: "", originSurface: "cli", createdAt: "yesterday")).errorCode == ErrorCode.invalidField)
    }

    @Test func oneKeyTwiceIsOneTurnAndOneReplay() throws {
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.path)
        let c = engine.client()
        _ = try c.post("/api/conversations", conversation("c1"))

        let key = [("Idempotency-Key", "r1")]
        let first = try c.post("/api/conversations/c1/turns", turn("r1", "hi there"), headers: key)
        #expect(first.status == 201)
        let receipt = try first.decode(TurnReceipt.self)
        #expect(receipt.requestId == "r1" && receipt.conversationId == "c1" && receipt.status == .received)
        let second = try c.post("/api/conversations/c1/turns", turn("r1", "hi there"), headers: key)
        #expect(second.status == 200)
        #expect(second.body == first.body)
        #expect(second.headers["Idempotent-Replayed"] == "true")

        let other = try c.post("/api/conversations/c1/turns", turn("r1", "hi there!"), headers: key)
        #expect(other.status == 422)
        #expect(other.errorCode == ErrorCode.idempotencyKeyReused)
        _ = try c.post("/api/conversations", conversation("c2"))
        let elsewhere = try c.post("/api/conversations/c2/turns", turn("r1", "hi there"), headers: key)
        #expect(elsewhere.status == 422)

        let stats = try c.get("/api/stats").decode(Stats.self)
        #expect(stats.turns == 1)
        #expect(stats.turnPosts == 4)
        #expect(stats.idempotentReplays == 1)
        #expect(stats.conversations == 2)
        let detail = try c.get("/api/conversations/c1").decode(ConversationDetail.self)
        #expect(detail.turns.map(\.requestId) == ["r1"])
    }

    @Test func turnErrors() throws {
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.path)
        let c = engine.client()
        _ = try c.post("/api/conversations", conversation("c1"))

        let noKey = try c.post("/api/conversations/c1/turns", turn("r1", "x"))
        #expect(noKey.status == 400)
        #expect(noKey.errorCode == ErrorCode.idempotencyKeyMissing)
        let mismatch = try c.post("/api/conversations/c1/turns", turn("r1", "x"), headers: [("Idempotency-Key", "r2")])
        #expect(mismatch.status == 400)
        #expect(mismatch.errorCode == ErrorCode.idempotencyKeyMismatch)
        let unknown = try c.post("/api/conversations/nope/turns", turn("r1", "x"), headers: [("Idempotency-Key", "r1")])
        #expect(unknown.status == 404)
        #expect(unknown.errorCode == ErrorCode.conversationNotFound)
        let sha = String(repeating: "ab", count: 32)
        let missingBlob = try c.post("/api/conversations/c1/turns",
                                     turn("r1", "x", attachments: [Attachment(sha256: sha, name: "a.png", size: 3, type: "image/png")]),
                                     headers: [("Idempotency-Key", "r1")])
        #expect(missingBlob.status == 424)
        #expect(missingBlob.errorCode == ErrorCode.blobMissing)
        #expect(missingBlob.text.contains(sha))
        let badJSON = try c.request("POST", "/api/conversations/c1/turns", headers: [("Idempotency-Key", "r1")], body: Array("{\"requestId\":\"r1\"}".utf8))
        #expect(badJSON.status == 400)
        #expect(badJSON.errorCode == ErrorCode.invalidJSON)
        #expect(badJSON.text.contains("text"))
        // None of those created a turn: the key is still free.
        #expect(try c.get("/api/turns/r1").status == 404)
        #expect(try c.post("/api/conversations/c1/turns", turn("r1", "x"), headers: [("Idempotency-Key", "r1")]).status == 201)
        let stats = try c.get("/api/stats").decode(Stats.self)
        #expect(stats.turns == 1)
        #expect(stats.rejected >= 6)
    }

    @Test func anySurfaceMayPostToAnyConversation() throws {
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.path)
        let c = engine.client()
        _ = try c.post("/api/conversations", conversation("c1", surface: "phone"))
        #expect(try c.post("/api/conversations/c1/turns", turn("r1", "from cli", surface: "cli"), headers: [("Idempotency-Key", "r1")]).status == 201)
        #expect(try c.post("/api/conversations/c1/turns", turn("r2", "from web", surface: "web"), headers: [("Idempotency-Key", "r2")]).status == 201)
        let detail = try c.get("/api/conversations/c1").decode(ConversationDetail.self)
        #expect(detail.originSurface == "phone")
        #expect(detail.turns.map(\.surface) == ["cli", "web"])
    }

    @Test func turnStatusAndEchoReply() throws {
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.path)
        let c = engine.client()
        _ = try c.post("/api/conversations", conversation("c1"))
        #expect(try c.get("/api/turns/r9").errorCode == ErrorCode.turnNotFound)
        _ = try c.post("/api/conversations/c1/turns", turn("r1", "ping"), headers: [("Idempotency-Key", "r1")])
        let status = try eventually { () -> TurnStatus? in
            let s = try c.get("/api/turns/r1").decode(TurnStatus.self)
            return s.status == .received ? nil : s
        }
        #expect(status?.status == .answered)
        #expect(status?.conversationId == "c1")
        #expect(status?.reply?.text == "echo: ping")
        #expect(status?.reply?.responder == "echo")
        let detail = try c.get("/api/conversations/c1").decode(ConversationDetail.self)
        #expect(detail.turns.first?.reply?.text == "echo: ping")
        #expect(try c.get("/api/stats").decode(Stats.self).statusChecks >= 2)

        // SSE for an answered turn: one status event, then the stream ends.
        try c.sendRaw(HTTPClient.requestBytes("GET", "/api/turns/r1/events", token: engine.token))
        let stream = String(decoding: try c.readToEnd(), as: UTF8.self)
        #expect(stream.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(stream.contains("Content-Type: text/event-stream"))
        #expect(stream.contains("event: status\ndata: {"))
        #expect(stream.contains("\"text\":\"echo: ping\""))
    }

    @Test func blobsHeadPutAndAttach() throws {
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.path, extraArgs: ["--max-blob-bytes", "100000"])
        let c = engine.client()
        let bytes = (0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let sha = try sha256Hex(bytes)

        #expect(try c.request("HEAD", "/api/blobs/\(sha)").status == 404)
        let wrong = try c.request("PUT", "/api/blobs/\(String(repeating: "0", count: 64))", body: bytes)
        #expect(wrong.status == 400)
        #expect(wrong.errorCode == ErrorCode.blobHashMismatch)
        #expect(try c.request("PUT", "/api/blobs/NOTHEX", body: bytes).errorCode == ErrorCode.invalidField)
        #expect(try c.request("PUT", "/api/blobs/\(sha)", body: bytes).status == 201)
        #expect(try c.request("PUT", "/api/blobs/\(sha)", body: bytes).status == 200)
        #expect(try c.request("HEAD", "/api/blobs/\(sha)").status == 200)
        let onDisk = try PosixFileSystem().readFile(dir.path + "/blobs/\(sha)")
        #expect(onDisk == bytes)

        let tooBig = try c.request("PUT", "/api/blobs/\(sha)", body: [UInt8](repeating: 1, count: 100_001))
        #expect(tooBig.status == 413)
        #expect(tooBig.errorCode == ErrorCode.bodyTooLarge)

        let c2 = engine.client()
        _ = try c2.post("/api/conversations", conversation("c1"))
        let a = Attachment(sha256: sha, name: "data.bin", size: Int64(bytes.count), type: "application/octet-stream")
        let wrongSize = Attachment(sha256: sha, name: "data.bin", size: 1, type: "application/octet-stream")
        #expect(try c2.post("/api/conversations/c1/turns", turn("r0", "file", attachments: [wrongSize]), headers: [("Idempotency-Key", "r0")]).errorCode == ErrorCode.attachmentSizeMismatch)
        #expect(try c2.post("/api/conversations/c1/turns", turn("r1", "file", attachments: [a]), headers: [("Idempotency-Key", "r1")]).status == 201)
        let reply = try eventually { try c2.get("/api/turns/r1").decode(TurnStatus.self).reply }
        #expect(reply?.text == "echo: file [attachments: data.bin]")
        #expect(try c2.get("/api/stats").decode(Stats.self).blobs == 1)
    }

    @Test func oversizedHeadersAre431AndOversizedTurnIs413() throws {
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.path)
        let c = engine.client()
        let r = try c.request("GET", "/api/stats", headers: [("X-Padding", String(repeating: "p", count: 17 * 1024))])
        #expect(r.status == 431)
        #expect(r.errorCode == ErrorCode.headersTooLarge)
        #expect(r.headers["Connection"] == "close")
        #expect(c.isClosedByServer(within: 2))

        let c2 = engine.client()
        let huge = turn("r1", String(repeating: "t", count: (1 << 20) + 10))
        let big = try c2.post("/api/conversations/c1/turns", huge, headers: [("Idempotency-Key", "r1")])
        #expect(big.status == 413)
        #expect(big.errorCode == ErrorCode.bodyTooLarge)

        let c3 = engine.client()
        try c3.sendRaw("\u{16}\u{03}\u{01} this is not http\r\n\r\n")
        let garbage = try c3.readResponse()
        #expect(garbage.status == 400)
        #expect(c3.isClosedByServer(within: 2))

        let c4 = engine.client()
        let chunked = try c4.request("POST", "/api/conversations", headers: [("Transfer-Encoding", "gzip")])
        #expect(chunked.status == 501)
        #expect(try engine.client().get("/api/stats").decode(Stats.self).rejected >= 4)
    }

    @Test func chunkedBodiesAreAccepted() throws {
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.path)
        let c = engine.client()
        let body = String(decoding: WireJSON.encode(conversation("c1")), as: UTF8.self)
        let split = body.index(body.startIndex, offsetBy: 10)
        let part1 = String(body[..<split]), part2 = String(body[split...])
        try c.sendRaw("POST /api/conversations HTTP/1.1\r\nAuthorization: Bearer \(engine.token)\r\nTransfer-Encoding: chunked\r\n\r\n"
                      + String(part1.utf8.count, radix: 16) + "\r\n" + part1 + "\r\n"
                      + String(part2.utf8.count, radix: 16) + "\r\n" + part2 + "\r\n0\r\n\r\n")
        #expect(try c.readResponse().status == 201)
    }

    @Test func aMissingDataDirectoryIsCreatedWithItsParents() throws {
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.path + "/not/yet/there")
        #expect(try engine.client().get("/api/health").status == 200)
        #expect(FileManager.default.fileExists(atPath: dir.path + "/not/yet/there/journal.jsonl"))
    }

    @Test func expectContinueIsAnsweredBeforeTheBody() throws {
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.path)
        let c = engine.client()
        let body = Array("hello".utf8)
        let sha = try sha256Hex(body)
        try c.sendRaw("PUT /api/blobs/\(sha) HTTP/1.1\r\nAuthorization: Bearer \(engine.token)\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
        // No body sent yet: the engine must ask for it rather than wait (libcurl would wait 1 s).
        #expect(try c.readResponse(skipContinue: false).status == 100)
        try c.sendRaw(body)
        #expect(try c.readResponse().status == 201)
    }

    @Test func pipelinedRequestsAnswerInOrderOnOneConnection() throws {
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.path)
        let c = engine.client()
        var wire = HTTPClient.requestBytes("POST", "/api/conversations", token: engine.token, body: WireJSON.encode(conversation("c1")))
        wire += HTTPClient.requestBytes("POST", "/api/conversations/c1/turns", token: engine.token, headers: [("Idempotency-Key", "p1")], body: WireJSON.encode(turn("p1", "a")))
        wire += HTTPClient.requestBytes("POST", "/api/conversations/c1/turns", token: engine.token, headers: [("Idempotency-Key", "p1")], body: WireJSON.encode(turn("p1", "a")))
        wire += HTTPClient.requestBytes("GET", "/api/health", token: nil)
        try c.sendRaw(wire)
        let statuses = try (0..<4).map { _ in try c.readResponse().status }
        #expect(statuses == [201, 201, 200, 200])
    }

    @Test func aStalledHalfRequestNeitherBlocksOthersNorLivesForever() throws {
        let dir = TempDir()
        // The staller holds its connection for up to 3 s; the other client must not wait for it.
        let engine = try EngineProcess(dataDir: dir.path, extraArgs: ["--request-timeout-ms", "3000"])
        let staller = engine.client()
        try staller.sendRaw("POST /api/conversations HTTP/1.1\r\nAuthorization: Bearer \(engine.token)\r\nContent-Length: 500\r\n\r\n{\"id\":")
        let other = engine.client()
        let start = Date()
        #expect(try other.get("/api/health").status == 200)
        #expect(try other.post("/api/conversations", conversation("c1")).status == 201)
        let elapsed = Date().timeIntervalSince(start)
        #expect(elapsed < 1.5, "another client waited \(elapsed) s behind a staller held for 3 s")
        // The staller is told 408 and closed after the request timeout.
        #expect(staller.isClosedByServer(within: 8))
        let leftover = String(decoding: try staller.readToEnd(), as: UTF8.self)
        #expect(leftover.hasPrefix("HTTP/1.1 408"))
    }

    @Test func connectionsBeyondTheCapGet503() throws {
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.path, extraArgs: ["--max-connections", "2"])
        let a = engine.client(), b = engine.client()
        #expect(try a.get("/api/health").status == 200)
        #expect(try b.get("/api/health").status == 200)
        let c = engine.client()
        let refused = try c.readResponse()
        #expect(refused.status == 503)
        #expect(refused.errorCode == ErrorCode.tooManyConnections)
        // When one leaves, a new client gets in.
        Sockets.shutdown(a.sock)
        let d = try #require(eventually { () -> Response? in
            let client = engine.client()
            guard let r = try? client.get("/api/health") else { return nil }
            return r.status == 200 ? r : nil
        })
        #expect(d.status == 200)
    }

    @Test func sigtermStopsCleanly() throws {
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.path)
        let idle = engine.client()
        #expect(try idle.get("/api/health").status == 200)
        let started = Date()
        #expect(engine.terminate() == 0)
        #expect(Date().timeIntervalSince(started) < 3)
        #expect(engine.text.contains("SIGTERM received"))
        #expect(engine.text.contains("stopped"))
    }

    @Test func inProgressKeyGets409() throws {
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.path, environment: ["OUTBOX_ENGINE_TEST_COMMIT_DELAY_MS": "600"])
        let c = engine.client()
        _ = try c.post("/api/conversations", conversation("c1"))
        let slow = engine.client()
        try slow.sendRaw(HTTPClient.requestBytes("POST", "/api/conversations/c1/turns", token: engine.token,
                                                 headers: [("Idempotency-Key", "r1")], body: WireJSON.encode(turn("r1", "x"))))
        Thread.sleep(forTimeInterval: 0.2)
        let during = try c.post("/api/conversations/c1/turns", turn("r1", "x"), headers: [("Idempotency-Key", "r1")])
        #expect(during.status == 409)
        #expect(during.errorCode == ErrorCode.idempotencyInProgress)
        let original = try slow.readResponse()
        #expect(original.status == 201)
        let after = try c.post("/api/conversations/c1/turns", turn("r1", "x"), headers: [("Idempotency-Key", "r1")])
        #expect(after.status == 200)
        #expect(after.body == original.body)
    }

    @Test func killNineAfter201LosesNothingAndKeepsIdempotency() throws {
        let dir = TempDir()
        var engine = try EngineProcess(dataDir: dir.path)
        var c = engine.client()
        _ = try c.post("/api/conversations", conversation("c1"))
        var receipts: [String: [UInt8]] = [:]
        for i in 0..<20 {
            let r = try c.post("/api/conversations/c1/turns", turn("k\(i)", "turn \(i)"), headers: [("Idempotency-Key", "k\(i)")])
            #expect(r.status == 201)
            receipts["k\(i)"] = r.body
        }
        // Right after the last 201, no grace period.
        engine.kill9()

        engine = try EngineProcess(dataDir: dir.path)
        c = engine.client()
        for i in 0..<20 {
            let status = try c.get("/api/turns/k\(i)")
            #expect(status.status == 200, "turn k\(i) lost")
            let replay = try c.post("/api/conversations/c1/turns", turn("k\(i)", "turn \(i)"), headers: [("Idempotency-Key", "k\(i)")])
            #expect(replay.status == 200)
            #expect(replay.body == receipts["k\(i)"])
        }
        let stats = try c.get("/api/stats").decode(Stats.self)
        #expect(stats.turns == 20)
        #expect(stats.idempotentReplays == 20)
        // Replies owed at the crash are produced after the restart.
        let answered = eventually { () -> Int? in
            let n = (try? c.get("/api/stats").decode(Stats.self))?.answered ?? 0
            return n == 20 ? n : nil
        }
        #expect(answered == 20)
        let detail = try c.get("/api/conversations/c1").decode(ConversationDetail.self)
        #expect(detail.turns.map(\.requestId) == (0..<20).map { "k\($0)" })
    }

    @Test func keepAliveRequestsDoNotPayTheNagleDelay() throws {
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.path)
        let c = engine.client()
        _ = try c.post("/api/conversations", conversation("c1"))
        var start = Date()
        for _ in 0..<200 { _ = try c.get("/api/stats") }
        let getSeconds = Date().timeIntervalSince(start)
        start = Date()
        for i in 0..<200 {
            let r = try c.post("/api/conversations/c1/turns", turn("n\(i)", "x"), headers: [("Idempotency-Key", "n\(i)")])
            #expect(r.status == 201)
        }
        let postSeconds = Date().timeIntervalSince(start)
        print("engine: 200 keep-alive GET /api/stats in \(getSeconds) s; 200 durable turn POSTs in \(postSeconds) s (\(postSeconds / 200 * 1000) ms per 201)")
        // 40 ms per request (Nagle + delayed ACK) would be 8 s.
        #expect(getSeconds < 4)
        #expect(postSeconds < 6)
    }
}
