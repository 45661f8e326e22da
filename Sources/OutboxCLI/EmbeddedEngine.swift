import Foundation
import OutboxEngine
import OutboxIO
import OutboxStore
import OutboxSync

/// The engine a command talks to: the configured one (`--engine`/`OUTBOX_ENGINE_URL`), or the
/// reference engine embedded in this process (or in another `outbox` process running it now).
final class EngineConnection: @unchecked Sendable {
    let url: String
    let token: String
    /// True for the reference engine run by outbox itself.
    let embedded: Bool
    /// Set when this process runs the embedded engine.
    private var server: EngineServer?
    private var lock: FileLock?

    fileprivate init(url: String, token: String, embedded: Bool, server: EngineServer?, lock: FileLock?) {
        self.url = url; self.token = token; self.embedded = embedded; self.server = server; self.lock = lock
    }

    /// `EngineClient` picks the transport: poll-based sockets for `http://`, URLSession for `https://`.
    func client(timeout: TimeInterval = 15) -> EngineClient {
        EngineClient(baseURL: url, token: token, timeout: timeout)
    }

    /// Stops an engine this process runs (every acknowledged turn is already on its disk).
    func close() {
        server?.stop(); server = nil
        lock?.release(); lock = nil
    }

    deinit { close() }

    /// Connects to the configured engine, or finds or starts the embedded one.
    static func open(_ settings: Settings) throws -> EngineConnection {
        if let url = settings.engineURL {
            return EngineConnection(url: url, token: settings.engineToken ?? "", embedded: false, server: nil, lock: nil)
        }
        return try EmbeddedEngine.open(settings)
    }
}

/// Where the embedded engine's running instance can be found by other `outbox` processes.
struct EmbeddedEngineFiles {
    let directory: String
    /// Held (flock) by the one process running the embedded engine.
    var lock: String { directory + "/embedded.lock" }
    /// "PORT\n" of the running embedded engine, written after it binds.
    var port: String { directory + "/embedded.port" }
    var token: String { directory + "/token" }
}

/// The reference engine inside `outbox`: one process at a time runs it (holding
/// `embedded.lock`) on an ephemeral 127.0.0.1 port it writes to `embedded.port`; other `outbox`
/// processes use that one. Its data (journal, blobs, token) persist in their own directory.
enum EmbeddedEngine {
    static func open(_ settings: Settings) throws -> EngineConnection {
        let fs = PosixFileSystem()
        let files = EmbeddedEngineFiles(directory: settings.embeddedEngineDirectory)
        var options: EngineCommandLine
        do {
            var args = ["--data", files.directory, "--listen", "127.0.0.1:0"]
            if settings.environment["OUTBOX_ENGINE_RESPONDER"] == "openai" { args += ["--responder", "openai"] }
            options = try EngineCommandLine.parse(args, environment: settings.environment)
        } catch {
            throw CLIError.failure("embedded engine: \(error) (OUTBOX_ENGINE_RESPONDER=openai needs OUTBOX_ENGINE_OPENAI_BASE_URL and OUTBOX_ENGINE_OPENAI_MODEL)")
        }
        options.tokenFile = nil
        do {
            try makeDirectories(files.directory, fs: fs)
            // The token lives in the engine's directory (0600); OUTBOX_ENGINE_TOKEN is for --engine.
            let (token, _) = try options.resolveToken(environment: [:], fileSystem: fs)
            for _ in 0..<40 {
                if let lock = try FileLock.acquire(files.lock, .exclusive, wait: false, fileSystem: fs) {
                    let server = try EngineServer(options.configuration(token: token))
                    let port = try server.start()
                    try fs.writeFileDurably(files.port, Array("\(port)\n".utf8))
                    return EngineConnection(url: "http://127.0.0.1:\(port)", token: token, embedded: true, server: server, lock: lock)
                }
                if let port = runningPort(files) {
                    return EngineConnection(url: "http://127.0.0.1:\(port)", token: token, embedded: true, server: nil, lock: nil)
                }
                usleep(50_000)  // the holder is starting: its port file is not written yet
            }
            throw CLIError.failure("the embedded engine in \(files.directory) is held by another outbox process that does not say its port")
        } catch let e as CLIError {
            throw e
        } catch {
            throw CLIError.failure("cannot start the embedded engine in \(files.directory): \(error)")
        }
    }

    static func makeDirectories(_ dir: String, fs: any FileSystem) throws {
        if fs.exists(dir) { return }
        try makeDirectories(parentDirectory(of: dir), fs: fs)
        do { try fs.makeDirectory(dir, mode: 0o700) } catch let e as IOError where e.errno == .exists { return }
        try fs.syncDirectory(parentDirectory(of: dir))
    }

    /// The port of an embedded engine another `outbox` process is running right now, if any.
    static func runningPort(_ files: EmbeddedEngineFiles) -> UInt16? {
        let fs = PosixFileSystem()
        guard fs.exists(files.lock) else { return nil }
        if let probe = try? FileLock.acquire(files.lock, .exclusive, wait: false, fileSystem: fs) {
            probe.release()   // nobody holds it: nobody runs it
            return nil
        }
        guard let text = try? fs.readFile(files.port) else { return nil }
        return UInt16(String(decoding: text, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
