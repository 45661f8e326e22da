import Foundation
import OutboxIO
import class OutboxStore.Journal

/// `outbox-engine` arguments, parsed without I/O so they can be tested.
public struct EngineCommandLine: Sendable, Equatable {
    public var host = "127.0.0.1"
    public var port: UInt16 = 8787
    public var dataDirectory: String?
    public var tokenFile: String?
    public var responder = "echo"
    public var openAIBaseURL: String?
    public var openAIModel: String?
    public var openAIAPIKey: String?
    public var openAITimeout: Double = 120
    public var maxConnections = 256
    public var maxBlobBytes = 32 << 20
    public var requestTimeoutMilliseconds = 10_000
    public var idleTimeoutMilliseconds = 60_000
    public var help = false

    public static let usage = """
    usage: outbox-engine --data DIR [--listen HOST:PORT] [--token-file FILE]
                         [--responder echo|openai] [--openai-base-url URL] [--openai-model NAME]
                         [--openai-api-key KEY] [--openai-timeout SECONDS]
                         [--max-connections N] [--max-blob-bytes N]
                         [--request-timeout-ms N] [--idle-timeout-ms N]

    The reference outbox engine: JSON over HTTP/1.1 under /api (docs/PROTOCOL.md).
      --listen          address to bind (default 127.0.0.1:8787; port 0 picks a free port).
                        The bound address is printed as "outbox-engine listening on HOST:PORT".
      --data            directory for the engine's journal, blobs and generated token.
      --token-file      file holding the bearer token. Otherwise OUTBOX_ENGINE_TOKEN, otherwise
                        DIR/token (generated with mode 0600 on first start).
      --responder       echo (default) or openai: any OpenAI-compatible /chat/completions.
      --openai-base-url base URL including the version path, e.g. http://127.0.0.1:11434/v1
                        (env OUTBOX_ENGINE_OPENAI_BASE_URL, then OPENAI_BASE_URL).
      --openai-model    model name (env OUTBOX_ENGINE_OPENAI_MODEL).
      --openai-api-key  API key (env OUTBOX_ENGINE_OPENAI_API_KEY, then OPENAI_API_KEY).
    SIGINT or SIGTERM stops it cleanly.
    """

    public struct UsageError: Error, CustomStringConvertible, Equatable {
        public var description: String
    }

    public init() {}

    public static func parse(_ args: [String], environment: [String: String] = [:]) throws(UsageError) -> EngineCommandLine {
        var c = EngineCommandLine()
        var i = 0
        func value(_ flag: String) throws(UsageError) -> String {
            i += 1
            guard i < args.count else { throw UsageError(description: "\(flag) needs a value") }
            return args[i]
        }
        func int(_ flag: String) throws(UsageError) -> Int {
            let v = try value(flag)
            guard let n = Int(v), n > 0 else { throw UsageError(description: "\(flag) \(v): expected a positive integer") }
            return n
        }
        while i < args.count {
            let arg = args[i]
            switch arg {
            case "-h", "--help": c.help = true
            case "--listen":
                let v = try value(arg)
                guard let colon = v.lastIndex(of: ":"), let port = UInt16(v[v.index(after: colon)...]) else {
                    throw UsageError(description: "--listen \(v): expected HOST:PORT, e.g. 127.0.0.1:8787")
                }
                c.host = String(v[..<colon])
                c.port = port
            case "--data": c.dataDirectory = try value(arg)
            case "--token-file": c.tokenFile = try value(arg)
            case "--responder":
                c.responder = try value(arg)
                guard c.responder == "echo" || c.responder == "openai" else {
                    throw UsageError(description: "--responder \(c.responder): expected echo or openai")
                }
            case "--openai-base-url": c.openAIBaseURL = try value(arg)
            case "--openai-model": c.openAIModel = try value(arg)
            case "--openai-api-key": c.openAIAPIKey = try value(arg)
            case "--openai-timeout":
                let v = try value(arg)
                guard let t = Double(v), t > 0 else { throw UsageError(description: "--openai-timeout \(v): expected seconds > 0") }
                c.openAITimeout = t
            case "--max-connections": c.maxConnections = try int(arg)
            case "--max-blob-bytes": c.maxBlobBytes = try int(arg)
            case "--request-timeout-ms": c.requestTimeoutMilliseconds = try int(arg)
            case "--idle-timeout-ms": c.idleTimeoutMilliseconds = try int(arg)
            default: throw UsageError(description: "unknown argument \(arg)")
            }
            i += 1
        }
        if c.help { return c }
        guard c.dataDirectory != nil else { throw UsageError(description: "--data DIR is required") }
        c.openAIBaseURL = c.openAIBaseURL ?? environment["OUTBOX_ENGINE_OPENAI_BASE_URL"] ?? environment["OPENAI_BASE_URL"]
        c.openAIModel = c.openAIModel ?? environment["OUTBOX_ENGINE_OPENAI_MODEL"]
        c.openAIAPIKey = c.openAIAPIKey ?? environment["OUTBOX_ENGINE_OPENAI_API_KEY"] ?? environment["OPENAI_API_KEY"]
        if c.responder == "openai" {
            guard c.openAIBaseURL != nil else { throw UsageError(description: "--responder openai needs --openai-base-url (or OUTBOX_ENGINE_OPENAI_BASE_URL)") }
            guard c.openAIModel != nil else { throw UsageError(description: "--responder openai needs --openai-model (or OUTBOX_ENGINE_OPENAI_MODEL)") }
        }
        return c
    }

    /// Where the token comes from, for the startup message.
    public enum TokenSource: Sendable, Equatable {
        case file(String), environment, generated(String), stored(String)
    }

    /// Resolves the token: --token-file, then OUTBOX_ENGINE_TOKEN, then DIR/token (created 0600
    /// with 32 random bytes in hex if absent, durably).
    public func resolveToken(environment: [String: String], fileSystem: any FileSystem = PosixFileSystem()) throws -> (String, TokenSource) {
        if let tokenFile {
            let text = String(decoding: try fileSystem.readFile(tokenFile), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard !text.isEmpty else { throw UsageError(description: "token file \(tokenFile) is empty") }
            return (text, .file(tokenFile))
        }
        if let env = environment["OUTBOX_ENGINE_TOKEN"], !env.isEmpty { return (env, .environment) }
        let dir = dataDirectory!
        let path = dir + "/token"
        if fileSystem.exists(path) {
            let text = String(decoding: try fileSystem.readFile(path), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            if !text.isEmpty { return (text, .stored(path)) }
        }
        try Journal.ensureDirectory(dir, fs: fileSystem)
        var rng = SystemRandomNumberGenerator()
        let token = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &rng)) }.joined()
        try fileSystem.writeFileDurably(path, Array((token + "\n").utf8), mode: 0o600)
        return (token, .generated(path))
    }

    public func configuration(token: String) -> EngineConfiguration {
        let responder: ResponderChoice = responder == "openai"
            ? .openai(baseURL: openAIBaseURL!, model: openAIModel!, apiKey: openAIAPIKey, timeoutSeconds: openAITimeout)
            : .echo
        return EngineConfiguration(host: host, port: port, dataDirectory: dataDirectory!, token: token, responder: responder,
                                   maxConnections: maxConnections, maxBlobBytes: maxBlobBytes,
                                   requestTimeout: .milliseconds(requestTimeoutMilliseconds),
                                   idleTimeout: .milliseconds(idleTimeoutMilliseconds))
    }
}
