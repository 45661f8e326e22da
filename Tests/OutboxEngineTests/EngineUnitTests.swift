import Foundation
import Testing
import EngineProtocol
@testable import OutboxEngine

@Suite("engine pieces in-process")
struct EngineUnitTests {
    @Test func commandLineParsesAndRejects() throws {
        let c = try EngineCommandLine.parse(["--listen", "127.0.0.1:0", "--data", "/tmp/x", "--responder", "openai",
                                             "--openai-model", "m"], environment: ["OPENAI_BASE_URL": "http://h/v1", "OPENAI_API_KEY": "k"])
        #expect(c.port == 0 && c.host == "127.0.0.1")
        #expect(c.openAIBaseURL == "http://h/v1" && c.openAIAPIKey == "k")
        #expect(throws: EngineCommandLine.UsageError.self) { try EngineCommandLine.parse(["--listen", "nope", "--data", "d"]) }
        #expect(throws: EngineCommandLine.UsageError.self) { try EngineCommandLine.parse(["--listen", "127.0.0.1:1"]) }
        #expect(throws: EngineCommandLine.UsageError.self) { try EngineCommandLine.parse(["--data", "d", "--responder", "openai"]) }
        #expect(throws: EngineCommandLine.UsageError.self) { try EngineCommandLine.parse(["--data", "d", "--bogus"]) }
        #expect(try EngineCommandLine.parse(["--help"]).help)
    }

    @Test func constantTimeCompare() {
        #expect(constantTimeEquals(Array("abc".utf8), Array("abc".utf8)))
        #expect(!constantTimeEquals(Array("abc".utf8), Array("abd".utf8)))
        #expect(!constantTimeEquals(Array("abc".utf8), Array("abcd".utf8)))
        #expect(!constantTimeEquals([], Array("a".utf8)))
    }

    @Test func echoIsDeterministic() throws {
        let h = [ChatMessage(role: "user", content: "hi", attachments: [])]
        #expect(try EchoResponder().reply(to: h) == "echo: hi")
        #expect(try EchoResponder().reply(to: h) == EchoResponder().reply(to: h))
    }

    @Test func embeddedEngineStartsOnPortZeroServesAndStops() throws {
        let dir = TempDir()
        let server = try EngineServer(EngineConfiguration(port: 0, dataDirectory: dir.path, token: "t0k"))
        let port = try server.start()
        #expect(port != 0)
        let c = HTTPClient(port: port, token: "t0k")
        #expect(try c.post("/api/conversations", conversation("c1")).status == 201)
        #expect(try c.post("/api/conversations/c1/turns", turn("r1", "in-process"), headers: [("Idempotency-Key", "r1")]).status == 201)
        let reply = try eventually { try c.get("/api/turns/r1").decode(TurnStatus.self).reply }
        #expect(reply?.text == "echo: in-process")
        server.stop()
        #expect(c.isClosedByServer(within: 2))
        #expect(server.stats.turns == 1)
        // The same directory opens again with the turn in it.
        let again = try EngineServer(EngineConfiguration(port: 0, dataDirectory: dir.path, token: "t0k"))
        #expect(again.stats.turns == 1)
        #expect(again.stats.answered == 1)
    }
}
