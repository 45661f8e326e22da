import Foundation
import EngineProtocol
import OutboxStore

/// The kill -9 torture (docs/RELIABILITY.md): real `outbox` and `outbox-engine` processes —
/// senders, a watching drain, gc — SIGKILLed at random moments and restarted; then everything is
/// drained and every acknowledged turn is looked up on the engine.
public struct TortureOptions: Sendable {
    /// Stop after this many kills…
    public var kills = 200
    /// …or after this many seconds, whichever comes first (nil: kills only).
    public var seconds: Double?
    /// Conversations written to at once, each by one sequential sender.
    public var lanes = 4
    /// Where the temporary outbox and engine data go.
    public var directory: String?
    public var outboxExecutable: String
    public var engineExecutable: String
    public init(outboxExecutable: String, engineExecutable: String) {
        self.outboxExecutable = outboxExecutable; self.engineExecutable = engineExecutable
    }
}

public struct TortureResult: Sendable {
    public var kills = 0
    public var killsByKind: [String: Int] = [:]
    public var acknowledged = 0
    public var lost: [String] = []
    public var duplicated: [String] = []
    public var outOfOrder: [String] = []
    public var falseSeals: [String] = []
    public var leftQueued = 0
    public var orphans = 0
    public var seconds = 0.0

    public var passed: Bool {
        lost.isEmpty && duplicated.isEmpty && outOfOrder.isEmpty && falseSeals.isEmpty && leftQueued == 0 && orphans == 0
    }

    public var line: String {
        "torture: \(kills) kills, \(acknowledged) acknowledged, \(lost.count) lost, \(duplicated.count) duplicated, "
            + "\(outOfOrder.count) out of order, \(falseSeals.count) false seals, \(leftQueued) left queued, \(orphans) orphan blobs"
    }
}

public final class Torture: @unchecked Sendable {
    let options: TortureOptions
    let log: @Sendable (String) -> Void
    private let lock = NSLock()
    private var live: [Child] = []
    private var stopping = false
    private var result = TortureResult()
    private var engine: Child?
    private var port = 0
    private let token = "torture-" + UUID().uuidString
    private var root = ""
    private var environment: [String: String] = [:]

    public init(_ options: TortureOptions, log: @escaping @Sendable (String) -> Void) {
        self.options = options; self.log = log
    }

    var outboxDirectory: String { root + "/outbox" }

    public func run() throws -> TortureResult {
        let started = Date()
        root = (options.directory ?? NSTemporaryDirectory()) + "/outbox-torture-\(getpid())-\(UUID().uuidString.prefix(6))"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try startEngine()
        environment = ProcessInfo.processInfo.environment
        environment["OUTBOX_DIR"] = outboxDirectory
        environment["OUTBOX_ENGINE_URL"] = "http://127.0.0.1:\(port)"
        environment["OUTBOX_ENGINE_TOKEN"] = token
        environment["NO_COLOR"] = "1"
        log("torture: outbox \(outboxDirectory), engine 127.0.0.1:\(port)")

        let lanes = (0..<options.lanes).map { Lane(index: $0, torture: self) }
        let threads = lanes.map { lane in Thread { lane.run() } } + [Thread { self.superviseDrain() }, Thread { self.runGC() }]
        threads.forEach { $0.start() }
        killUntilDone(started: started)
        lock.withLock { stopping = true }
        // The watching drain never exits by itself; senders and gc finish their current run.
        while lanes.contains(where: { !$0.finished }) || lock.withLock({ !live.isEmpty }) {
            lock.withLock { live.filter { $0.label == "drain" } }.forEach { $0.kill9() }
            usleep(10_000)
        }

        // Settle: engine up, one drain to the end, gc, then check everything.
        try ensureEngine()
        try settle()
        var r = lock.withLock { result }
        try check(lanes, into: &r)
        r.seconds = Date().timeIntervalSince(started)
        engine?.kill9()
        _ = engine?.finish()
        if r.passed { try? FileManager.default.removeItem(atPath: root) } else { log("torture: kept \(root) for inspection") }
        return r
    }

    // MARK: - processes

