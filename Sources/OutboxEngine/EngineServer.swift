import Foundation
import EngineProtocol
import HTTPWire
import OutboxIO

/// Which responder answers turns.
public enum ResponderChoice: Sendable, Equatable {
    case echo
    case openai(baseURL: String, model: String, apiKey: String?, timeoutSeconds: Double)
}

public struct EngineConfiguration: Sendable {
    public var host: String
    public var port: UInt16
    public var dataDirectory: String
    /// The bearer token clients must present.
    public var token: String
    public var responder: ResponderChoice
    public var maxConnections: Int
    public var maxBlobBytes: Int
    public var requestTimeout: Duration
    public var idleTimeout: Duration
    /// How long `GET /api/turns/{id}/events` waits for a reply before a `timeout` event.
    public var eventStreamTimeout: Duration
    /// Testing only: sleep this long inside a turn's commit window so tests can observe 409.
    public var commitDelayForTesting: Duration

    public init(host: String = "127.0.0.1", port: UInt16 = 8787, dataDirectory: String, token: String,
                responder: ResponderChoice = .echo, maxConnections: Int = 256, maxBlobBytes: Int = 32 << 20,
                requestTimeout: Duration = .seconds(10), idleTimeout: Duration = .seconds(60),
                eventStreamTimeout: Duration = .seconds(120), commitDelayForTesting: Duration = .zero) {
        self.host = host; self.port = port; self.dataDirectory = dataDirectory; self.token = token
        self.responder = responder; self.maxConnections = maxConnections; self.maxBlobBytes = maxBlobBytes
        self.requestTimeout = requestTimeout; self.idleTimeout = idleTimeout
        self.eventStreamTimeout = eventStreamTimeout; self.commitDelayForTesting = commitDelayForTesting
    }
}

/// The reference engine, embeddable in-process: `let port = try EngineServer(config).start()`, later `stop()`.
public final class EngineServer: @unchecked Sendable {
    public let configuration: EngineConfiguration
    private let store: EngineStore
    private let worker: ReplyWorker
    private let server: HTTPServer
    private let backlog: [String]

    /// Opens (or creates) the data directory and replays its journal. Throws what failed and where.
    public init(_ configuration: EngineConfiguration) throws {
        self.configuration = configuration
        guard !configuration.token.isEmpty else {
            throw EngineError(500, ErrorCode.internalError, "the engine token is empty; refusing to serve without authentication")
        }
        let store = try EngineStore(dataDirectory: configuration.dataDirectory, commitDelay: configuration.commitDelayForTesting)
        let responder: any Responder
        switch configuration.responder {
        case .echo: responder = EchoResponder()
        case .openai(let url, let model, let key, let timeout):
            responder = OpenAIResponder(baseURL: url, model: model, apiKey: key, timeout: timeout)
        }
        let worker = ReplyWorker(store: store, responder: responder)
        let routes = EngineRoutes(store: store, token: Array(configuration.token.utf8), worker: worker,
                                  startedAt: Date(), sseTimeout: HTTPServer.seconds(configuration.eventStreamTimeout))
        let maxBlob = configuration.maxBlobBytes
        let serverConfig = HTTPServer.Configuration(
            host: configuration.host, port: configuration.port, maxConnections: configuration.maxConnections,
            requestTimeout: configuration.requestTimeout, idleTimeout: configuration.idleTimeout,
            bodyLimit: { EngineRoutes.bodyLimit(for: $0, maxBlobBytes: maxBlob) })
        self.server = HTTPServer(configuration: serverConfig, handler: { routes.handle($0) },
                                 errorResponder: { status, code, message in
                                     store.count { $0.rejected += 1 }
                                     return EngineRoutes.errorResponse(status, code, message)
                                 })
        self.store = store
        self.worker = worker
        self.backlog = store.read { $0.unanswered }
    }

    /// Starts answering owed replies and serving; returns the bound port (useful with port 0).
    public func start() throws -> UInt16 {
        worker.start(backlog: backlog)
        do {
            return try server.start()
        } catch {
            worker.stop()
            throw error
        }
    }

    /// Stops serving and the responder. Every acknowledged turn is already on disk.
    public func stop() {
        server.stop()
        worker.stop()
    }

    /// Current counters and totals, as `GET /api/stats` reports them.
    public var stats: Stats { store.stats(uptime: 0) }
}
