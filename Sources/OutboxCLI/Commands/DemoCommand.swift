import Foundation
import OutboxEngine
import OutboxFormat
import OutboxIO
import OutboxStore
import OutboxSync

/// A scripted tour on a temporary outbox and a reference engine in this process. The commands it
/// shows are the real `outbox` binary run as child processes, so what you see is what you get.
enum DemoCommand {
    static let command = Command(spec: CommandSpec(name: "demo"), summary: "a scripted tour", help: Usage.demo, run: run)

    static func run(_ ctx: Context) throws -> ExitCode {
        let term = ctx.term
        let started = Date()
        let root = FileManager.default.temporaryDirectory.path + "/outbox-demo-\(UUID().uuidString.prefix(8).lowercased())"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let dir = root + "/outbox"
        let engineDir = root + "/engine"
        let port = try freePort()
        let url = "http://127.0.0.1:\(port)"
        let token = newID()
        var env = ctx.settings.environment
        env["OUTBOX_DIR"] = dir
        env["OUTBOX_ENGINE_URL"] = url
        env["OUTBOX_ENGINE_TOKEN"] = token
        env["XDG_DATA_HOME"] = root + "/xdg"
        env.removeValue(forKey: "OUTBOX_SURFACE")
        let demo = Demo(term: term, env: env, log: dir + "/turns.jsonl")

        demo.heading("outbox demo: a temporary outbox in \(dir) and a reference engine that will listen on \(url)")

        demo.heading("1. The engine is down. Send a turn anyway")
        demo.run(["send", "hello while offline"])
        demo.say("It is on disk before anything else happens. Its lines in turns.jsonl:")
        demo.showLog(last: 4)

        demo.heading("2. The engine comes up; the queue drains")
        var config = EngineConfiguration(host: "127.0.0.1", port: port, dataDirectory: engineDir, token: token)
        config.commitDelayForTesting = .milliseconds(250)   // slow enough to catch a drain mid-flight in step 3
        let engine = try EngineServer(config)
        _ = try engine.start()
        defer { engine.stop() }
        demo.say("engine listening on \(url) (each turn takes it 250 ms, so step 3 can catch a drain mid-flight)")
        demo.run(["retry", "--all"])   // skip the backoff the failed attempt set
        demo.run(["drain"])
        demo.run(["log"])

        demo.heading("3. A drain killed with SIGKILL mid-flight leaves no duplicate")
        for i in 1...4 { demo.run(["send", "--no-wait", "-c", "batch turn \(i)"], quiet: true) }
        demo.say("queued 4 turns; starting `outbox drain` and killing it while it sends")
        let child = try demo.spawn(["drain"])
        let sawAttempt = demo.waitFor(seconds: 10) { demo.logText().contains("\"state\":\"syncing\"") && demo.logText().components(separatedBy: "batch turn").count > 1 && demo.syncingCount() >= 2 }
        usleep(400_000)   // the first turn is on the engine; the next is inside its commit
        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()
        demo.say("killed the drain (pid \(child.processIdentifier))" + (sawAttempt ? " after it recorded its attempts; what the engine has is unknown to the outbox" : ""))
        demo.run(["list", "--state", "syncing"])
        usleep(400_000)   // let the engine finish the commit the dead drain started
        demo.say("The next drain puts them back in the queue and asks the engine before resending:")
        demo.run(["drain"])
        let client = EngineClient(baseURL: url, token: token)
        let conversations = (try? Outbox.open(directory: dir, mode: .readOnly).conversations) ?? []
        var held = 0, unique = Set<String>()
        for c in conversations {
            if let turns = try? client.conversationTurns(c.id) { held += turns.count; unique.formUnion(turns.map(\.requestID)) }
        }
        let stats = try? client.stats()
        demo.say("the engine holds \(Render.count(held, "turn")) for \(Render.count(unique.count, "request id")): \(held == unique.count ? "no duplicate" : "DUPLICATES") " +
                 "(\(stats?.turnPosts ?? 0) turn POSTs, \(stats?.idempotentReplays ?? 0) idempotent replays, \(stats?.statusChecks ?? 0) status checks)")

        demo.heading("4. Damage in the middle of the log seals it")
        demo.run(["send", "--no-wait", "-c", "not sent before the damage"], quiet: true)
        var bytes = demo.logBytes()
        if let nl = bytes.firstIndex(of: 0x0A), let q = bytes[(nl + 1)...].firstIndex(of: UInt8(ascii: "{")) {
            bytes[q + 2] ^= 0x20   // one bit of line 2
            _ = FileManager.default.createFile(atPath: dir + "/turns.jsonl", contents: Data(bytes))
            demo.say("flipped one bit in line 2 of turns.jsonl")
        }
        demo.run(["status"])
        demo.run(["send", "-c", "refused while sealed"])
        demo.run(["reset", "--yes"])
        let aside = (try? FileManager.default.contentsOfDirectory(atPath: dir))?.first { $0.hasPrefix("turns.damaged-") }
        if let aside {
            demo.run(["salvage", "\(dir)/\(aside)/turns.jsonl"])
            demo.run(["drain"])
        }
        demo.run(["verify"])

        let seconds = String(format: "%.1f", Date().timeIntervalSince(started))
        demo.heading("Done in \(seconds) s; the temporary outbox and engine are removed. Your own outbox was not touched.")
        return demo.failures == 0 ? .ok : .failure
    }

