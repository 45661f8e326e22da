import Foundation
import Testing
import EngineProtocol
import HTTPWire
import OutboxIO

/// A fresh directory per test, removed when the test is done with it.
final class TempDir: @unchecked Sendable {
    let path: String
    init(_ label: String = "engine") {
        path = FileManager.default.temporaryDirectory.path + "/outbox-\(label)-\(UUID().uuidString.prefix(8))"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// The built `outbox-engine` next to the test runner (SwiftPM puts products in one directory).
func engineBinary() throws -> String {
    let exe = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    var dir = exe.deletingLastPathComponent()
    // The runner may live inside a bundle directory (…/debug/outboxPackageTests.xctest).
    for _ in 0..<3 {
        let candidate = dir.appendingPathComponent("outbox-engine").path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        dir = dir.deletingLastPathComponent()
    }
    throw EngineTestError("outbox-engine not found near \(exe.path); run `swift build` first")
}

struct EngineTestError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// A real `outbox-engine` process on a free loopback port.
final class EngineProcess: @unchecked Sendable {
    let process = Process()
    let dataDir: String
    private(set) var port: UInt16 = 0
    private(set) var token = ""
    private let output = OutputCollector()

    init(dataDir: String, extraArgs: [String] = [], environment: [String: String] = [:]) throws {
        self.dataDir = dataDir
        process.executableURL = URL(fileURLWithPath: try engineBinary())
        process.arguments = ["--listen", "127.0.0.1:0", "--data", dataDir] + extraArgs
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "OUTBOX_ENGINE_TOKEN")
        for (k, v) in environment { env[k] = v }
        process.environment = env
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        output.collect(pipe.fileHandleForReading)
        try process.run()
        guard let line = output.waitForLine(containing: "listening on", timeout: 10),
              let portText = line.split(separator: ":").last, let port = UInt16(portText) else {
            process.terminate()
            throw EngineTestError("engine did not report its address; output:\n\(output.text)")
        }
        self.port = port
        if let t = environment["OUTBOX_ENGINE_TOKEN"] {
            token = t
        } else {
            token = String(decoding: try PosixFileSystem().readFile(dataDir + "/token"), as: UTF8.self)
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    var text: String { output.text }

    func kill9() {
        try? Signals.send(Signals.kill, to: process.processIdentifier)
        process.waitUntilExit()
    }

    func terminate() -> Int32 {
        try? Signals.send(Signals.terminate, to: process.processIdentifier)
        process.waitUntilExit()
        return process.terminationStatus
    }

    func client() -> HTTPClient { HTTPClient(port: port, token: token) }

    deinit { if process.isRunning { kill9() } }
}

final class OutputCollector: @unchecked Sendable {
    private let lock = NSCondition()
    private var buffer = ""

    func collect(_ handle: FileHandle) {
        let t = Thread { [self] in
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                lock.lock(); buffer += String(decoding: data, as: UTF8.self); lock.broadcast(); lock.unlock()
            }
        }
        t.start()
    }

    var text: String { lock.lock(); defer { lock.unlock() }; return buffer }

    func waitForLine(containing needle: String, timeout: Double) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        lock.lock(); defer { lock.unlock() }
        while true {
            if let line = buffer.split(separator: "\n").first(where: { $0.contains(needle) }) { return String(line) }
            if !lock.wait(until: deadline) { return nil }
        }
    }
}

/// A parsed HTTP response.
struct Response: Sendable {
    var status: Int
    var headers: HTTPHeaders
    var body: [UInt8]
    var text: String { String(decoding: body, as: UTF8.self) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try WireJSON.decode(type, from: body) }
    var errorCode: String? { (try? decode(ErrorEnvelope.self))?.code }
}

/// A raw HTTP/1.1 client over one keep-alive loopback connection, so tests control every byte.
final class HTTPClient: @unchecked Sendable {
    let port: UInt16
    let token: String
    let sock: SocketDescriptor
    private var pending: [UInt8] = []

    init(port: UInt16, token: String) {
        self.port = port
        self.token = token
        sock = try! Sockets.connect(host: "127.0.0.1", port: port)
        try? Sockets.setTimeouts(sock, milliseconds: 10_000)
    }

    deinit { Sockets.close(sock) }

    func sendRaw(_ bytes: [UInt8]) throws { try Sockets.sendAll(sock, bytes) }
    func sendRaw(_ text: String) throws { try sendRaw(Array(text.utf8)) }

