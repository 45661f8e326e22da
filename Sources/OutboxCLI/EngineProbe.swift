import Foundation
import OutboxFormat
import OutboxSync

/// Can the engine be reached, and does it accept our token? For `status`.
struct EngineProbe {
    var url: String?
    var embedded: Bool
    /// nil when not asked (an embedded engine that is not running right now).
    var reachable: Bool?
    var detail: String

    var summary: String {
        let what = embedded ? "embedded reference engine" : (url ?? "?")
        switch reachable {
        case .some(true): return "\(what) reachable" + (url.map { embedded ? " at \($0)" : "" } ?? "") + " — \(detail)"
        case .some(false): return "\(what) unreachable — \(detail)"
        case .none: return "\(what) — \(detail)"
        }
    }

    var json: JSONValue {
        .object(["url": .optional(url), "embedded": .bool(embedded),
                 "reachable": reachable.map { .bool($0) } ?? .null, "detail": .string(detail)])
    }

    static func probe(_ settings: Settings) -> EngineProbe {
        if let url = settings.engineURL {
            return check(url: url, token: settings.engineToken, embedded: false)
        }
        let files = EmbeddedEngineFiles(directory: settings.embeddedEngineDirectory)
        if let port = EmbeddedEngine.runningPort(files) {
            let token = (try? String(contentsOfFile: files.token, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
            return check(url: "http://127.0.0.1:\(port)", token: token, embedded: true)
        }
        return EngineProbe(url: nil, embedded: true, reachable: nil,
                           detail: "not running now; send, chat and drain start it (echo replies, data in \(settings.embeddedEngineDirectory))")
    }

    static func check(url: String, token: String?, embedded: Bool) -> EngineProbe {
        let started = Date()
        let health = HTTPGet.get(url + "/api/health", token: nil, timeout: 2)
        let ms = Int(Date().timeIntervalSince(started) * 1000)
        switch health {
        case .failure(let e):
            return EngineProbe(url: url, embedded: embedded, reachable: false, detail: e.message)
        case .success(let (status, _)) where status != 200:
            return EngineProbe(url: url, embedded: embedded, reachable: false, detail: "GET /api/health answered HTTP \(status)")
        case .success:
            break
        }
        guard let token else {
            return EngineProbe(url: url, embedded: embedded, reachable: true,
                               detail: "health ok in \(ms) ms, but OUTBOX_ENGINE_TOKEN is not set, so it will refuse turns")
        }
        switch HTTPGet.get(url + "/api/stats", token: token, timeout: 2) {
        case .success((200, _)):
            return EngineProbe(url: url, embedded: embedded, reachable: true, detail: "health ok in \(ms) ms, token accepted")
        case .success((401, _)):
            return EngineProbe(url: url, embedded: embedded, reachable: true, detail: "health ok, but it refuses our token (HTTP 401); check OUTBOX_ENGINE_TOKEN")
        case .success(let (status, _)):
            return EngineProbe(url: url, embedded: embedded, reachable: true, detail: "health ok in \(ms) ms (stats answered HTTP \(status))")
        case .failure(let e):
            return EngineProbe(url: url, embedded: embedded, reachable: false, detail: e.message)
        }
    }
}

/// A blocking GET with a timeout, for probes, over the engine client's transport for the URL.
enum HTTPGet {
    struct Failure: Error { var message: String }

    static func get(_ urlString: String, token: String?, timeout: TimeInterval) -> Result<(Int, Data), Failure> {
        let where_ = URL(string: urlString).map { "\($0.host ?? urlString):\($0.port.map(String.init) ?? "")" } ?? urlString
        let transport = makeEngineTransport(baseURL: urlString, timeout: timeout)
        do {
            let r = try transport.send(HTTPExchangeRequest(method: "GET", path: "", headers: token.map { ["Authorization": "Bearer \($0)"] } ?? [:]))
            return .success((r.status, Data(r.body)))
        } catch let e as TransportError {
            let why = e.code == -1001 ? "timed out after \(Int(timeout))s" : e.code == -1004 && !(transport is SocketTransport) ? "connection refused" : e.message
            return .failure(Failure(message: "\(where_) \(why)"))
        } catch {
            return .failure(Failure(message: "\(where_) \(error)"))
        }
    }
}