    private func startEngine() throws {
        let listen = port == 0 ? "127.0.0.1:0" : "127.0.0.1:\(port)"
        let e = Child("engine", options.engineExecutable,
                      ["--listen", listen, "--data", root + "/engine", "--responder", "echo"],
                      environment: ["OUTBOX_ENGINE_TOKEN": token, "PATH": "/usr/bin:/bin"])
        try e.start()
        engine = e
        // Wait until it is listening (and learn the port the first time).
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if let p = e.listeningPort() { port = p; return }
            if !e.isRunning { break }
            usleep(5_000)
        }
        throw TortureError("outbox-engine did not start listening")
    }

    private func ensureEngine() throws {
        if let e = engine, e.isRunning { return }
        if let e = engine { _ = e.finish() }
        try startEngine()
    }

    /// Starts a child and registers it as a kill target; returns nil once stopping.
    func spawn(_ label: String, _ args: [String]) -> Child? {
        let c = Child(label, options.outboxExecutable, args, environment: environment)
        return lock.withLock { () -> Child? in
            if stopping { return nil }
            do { try c.start() } catch { return nil }
            live.append(c)
            return c
        }
    }

    func reap(_ c: Child) -> (status: Int32, killed: Bool, lines: [String]) {
        let r = c.finish()
        lock.withLock { live.removeAll { $0 === c } }
        return r
    }

    var isStopping: Bool { lock.withLock { stopping } }

    private func superviseDrain() {
        while !isStopping {
            guard let d = spawn("drain", ["drain", "--watch", "--retention", "0"]) else { break }
            _ = reap(d)
            usleep(20_000)
        }
    }

    private func runGC() {
        while !isStopping {
            usleep(UInt32.random(in: 100_000...400_000))
            guard let g = spawn("gc", ["gc"]) else { break }
            _ = reap(g)
        }
    }

    private func killUntilDone(started: Date) {
        while true {
            let k = lock.withLock { result.kills }
            if k >= options.kills { break }
            if let s = options.seconds, Date().timeIntervalSince(started) >= s { break }
            usleep(UInt32.random(in: 5_000...40_000))
            // Restart a dead engine before choosing the next victim.
            if let e = engine, !e.isRunning { _ = e.finish(); try? startEngine() }
            let victims = lock.withLock { live.filter(\.isRunning) }
            let killEngine = Double.random(in: 0..<1) < 0.08
            if killEngine, let e = engine, e.isRunning {
                e.kill9()
                count("engine")
                continue
            }
            guard let v = victims.randomElement() else { continue }
            v.kill9()
            count(v.label)
        }
    }

    private func count(_ kind: String) {
        lock.withLock {
            result.kills += 1
            result.killsByKind[kind, default: 0] += 1
        }
    }

    // MARK: - the end

    private func settle() throws {
        let deadline = Date().addingTimeInterval(120)
        while Date() < deadline {
            // Kills of the drain and the engine push turns far out on their backoff (and every
            // interrupted batch spends an attempt): a person's retry brings them all back now.
            _ = try runToEnd(options.outboxExecutable, ["retry", "--all"], environment: environment)
            _ = try runToEnd(options.outboxExecutable, ["drain", "--retention", "0"], environment: environment)
            let o = try Outbox.open(directory: outboxDirectory, mode: .readOnly)
            let pending = o.turns.filter { $0.state == .queued || $0.state == .syncing || $0.state == .failedNeedsAttention }
            if pending.isEmpty { break }
            try ensureEngine()
        }
        _ = try runToEnd(options.outboxExecutable, ["gc"], environment: environment)
    }

    private func check(_ lanes: [Lane], into r: inout TortureResult) throws {
        let outbox = try Outbox.open(directory: outboxDirectory, mode: .readOnly)
        if let seal = outbox.sealed { r.falseSeals.append("\(seal)") }
        r.leftQueued = outbox.turns.filter { $0.state == .queued || $0.state == .syncing || $0.state == .failedNeedsAttention }.count
        r.orphans = try outbox.verify().orphanBlobs.count
        let http = EngineHTTP(base: "http://127.0.0.1:\(port)/api", token: token)
        var textsSeen: [String: Int] = [:]
        for lane in lanes {
            r.acknowledged += lane.acknowledged.count
            guard let cid = lane.conversation else { continue }
            guard let detail = try http.get("/conversations/\(cid)", as: ConversationDetail.self) else {
                r.lost += lane.acknowledged.map(\.id)
                continue
            }
            for t in detail.turns { textsSeen[t.text, default: 0] += 1 }
            let position = Dictionary(detail.turns.enumerated().map { ($1.requestId, $0) }, uniquingKeysWith: { a, _ in a })
            var last = -1
            for ack in lane.acknowledged {
                guard let p = position[ack.id] else { r.lost.append(ack.id); continue }
                if p < last { r.outOfOrder.append(ack.id) }
                last = max(last, p)
            }
        }
        r.duplicated = textsSeen.filter { $0.value > 1 }.map(\.key).sorted()
    }
}

extension Child {
    /// The port from the engine's "listening on 127.0.0.1:PORT" line, once printed.
    func listeningPort() -> Int? {
        guard let line = peekLines().first(where: { $0.contains("listening on") }),
              let p = line.split(separator: ":").last.flatMap({ Int($0.trimmingCharacters(in: .whitespaces)) }) else { return nil }
        return p
    }
}