    static func requestBytes(_ method: String, _ path: String, token: String?, headers: [(String, String)] = [],
                             body: [UInt8]? = nil) -> [UInt8] {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        if let token { head += "Authorization: Bearer \(token)\r\n" }
        for (k, v) in headers { head += "\(k): \(v)\r\n" }
        if let body { head += "Content-Type: application/json\r\nContent-Length: \(body.count)\r\n" }
        head += "\r\n"
        return Array(head.utf8) + (body ?? [])
    }

    func request(_ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil,
                 auth: Bool = true) throws -> Response {
        try sendRaw(Self.requestBytes(method, path, token: auth ? token : nil, headers: headers, body: body))
        return try readResponse(head: method == "HEAD")
    }

    func get(_ path: String) throws -> Response { try request("GET", path) }

    func post<T: Encodable>(_ path: String, _ value: T, headers: [(String, String)] = []) throws -> Response {
        try request("POST", path, headers: headers, body: WireJSON.encode(value))
    }

    /// Reads one response (Content-Length framed). Throws at EOF.
    func readResponse(head: Bool = false, skipContinue: Bool = true) throws -> Response {
        while true {
            if let end = findHeadEnd() {
                let headText = String(decoding: pending[0..<end], as: UTF8.self)
                let lines = headText.components(separatedBy: "\r\n").filter { !$0.isEmpty }
                let status = Int(lines[0].split(separator: " ")[1])!
                var headers = HTTPHeaders()
                for l in lines.dropFirst() {
                    let parts = l.split(separator: ":", maxSplits: 1)
                    headers.add(String(parts[0]), String(parts[1]).trimmingCharacters(in: .whitespaces))
                }
                let length = head ? 0 : Int(headers["Content-Length"] ?? "0")!
                while pending.count < end + 4 + length { try fill() }
                let body = Array(pending[(end + 4)..<(end + 4 + length)])
                pending.removeSubrange(0..<(end + 4 + length))
                if status == 100 && skipContinue { continue }
                return Response(status: status, headers: headers, body: body)
            }
            try fill()
        }
    }

    /// Reads until the server closes; returns everything.
    func readToEnd() throws -> [UInt8] {
        while true {
            let chunk = try Sockets.receive(sock, maxBytes: 65536)
            if chunk.isEmpty { break }
            pending += chunk
        }
        defer { pending = [] }
        return pending
    }

    /// True when the server has closed the connection (reads EOF within `timeout`).
    func isClosedByServer(within timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            guard (try? Sockets.waitReadable(sock, timeoutMilliseconds: 50)) == true else { continue }
            guard let chunk = try? Sockets.receive(sock, maxBytes: 65536) else { return true }
            if chunk.isEmpty { return true }
            pending += chunk
        }
        return false
    }

    private func fill() throws {
        let chunk = try Sockets.receive(sock, maxBytes: 65536)
        if chunk.isEmpty { throw EngineTestError("connection closed by the engine; had \(pending.count) bytes: \(String(decoding: pending.prefix(200), as: UTF8.self))") }
        pending += chunk
    }

    private func findHeadEnd() -> Int? {
        guard pending.count >= 4 else { return nil }
        for i in 0...(pending.count - 4) where pending[i] == 13 && pending[i + 1] == 10 && pending[i + 2] == 13 && pending[i + 3] == 10 {
            return i
        }
        return nil
    }
}

/// Polls until `body` returns non-nil or the timeout passes.
func eventually<T>(timeout: Double = 5, _ body: () throws -> T?) rethrows -> T? {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if let v = try body() { return v }
        Thread.sleep(forTimeInterval: 0.02)
    }
    return try body()
}

func sha256Hex(_ bytes: [UInt8]) throws -> String {
    // Independent of the engine's implementation: ask coreutils.
    let dir = TempDir("sha")
    let path = dir.path + "/b"
    _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
    p.arguments = [path]
    let pipe = Pipe()
    p.standardOutput = pipe
    try p.run()
    let out = pipe.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return String(String(decoding: out, as: UTF8.self).prefix(64))
}

typealias Attachment = EngineProtocol.Attachment

let t0 = "2025-03-01T10:00:00Z"

func conversation(_ id: String, title: String = "hello", surface: String = "cli") -> Conversation {
    Conversation(id: id, title: title, originSurface: surface, createdAt: t0)
}

func turn(_ id: String, _ text: String, attachments: [Attachment] = [], surface: String = "cli") -> TurnPost {
    TurnPost(requestId: id, text: text, attachments: attachments, createdAt: "2025-03-01T10:00:01.250Z", surface: surface)
}
