import Foundation
import Testing

/// A fresh directory per test (HOME and XDG_DATA_HOME point inside it), removed afterwards.
final class Sandbox: @unchecked Sendable {
    let path: String
    init() {
        path = FileManager.default.temporaryDirectory.path + "/outbox-cli-\(UUID().uuidString.prefix(8).lowercased())"
        try? FileManager.default.createDirectory(atPath: path + "/xdg", withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }

    var outboxDir: String { path + "/xdg/outbox" }
    var log: String { outboxDir + "/turns.jsonl" }

    /// The environment every `outbox` run of this test gets: nothing of the real user's.
    var environment: [String: String] {
        var env: [String: String] = [:]
        for k in ["PATH", "LANG", "LC_ALL", "TMPDIR"] { if let v = ProcessInfo.processInfo.environment[k] { env[k] = v } }
        env["HOME"] = path
        env["XDG_DATA_HOME"] = path + "/xdg"
        return env
    }

    @discardableResult
    func outbox(_ args: [String], stdin: String? = nil, stdinBytes: [UInt8]? = nil, env extra: [String: String] = [:],
                timeout: Double = 60) throws -> Run {
        var env = environment
        for (k, v) in extra { env[k] = v }
        return try runProcess(try binary("outbox"), args, stdin: stdinBytes ?? stdin.map { Array($0.utf8) }, env: env, timeout: timeout)
    }

    func write(_ name: String, _ text: String) -> String {
        let p = path + "/" + name
        _ = FileManager.default.createFile(atPath: p, contents: Data(text.utf8))
        return p
    }

    func read(_ p: String) -> [UInt8] { (try? Array(Data(contentsOf: URL(fileURLWithPath: p)))) ?? [] }
}

struct Run: CustomStringConvertible {
    var code: Int32
    var stdout: String
    var stderr: String
    var description: String { "exit \(code)\n--- stdout\n\(stdout)\n--- stderr\n\(stderr)" }

    /// stdout parsed as one JSON object (an empty one, and a recorded issue, when it is not).
    func json(sourceLocation: SourceLocation = #_sourceLocation) -> [String: Any] {
        guard let o = (try? JSONSerialization.jsonObject(with: Data(stdout.utf8))) as? [String: Any] else {
            Issue.record("stdout is not one JSON object: \(self)", sourceLocation: sourceLocation)
            return [:]
        }
        return o
    }

    /// stderr is exactly one line.
    var oneErrorLine: Bool { stderr.hasSuffix("\n") && stderr.dropLast().split(separator: "\n", omittingEmptySubsequences: false).count == 1 }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// A product built next to the test runner (SwiftPM puts every product in one directory).
func binary(_ name: String) throws -> String {
    var dir = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
    for _ in 0..<3 {
        let candidate = dir.appendingPathComponent(name).path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        dir = dir.deletingLastPathComponent()
    }
    throw TestFailure("\(name) is not built next to the test runner; run `swift build` first")
}

final class Collector: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()
    func append(_ d: Data) { lock.withLock { data.append(d) } }
    var text: String { lock.withLock { String(decoding: data, as: UTF8.self) } }
}

func pump(_ pipe: Pipe, into c: Collector, _ group: DispatchGroup? = nil) {
    group?.enter()
    DispatchQueue.global().async {
        while true {
            let d = pipe.fileHandleForReading.availableData
            if d.isEmpty { break }
            c.append(d)
        }
        group?.leave()
    }
}

/// Runs a process to completion (killed after `timeout` seconds) and collects its output.
func runProcess(_ path: String, _ args: [String], stdin: [UInt8]?, env: [String: String], timeout: Double) throws -> Run {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: path)
    p.arguments = args
    p.environment = env
    let out = Pipe(), err = Pipe(), inPipe = Pipe()
    p.standardOutput = out
    p.standardError = err
    p.standardInput = inPipe
    let o = Collector(), e = Collector()
    let group = DispatchGroup()
    pump(out, into: o, group)
    pump(err, into: e, group)
    try p.run()
    if let stdin { inPipe.fileHandleForWriting.write(Data(stdin)) }
    try? inPipe.fileHandleForWriting.close()
    let done = DispatchSemaphore(value: 0)
    DispatchQueue.global().async { p.waitUntilExit(); done.signal() }
    if done.wait(timeout: .now() + timeout) == .timedOut {
        // SIGABRT first: Swift's backtracer prints every thread's stack into stderr, so a hang
        // is reported with where it hung.
        kill(p.processIdentifier, SIGABRT)
        if done.wait(timeout: .now() + 30) == .timedOut { kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
        _ = group.wait(timeout: .now() + 5)
        throw TestFailure("outbox \(args.joined(separator: " ")) did not finish within \(timeout)s\nstdout: \(o.text)\nstderr: \(e.text)")
    }
    _ = group.wait(timeout: .now() + 5)
    return Run(code: p.terminationStatus, stdout: o.text, stderr: e.text)
}

/// A long-running process whose output is collected as it comes (e.g. `outbox drain --watch`).
final class Background: @unchecked Sendable {
    let process = Process()
    let output = Collector()
    init(_ path: String, _ args: [String], env: [String: String]) throws {
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = args
        process.environment = env
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        pump(pipe, into: output)
        try process.run()
    }
    /// SIGTERM, then the exit status.
    func terminate() -> Int32 {
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        process.waitUntilExit()
        return process.terminationStatus
    }
    deinit { if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() } }
}

