import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

@Suite("the engine is down, then up")
struct EngineDownTests {
    @Test func sendWhileDownExits0AndADrainDeliversLater() throws {
        let box = Sandbox()
        let down = "http://127.0.0.1:\(closedPort())"
        let r = try box.outbox(["send", "--engine", down, "while", "down"], env: ["OUTBOX_ENGINE_TOKEN": "t"])
        #expect(r.code == 0, "\(r)")
        #expect(r.stdout.isEmpty && r.stderr.contains("queued and safe") && r.stderr.contains("connection refused"), "\(r)")
        let turn = try #require((try box.outbox(["list", "--json"]).json()["turns"] as? [[String: Any]])?.first)
        #expect(turn["state"] as? String == "queued" && turn["attempt"] as? Int == 1 && turn["lastError"] is String)
        let id = try #require(turn["id"] as? String)

        let status = try box.outbox(["status", "--engine", down, "--json"]).json()
        #expect((status["engine"] as? [String: Any])?["reachable"] as? Bool == false)
        #expect(try box.outbox(["retry", "--all"]).code == 0)   // due now, so the drain tries it
        let drainDown = try box.outbox(["drain", "--engine", down], env: ["OUTBOX_ENGINE_TOKEN": "t"])
        #expect(drainDown.code == 1 && drainDown.stderr.contains("unreachable") && drainDown.oneErrorLine, "\(drainDown)")

        let engine = try EngineProcess(dataDir: box.path + "/engine")
        defer { engine.stop() }
        let env = ["OUTBOX_ENGINE_TOKEN": engine.token]
        let up = try box.outbox(["status", "--engine", engine.url], env: env)
        #expect(up.stdout.contains("reachable") && up.stdout.contains("token accepted"), "\(up)")
        #expect(try box.outbox(["retry", "--all"]).code == 0)   // skip the backoff
        let d = try box.outbox(["drain", "--engine", engine.url], env: env)
        #expect(d.code == 0 && d.stdout.contains("delivered 1"), "\(d)")
        let after = try #require(try box.outbox(["show", id, "--json"]).json()["turn"] as? [String: Any])
        #expect(after["state"] as? String == "synced")
        #expect((after["reply"] as? [String: Any])?["text"] as? String == "echo: while down")

        // The engine holds it once.
        let conv = try #require(after["conversation"] as? String)
        var req = URLRequest(url: URL(string: engine.url + "/api/conversations/" + conv)!)
        req.setValue("Bearer \(engine.token)", forHTTPHeaderField: "Authorization")
        let body = try syncGet(req)
        let detail = try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
        #expect((detail["turns"] as? [Any])?.count == 1, "\(String(decoding: body, as: UTF8.self))")
        // The token went nowhere near the log.
        #expect(!String(decoding: box.read(box.log), as: UTF8.self).contains(engine.token))
    }

    @Test func drainWatchDeliversTurnsAsTheyAreEnqueued() throws {
        let box = Sandbox()
        let engine = try EngineProcess(dataDir: box.path + "/engine")
        defer { engine.stop() }
        var env = box.environment
        env["OUTBOX_ENGINE_TOKEN"] = engine.token
        let watch = try Background(try binary("outbox"), ["drain", "--watch", "--engine", engine.url], env: env)
        #expect(eventually { watch.output.text.contains("Ctrl-C stops") }, "\(watch.output.text)")
        let sent = try box.outbox(["send", "--no-wait", "watched"])
        let id = sent.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let replied = try eventually {
            let t = try box.outbox(["show", id, "--json"]).json()["turn"] as? [String: Any]
            return (t?["reply"] as? [String: Any])?["text"] as? String == "echo: watched"
        }
        #expect(replied, "\(watch.output.text)")
        // A send while the watch runs lets it deliver and still prints the reply.
        let r = try box.outbox(["send", "-c", "second"], env: ["OUTBOX_ENGINE_TOKEN": engine.token, "OUTBOX_ENGINE_URL": engine.url])
        #expect(r.code == 0 && r.stdout == "echo: second\n", "\(r)")
        #expect(watch.terminate() == 0, "\(watch.output.text)")
        #expect(watch.output.text.contains("delivered \(id)"), "\(watch.output.text)")
    }

    func syncGet(_ req: URLRequest) throws -> Data {
        final class Box: @unchecked Sendable { var data: Data? }
        let box = Box()
        let done = DispatchSemaphore(value: 0)
        URLSession.shared.dataTask(with: req) { d, _, _ in box.data = d; done.signal() }.resume()
        _ = done.wait(timeout: .now() + 10)
        return try #require(box.data)
    }
}
