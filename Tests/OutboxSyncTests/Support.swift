import Foundation
import Testing
import EngineProtocol
import OutboxIO
import OutboxFormat
import OutboxStore
@testable import OutboxSync

/// A fresh directory per test, removed when the test is done with it.
final class TempDir: @unchecked Sendable {
    let path: String
    init(_ name: String = #function) {
        let clean = name.filter { $0.isLetter || $0.isNumber }.prefix(40)
        path = FileManager.default.temporaryDirectory.path + "/outbox-sync-\(clean)-\(UUID().uuidString.prefix(8))"
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
    var outbox: String { path + "/outbox" }
    var engineData: String { path + "/engine" }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// Executables built with the package sit next to the test runner.
func builtProduct(_ name: String) throws -> String {
    let exe = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    var dir = exe.deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = dir.appendingPathComponent(name).path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        dir = dir.deletingLastPathComponent()
    }
    throw TestFailure("\(name) not found near \(exe.path); run `swift build` first")
}

/// A real `outbox-engine` process on a free loopback port. `restart()` keeps the data directory.
final class EngineProcess: @unchecked Sendable {
    private(set) var process = Process()
    let dataDir: String
    let token = "test-token-\(UUID().uuidString.prefix(8))"
    private(set) var port: UInt16 = 0
    private var lines = LineCollector()

    init(dataDir: String, port: UInt16 = 0) throws {
        self.dataDir = dataDir
        try start(port: port)
    }

    private func start(port: UInt16) throws {
        process = Process()
        lines = LineCollector()
        process.executableURL = URL(fileURLWithPath: try builtProduct("outbox-engine"))
        process.arguments = ["--listen", "127.0.0.1:\(port)", "--data", dataDir]
        var env = ProcessInfo.processInfo.environment
        env["OUTBOX_ENGINE_TOKEN"] = token
        process.environment = env
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        lines.collect(pipe.fileHandleForReading)
        try process.run()
        guard let line = lines.wait(for: "listening on", timeout: 10),
              let p = line.split(separator: ":").last.flatMap({ UInt16($0.trimmingCharacters(in: .whitespaces)) }) else {
            process.terminate()
            throw TestFailure("engine did not report its address:\n\(lines.text)")
        }
        self.port = p
    }

    var baseURL: String { "http://127.0.0.1:\(port)" }

    func kill9() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// kill -9, then start again on the same port and data.
    func restart() throws {
        kill9()
        let p = port
        for _ in 0..<50 {
            do { try start(port: p); return } catch { usleep(100_000) }
        }
        try start(port: p)
    }

    func client() -> EngineClient { EngineClient(baseURL: baseURL, token: token, timeout: 10) }
    func stats() throws -> Stats { try client().stats() }

    deinit { if process.isRunning { kill9() } }
}

final class LineCollector: @unchecked Sendable {
    private let cond = NSCondition()
    private var buffer = ""

    func collect(_ handle: FileHandle) {
        Thread { [self] in
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                cond.lock(); buffer += String(decoding: data, as: UTF8.self); cond.broadcast(); cond.unlock()
            }
        }.start()
    }

    var text: String { cond.lock(); defer { cond.unlock() }; return buffer }

    func wait(for needle: String, timeout: Double) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        cond.lock(); defer { cond.unlock() }
        while true {
            if let l = buffer.split(separator: "\n").first(where: { $0.contains(needle) }) { return String(l) }
            if !cond.wait(until: deadline) { return nil }
        }
    }
}

/// A clock tests move by hand (milliseconds since 1970).
final class ManualClock: @unchecked Sendable {
    private let lock = NSLock()
    private var ms: Int64
    init(_ start: Int64 = 1_800_000_000_000) { ms = start }
    var now: Int64 { lock.withLock { ms } }
    func advance(_ d: Int64) { lock.withLock { ms += d } }
    func set(_ v: Int64) { lock.withLock { ms = v } }
    var function: @Sendable () -> Int64 { { [self] in now } }
}

/// A seeded generator so a failing run can be replayed (the seed is printed).
struct SeededRandom: RandomNumberGenerator, Sendable {
    var state: UInt64
    init(seed: UInt64) { state = seed == 0 ? 0x9E3779B97F4A7C15 : seed }
    mutating func next() -> UInt64 {
        state ^= state << 13; state ^= state >> 7; state ^= state << 17
        return state
    }
}

extension Outbox {
    @discardableResult
    func send(_ id: String, _ text: String = "hello", conversation: String = "c1",
              attachments: [AttachmentSource] = []) throws -> EnqueueResult {
        if self.conversation(conversation) == nil {
            try createConversation(id: conversation, title: "title of \(conversation)", originSurface: "cli")
        }
        return try enqueue(TurnDraft(requestID: id, conversationID: conversation, text: text, attachments: attachments, surface: "cli"))
    }
}

/// Events a drain reported, collected across threads.
final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [DrainEvent] = []
    func add(_ e: DrainEvent) { lock.withLock { items.append(e) } }
    var all: [DrainEvent] { lock.withLock { items } }
    var callback: @Sendable (DrainEvent) -> Void { { [self] e in add(e) } }
}

/// Checks the engine holds exactly `expected` (conversation → request ids in order).
func expectEngineHolds(_ engine: EngineProcess, _ expected: [String: [String]], sourceLocation: SourceLocation = #_sourceLocation) throws {
    let client = engine.client()
    for (conversation, ids) in expected {
        let held = try client.conversationTurns(conversation).map(\.requestID)
        #expect(held == ids, "conversation \(conversation) on the engine", sourceLocation: sourceLocation)
    }
    let total = expected.values.reduce(0) { $0 + $1.count }
    #expect(try engine.stats().turns == total, "engine stats turns", sourceLocation: sourceLocation)
}
