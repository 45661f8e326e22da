import Foundation

/// A child process whose stdout is collected as it runs, and which can be kill -9'd.
final class Child: @unchecked Sendable {
    let process = Process()
    private let lock = NSLock()
    private var output = Data()
    private(set) var killedByUs = false
    let label: String

    init(_ label: String, _ executable: String, _ arguments: [String], environment: [String: String]) {
        self.label = label
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        out.fileHandleForReading.readabilityHandler = { [weak self] h in
            let d = h.availableData
            if d.isEmpty { h.readabilityHandler = nil; return }
            self?.lock.withLock { self?.output.append(d) }
        }
    }

    func start() throws { try process.run() }
    var isRunning: Bool { process.isRunning }
    var pid: Int32 { process.processIdentifier }

    func kill9() {
        lock.withLock { killedByUs = true }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    /// Whole lines printed so far, while it runs.
    func peekLines() -> [String] {
        var lines = lock.withLock { String(decoding: output, as: UTF8.self) }.components(separatedBy: "\n")
        lines.removeLast()
        return lines
    }

    /// Waits for exit, then returns stdout (complete lines only: a kill may cut the last one).
    func finish() -> (status: Int32, killed: Bool, lines: [String]) {
        process.waitUntilExit()
        // Let the reader drain what is left in the pipe.
        if let h = (process.standardOutput as? Pipe)?.fileHandleForReading {
            h.readabilityHandler = nil
            let rest = h.readDataToEndOfFile()
            lock.withLock { output.append(rest) }
        }
        let text = lock.withLock { String(decoding: output, as: UTF8.self) }
        var lines = text.components(separatedBy: "\n")
        lines.removeLast()  // after the last newline: empty, or a line the kill cut short
        let killed = lock.withLock { killedByUs } && process.terminationReason == .uncaughtSignal
        return (process.terminationStatus, killed, lines)
    }
}

/// Runs a command to completion and returns its exit status and stdout.
func runToEnd(_ executable: String, _ arguments: [String], environment: [String: String]) throws -> (Int32, String) {
    let c = Child("run", executable, arguments, environment: environment)
    try c.start()
    let r = c.finish()
    return (r.status, r.lines.joined(separator: "\n"))
}
