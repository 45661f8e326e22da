import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One HTTP exchange, as the engine client needs it. `path` is relative to the engine's base URL
/// (e.g. `/api/turns/r1`).
public struct HTTPExchangeRequest: Sendable {
    public var method: String
    public var path: String
    public var headers: [String: String]
    public var body: [UInt8]?
    public init(method: String, path: String, headers: [String: String] = [:], body: [UInt8]? = nil) {
        self.method = method; self.path = path; self.headers = headers; self.body = body
    }
}

public struct HTTPExchangeResponse: Sendable {
    public var status: Int
    /// Header names lowercased.
    public var headers: [String: String]
    public var body: [UInt8]
    public init(status: Int, headers: [String: String], body: [UInt8]) {
        self.status = status; self.headers = headers; self.body = body
    }
}

/// The request never got an HTTP answer: refused, reset, timed out, DNS, TLS.
public struct TransportError: Error, Sendable, CustomStringConvertible {
    public var method: String
    public var url: String
    /// NSURLErrorDomain code (-1004 cannot connect, -1001 timed out, -1005 connection lost, …).
    public var code: Int
    public var message: String
    public init(method: String, url: String, code: Int, message: String) {
        self.method = method; self.url = url; self.code = code; self.message = message
    }
    public var description: String { "\(method) \(url): \(message) (NSURLErrorDomain \(code))" }
}

/// How the drain reaches the engine: `SocketTransport` for `http://`, `URLSessionTransport` for
/// `https://` (`makeEngineTransport` picks); tests may wrap either.
public protocol EngineTransport: Sendable {
    /// The base URL requests are relative to, for error messages.
    var baseURL: String { get }
    /// Sends one request and waits for its whole answer. Throws `TransportError`.
    func send(_ request: HTTPExchangeRequest) throws -> HTTPExchangeResponse
}

/// URLSession (libcurl underneath on Linux) with one session for the drain's lifetime, so
/// keep-alive connections are reused between requests. Used for `https://` engines; `http://`
/// ones go over `SocketTransport`, which sleeps while it waits (URLSession on Linux spins).
///
/// Measured limitation (swift-corelibs-foundation 6.3 on Linux): when a reused connection is
/// reset while a request with a body (POST, PUT) waits for its answer, libcurl wants to rewind
/// the body to retry on a fresh connection and the task does not finish until `timeout`. A GET
/// or HEAD fails at once (NSURLErrorDomain -1005). Nothing is lost either way — the turn is
/// `syncing`, the next attempt asks the engine first — but such a reset costs a full timeout.
public final class URLSessionTransport: EngineTransport, @unchecked Sendable {
    public let baseURL: String
    let session: URLSession
    let timeout: TimeInterval

    /// `timeout` bounds each request: connect, send, and waiting for the answer.
    public init(baseURL: String, timeout: TimeInterval = 30) {
        var b = baseURL
        while b.hasSuffix("/") { b.removeLast() }
        self.baseURL = b
        self.timeout = timeout
        let config = URLSessionConfiguration.ephemeral
        config.timeoutIntervalForRequest = timeout
        config.timeoutIntervalForResource = timeout * 2
        config.httpMaximumConnectionsPerHost = 4
        config.requestCachePolicy = .reloadIgnoringLocalCacheData
        config.urlCache = nil
        config.httpCookieStorage = nil
        session = URLSession(configuration: config)
    }

    deinit { session.finishTasksAndInvalidate() }

    private final class Box: @unchecked Sendable {
        var result: Result<HTTPExchangeResponse, TransportError>?
    }

    public func send(_ request: HTTPExchangeRequest) throws -> HTTPExchangeResponse {
        let urlString = baseURL + request.path
        guard let url = URL(string: urlString) else {
            throw TransportError(method: request.method, url: urlString, code: NSURLErrorBadURL, message: "not a valid URL")
        }
        var req = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        req.httpMethod = request.method
        for (k, v) in request.headers { req.setValue(v, forHTTPHeaderField: k) }
        if let body = request.body { req.httpBody = Data(body) }
        let box = Box()
        let done = DispatchSemaphore(value: 0)
        let method = request.method
        let task = session.dataTask(with: req) { data, response, error in
            if let error {
                let ns = error as NSError
                box.result = .failure(TransportError(method: method, url: urlString, code: ns.code, message: ns.localizedDescription))
            } else if let http = response as? HTTPURLResponse {
                var headers: [String: String] = [:]
                for (k, v) in http.allHeaderFields {
                    if let k = k as? String, let v = v as? String { headers[k.lowercased()] = v }
                }
                box.result = .success(HTTPExchangeResponse(status: http.statusCode, headers: headers, body: data.map { Array($0) } ?? []))
            } else {
                box.result = .failure(TransportError(method: method, url: urlString, code: NSURLErrorBadServerResponse,
                                                     message: "no HTTP response"))
            }
            done.signal()
        }
        task.resume()
        done.wait()
        return try box.result!.get()
    }
}