    /// A loopback port that was free a moment ago.
    static func freePort() throws -> UInt16 {
        let (sock, port) = try Sockets.listen(host: "127.0.0.1", port: 0)
        Sockets.close(sock)
        return port
    }
}

/// The demo's narration and child processes.
final class Demo: @unchecked Sendable {
    let term: Terminal
    let env: [String: String]
    let logPath: String
    let exe: String
    var failures = 0

    init(term: Terminal, env: [String: String], log: String) {
        self.term = term; self.env = env; self.logPath = log
        exe = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
    }

    func heading(_ s: String) { term.out(""); term.out(term.styled("== " + s, .bold)) }
    func say(_ s: String) { term.out(term.styled("   " + s, .dim)) }

    func spawn(_ args: [String], quiet: Bool = false) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = args
        p.environment = env
        p.standardInput = FileHandle.nullDevice
        if quiet { p.standardOutput = FileHandle.nullDevice; p.standardError = FileHandle.nullDevice }
        try p.run()
        return p
    }

    /// Shows and runs `outbox ARGS`; its output goes straight to ours.
    func run(_ args: [String], quiet: Bool = false) {
        if !quiet { term.out(term.styled("$ outbox " + args.map(quote).joined(separator: " "), .cyan)) }
        do {
            let p = try spawn(args, quiet: quiet)
            p.waitUntilExit()
            if !quiet { term.out(term.styled("  (exit \(p.terminationStatus))", .dim)) }
            let expected: Int32 = args.contains("refused while sealed") ? 3 : 0
            if p.terminationStatus != expected { failures += 1 }
        } catch {
            term.err("outbox demo: cannot run outbox \(args.joined(separator: " ")): \(error)")
            failures += 1
        }
    }

    func quote(_ a: String) -> String { a.contains(" ") ? "\"\(a)\"" : a }

    func logBytes() -> [UInt8] { (try? Array(Data(contentsOf: URL(fileURLWithPath: logPath)))) ?? [] }
    func logText() -> String { String(decoding: logBytes(), as: UTF8.self) }
    func syncingCount() -> Int { logText().components(separatedBy: "\"state\":\"syncing\"").count - 1 }

    func showLog(last n: Int) {
        let width = max(40, term.columns - 4)
        for line in logText().split(separator: "\n").suffix(n) { term.out("   " + Render.clip(String(line), width)) }
    }

    func waitFor(seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            usleep(20_000)
        }
        return false
    }
}
