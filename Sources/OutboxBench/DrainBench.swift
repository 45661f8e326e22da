import Foundation
import EngineProtocol
import OutboxEngine
import OutboxFormat
import OutboxStore
import OutboxSync

/// Drain throughput to the reference engine on loopback, next to the engine's raw request rate
/// for the same payloads sent straight from a client with no outbox bookkeeping.
struct DrainBench {
    let directory: String
    let turns: Int

    struct Result {
        var turns: Int
        var seconds: Double
        var requests: Int
        var rawSeconds: Double
        var turnsPerSecond: Double { Double(turns) / seconds }
        var rawRequestsPerSecond: Double { Double(turns) / rawSeconds }
    }

    func run() throws -> Result {
        let token = "bench-" + UUID().uuidString
        let engine = try EngineServer(EngineConfiguration(port: 0, dataDirectory: directory + "/engine", token: token))
        let port = try engine.start()
        defer { engine.stop() }
        let base = "http://127.0.0.1:\(port)"

        // Queue `turns` turns, then time one drain that delivers all of them.
        let outbox = try Outbox.open(directory: directory + "/drain")
        try outbox.createConversation(id: "bench", title: "bench", originSurface: "cli")
        for i in 0..<turns {
            try outbox.enqueue(TurnDraft(requestID: "d\(i)", conversationID: "bench", text: EnqueueBench.text, surface: "cli"))
        }
        var options = Drain.Options()
        options.replyWaitMillis = 0
        let drain = Drain(outbox: outbox, client: EngineClient(baseURL: base, token: token), options: options)
        var report = DrainReport()
        let drained = try seconds { report = try drain.runOnce() }
        guard report.delivered.count == turns else {
            throw BenchError("drain delivered \(report.delivered.count) of \(turns) turns (\(report.lastEngineError ?? "no error"))")
        }

        // The same payloads, posted directly: the engine's own ceiling for this client.
        let client = EngineClient(baseURL: base, token: token)
        _ = try client.createConversation(id: "raw", title: "raw", originSurface: "cli", createdAt: Timestamp.format(millis: 0))
        let raw = try seconds {
            for i in 0..<turns {
                _ = try client.postTurn(conversationID: "raw", requestID: "r\(i)", text: EnqueueBench.text, attachments: [],
                                        createdAt: Timestamp.format(millis: 0), surface: "cli")
            }
        }
        return Result(turns: turns, seconds: drained, requests: report.requests, rawSeconds: raw)
    }
}
