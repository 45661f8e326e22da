import Foundation
import OutboxFormat
import OutboxIO
@testable import OutboxStore

/// A fresh directory per test, removed when the test's value goes away.
final class TempDir {
    let path: String
    init(_ name: String = #function) {
        let base = FileManager.default.temporaryDirectory.path
        let clean = name.filter { $0.isLetter || $0.isNumber }
        path = "\(base)/outbox-test-\(clean)-\(UUID().uuidString.prefix(8))"
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
    var outbox: String { path + "/outbox" }
}

/// Executables built alongside the tests live next to the test runner.
func builtProduct(_ name: String) -> String {
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    var dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
    // Inside an .xctest bundle the runner sits one level deeper on some layouts.
    for _ in 0..<4 {
        let candidate = dir.appendingPathComponent(name).path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        dir = dir.deletingLastPathComponent()
    }
    return URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent(name).path
}

struct Finished {
    var status: Int32
    var stdout: String
    var stderr: String
    var killed: Bool
}

func fileBytes(_ path: String) -> [UInt8] {
    (try? PosixFileSystem().readFile(path)) ?? []
}

func writeBytes(_ path: String, _ bytes: [UInt8]) {
    _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
}

extension Outbox {
    @discardableResult
    func send(_ id: String, _ text: String = "hello", conversation: String = "c1", attachments: [AttachmentSource] = []) throws -> EnqueueResult {
        if self.conversation(conversation) == nil {
            try createConversation(id: conversation, title: "test", originSurface: "cli")
        }
        return try enqueue(TurnDraft(requestID: id, conversationID: conversation, text: text, attachments: attachments, surface: "cli"))
    }
}

let answer = EngineAnswer(httpStatus: 201, status: "received", replayed: false)

final class OutputBuffer: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()
    func append(_ d: Data) { lock.withLock { data.append(d) } }
    var text: String { lock.withLock { String(decoding: data, as: UTF8.self) } }
}

/// Starts a process, waits until its stdout shows `marker` (it has started doing the work, not
/// still loading), waits `extraMicros` more, then kill -9s it. Process start-up time varies a
/// lot on a loaded 2-core machine; a kill timed from the first acknowledgement always lands
/// mid-work.
func runAndKill(_ path: String, _ args: [String], after marker: String, extraMicros: UInt32) throws -> Finished {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: path)
    p.arguments = args
    let out = Pipe(), err = Pipe()
    p.standardOutput = out
    p.standardError = err
    let buffer = OutputBuffer()
    out.fileHandleForReading.readabilityHandler = { h in buffer.append(h.availableData) }
    try p.run()
    let deadline = Date().addingTimeInterval(10)
    while p.isRunning && !buffer.text.contains(marker) && Date() < deadline { usleep(500) }
    usleep(extraMicros)
    var killed = false
    if p.isRunning { kill(p.processIdentifier, SIGKILL); killed = true }
    p.waitUntilExit()
    out.fileHandleForReading.readabilityHandler = nil
    buffer.append(out.fileHandleForReading.readDataToEndOfFile())
    let e = err.fileHandleForReading.readDataToEndOfFile()
    return Finished(status: p.terminationStatus, stdout: buffer.text, stderr: String(decoding: e, as: UTF8.self),
                    killed: killed && p.terminationReason == .uncaughtSignal)
}