/// A real `outbox-engine` process on a loopback port, stopped with SIGTERM.
final class EngineProcess: @unchecked Sendable {
    let background: Background
    let url: String
    let token: String

    init(dataDir: String, port: UInt16 = 0) throws {
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "OUTBOX_ENGINE_TOKEN")
        background = try Background(try binary("outbox-engine"), ["--listen", "127.0.0.1:\(port)", "--data", dataDir], env: env)
        let deadline = Date().addingTimeInterval(15)
        var found: String?
        while Date() < deadline, found == nil {
            found = background.output.text.split(separator: "\n").first(where: { $0.contains("listening on") })
                .flatMap { $0.split(separator: ":").last.map(String.init) }
            if found == nil { usleep(20_000) }
        }
        guard let found else { throw TestFailure("outbox-engine did not report its address: \(background.output.text)") }
        url = "http://127.0.0.1:\(found)"
        token = String(decoding: try Data(contentsOf: URL(fileURLWithPath: dataDir + "/token")), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func stop() { _ = background.terminate() }
}

/// Waits until `condition` holds (checked every 50 ms) or `seconds` pass.
func eventually(_ seconds: Double = 20, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        usleep(50_000)
    }
    return try condition()
}

/// A loopback port nothing listens on: bound to learn a free number, then released.
func closedPort() -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = 0
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
    _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
    return UInt16(bigEndian: addr.sin_port)
}

/// `tmux` on a private server socket: a real terminal whose screen a test can read.
final class TmuxSession: @unchecked Sendable {
    /// Its own server socket, removed by `close()`.
    let socket = FileManager.default.temporaryDirectory.path + "/outbox-tmux-\(UUID().uuidString.prefix(8).lowercased()).sock"
    let name = "t"
    let tmux: String

    static var available: Bool { FileManager.default.isExecutableFile(atPath: "/usr/bin/tmux") }

    init(command: String, width: Int = 120, height: Int = 24) throws {
        tmux = "/usr/bin/tmux"
        try run(["new-session", "-d", "-s", name, "-x", "\(width)", "-y", "\(height)", command])
    }

    /// Runs a tmux client with posix_spawn and waitpid, its output in a file. (Foundation's
    /// Process did not notice this client exit once it had started the tmux server.)
    @discardableResult
    func run(_ args: [String]) throws -> String {
        let outPath = FileManager.default.temporaryDirectory.path + "/tmux-out-\(UUID().uuidString)"
        defer { unlink(outPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // Nothing else of the test runner's: a tmux server that kept the write end of another
        // test's stdin pipe would keep that test's `outbox chat` from ever seeing end of input.
        // (glibc ≥ 2.34 has posix_spawn_file_actions_addclosefrom_np; Swift's Glibc module does not
        // export it, so it is looked up.)
        typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let sym = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else {
            throw TestFailure("this glibc has no posix_spawn_file_actions_addclosefrom_np")
        }
        _ = unsafeBitCast(sym, to: AddCloseFrom.self)(&actions, 3)
        let argv = [tmux, "-S", socket, "-f", "/dev/null"] + args
        var cArgs = argv.map { strdup($0) } + [nil]
        defer { for a in cArgs { free(a) } }
        var cEnv = ProcessInfo.processInfo.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for e in cEnv { free(e) } }
        // The test runner's threads block signals; the tmux server and the program in its pane
        // must not inherit that, or kill-server cannot end them.
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attr, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for s in [SIGHUP, SIGINT, SIGTERM, SIGPIPE, SIGCHLD] { sigaddset(&defaults, s) }
        posix_spawnattr_setsigdefault(&attr, &defaults)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, tmux, &actions, &attr, &cArgs, &cEnv)
        guard rc == 0 else { throw TestFailure("cannot start tmux: errno \(rc)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let text = String(decoding: (try? Data(contentsOf: URL(fileURLWithPath: outPath))) ?? Data(), as: UTF8.self)
        let exited = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        guard exited == 0 else { throw TestFailure("tmux \(args.joined(separator: " ")) exited \(exited): \(text)") }
        return text
    }

    func type(_ text: String) throws { try run(["send-keys", "-t", name, "-l", text]); try run(["send-keys", "-t", name, "Enter"]) }
    func screen() throws -> String { try run(["capture-pane", "-p", "-t", name]) }

    func waitFor(_ text: String, seconds: Double = 20) throws -> String {
        var last = ""
        let ok = try eventually(seconds) { last = try screen(); return last.contains(text) }
        if !ok { throw TestFailure("the screen never showed \"\(text)\"; it shows:\n\(last)") }
        return last
    }

    /// Ends this test's tmux server (and the program in it).
    func close() {
        _ = try? run(["kill-server"])
        unlink(socket)
    }
}
