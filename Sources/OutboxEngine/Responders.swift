import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import EngineProtocol

/// Answers a turn given the conversation so far (the last message is the turn being answered).
public protocol Responder: Sendable {
    var name: String { get }
    /// The reply text, or a thrown error whose description becomes the reply's failure reason.
    func reply(to history: [ChatMessage]) throws -> String
}

/// Deterministic and instant: `echo: <text>`, plus the attachment names if any.
public struct EchoResponder: Responder {
    public init() {}
    public var name: String { "echo" }
    public func reply(to history: [ChatMessage]) throws -> String {
        guard let last = history.last else { return "echo:" }
        var text = "echo: " + last.content
        if !last.attachments.isEmpty {
            text += " [attachments: " + last.attachments.map(\.name).joined(separator: ", ") + "]"
        }
        return text
    }
}

/// Any OpenAI-compatible `POST {baseURL}/chat/completions` (OpenAI, Ollama, llama.cpp, vLLM).
/// `baseURL` includes the version path, as in the OpenAI SDKs: `http://127.0.0.1:11434/v1`.
public struct OpenAIResponder: Responder {
    public var baseURL: String
    public var model: String
    public var apiKey: String?
    public var timeout: Double

    public init(baseURL: String, model: String, apiKey: String?, timeout: Double = 120) {
        self.baseURL = baseURL; self.model = model; self.apiKey = apiKey; self.timeout = timeout
    }

    public var name: String { "openai" }

    struct Failure: Error, CustomStringConvertible { var description: String }

    private struct Request: Encodable {
        struct Message: Encodable { var role: String; var content: String }
        var model: String
        var messages: [Message]
        var stream = false
    }

    private struct Response: Decodable {
        struct Choice: Decodable { struct Message: Decodable { var content: String? }; var message: Message }
        var choices: [Choice]
    }

    public func reply(to history: [ChatMessage]) throws -> String {
        let endpoint = baseURL.hasSuffix("/") ? baseURL + "chat/completions" : baseURL + "/chat/completions"
        guard let url = URL(string: endpoint), url.scheme == "http" || url.scheme == "https" else {
            throw Failure(description: "openai: base URL \"\(baseURL)\" is not an http(s) URL")
        }
        let messages = history.map { m -> Request.Message in
            var content = m.content
            if !m.attachments.isEmpty {
                content += "\n[attachments: " + m.attachments.map { "\($0.name) (\($0.type), \($0.size) bytes)" }.joined(separator: ", ") + "]"
            }
            return Request.Message(role: m.role, content: content)
        }
        var request = URLRequest(url: url, timeoutInterval: timeout)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        if let apiKey, !apiKey.isEmpty { request.setValue("Bearer \(apiKey)", forHTTPHeaderField: "Authorization") }
        request.httpBody = Data(WireJSON.encode(Request(model: model, messages: messages)))

        let (data, response, error) = Self.send(request)
        if let error {
            throw Failure(description: "openai: POST \(endpoint) failed: \(error.localizedDescription)")
        }
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        let body = data ?? Data()
        guard (200..<300).contains(status) else {
            let snippet = String(decoding: body.prefix(300), as: UTF8.self)
            throw Failure(description: "openai: POST \(endpoint) answered HTTP \(status): \(snippet)")
        }
        guard let decoded = try? JSONDecoder().decode(Response.self, from: body),
              let content = decoded.choices.first?.message.content else {
            throw Failure(description: "openai: POST \(endpoint) answered 200 without choices[0].message.content: \(String(decoding: body.prefix(300), as: UTF8.self))")
        }
        return content
    }

    private static func send(_ request: URLRequest) -> (Data?, URLResponse?, Error?) {
        final class Box: @unchecked Sendable { var value: (Data?, URLResponse?, Error?) = (nil, nil, nil) }
        let box = Box()
        let done = DispatchSemaphore(value: 0)
        let session = URLSession(configuration: .ephemeral)
        session.dataTask(with: request) { data, response, error in
            box.value = (data, response, error)
            done.signal()
        }.resume()
        done.wait()
        session.finishTasksAndInvalidate()
        return box.value
    }
}

/// Answers turns one at a time, in the order they were received, off the request path.
/// A responder failure is recorded as a failed reply; the turn itself is never touched.
final class ReplyWorker: @unchecked Sendable {
    private let store: EngineStore
    private let responder: any Responder
    private let queue = NSCondition()
    private var pending: [String] = []
    private var stopping = false
    private var running = false
    private let finished = DispatchSemaphore(value: 0)

    init(store: EngineStore, responder: any Responder) {
        self.store = store
        self.responder = responder
    }

    func start(backlog: [String]) {
        queue.lock()
        pending.append(contentsOf: backlog)
        running = true
        queue.unlock()
        let thread = Thread { [self] in run() }
        thread.name = "reply-worker"
        thread.start()
    }

    func enqueue(_ requestId: String) {
        queue.lock()
        pending.append(requestId)
        queue.signal()
        queue.unlock()
    }

    func stop() {
        queue.lock()
        let wasRunning = running
        stopping = true
        queue.broadcast()
        queue.unlock()
        if wasRunning { _ = finished.wait(timeout: .now() + 2) }
    }

    private func run() {
        defer { finished.signal() }
        while true {
            queue.lock()
            while pending.isEmpty && !stopping { queue.wait() }
            if stopping { queue.unlock(); return }
            let id = pending.removeFirst()
            queue.unlock()

            let history = store.read { $0.history(upTo: id) }
            if history.isEmpty || store.read({ $0.replies[id] != nil }) { continue }
            let reply: Reply
            do {
                let text = try responder.reply(to: history)
                reply = Reply(text: text, responder: responder.name, at: RFC3339.now())
            } catch {
                reply = Reply(error: "\(error)", responder: responder.name, at: RFC3339.now())
            }
            // If this fails the store is sealed; the turn stays unanswered and is retried at restart.
            try? store.recordReply(requestId: id, reply)
        }
    }
}
