import Foundation
import OutboxStore

/// Group commit: N threads enqueueing into one outbox share fdatasyncs; N processes share the
/// log through the flock (each process syncs for itself).
struct ConcurrentBench {
    let directory: String
    let turnsPerRun: Int
    let executable: String

    func threads(_ n: Int) throws -> Double {
        let outbox = try Outbox.open(directory: "\(directory)/threads-\(n)")
        try outbox.createConversation(id: "bench", title: "bench", originSurface: "cli")
        let perThread = turnsPerRun / n
        let group = DispatchGroup()
        let failures = Failures()
        let t0 = nowNanos()
        for w in 0..<n {
            group.enter()
            let thread = Thread {
                defer { group.leave() }
                for i in 0..<perThread {
                    do {
                        try outbox.enqueue(TurnDraft(requestID: "w\(w)-\(i)", conversationID: "bench",
                                                     text: EnqueueBench.text, surface: "cli"))
                    } catch { failures.add("\(error)"); return }
                }
            }
            thread.start()
        }
        group.wait()
        let elapsed = Double(nowNanos() - t0) / 1e9
        if let f = failures.first { throw BenchError("concurrent enqueue failed: \(f)") }
        return Double(perThread * n) / elapsed
    }

    /// Starts `n` copies of this executable as enqueue workers on one outbox.
    func processes(_ n: Int) throws -> Double {
        let dir = "\(directory)/processes-\(n)"
        let outbox = try Outbox.open(directory: dir)
        try outbox.createConversation(id: "bench", title: "bench", originSurface: "cli")
        let perProcess = turnsPerRun / n
        let procs = (0..<n).map { w -> Process in
            let p = Process()
            p.executableURL = URL(fileURLWithPath: executable)
            p.arguments = [BenchWorker.flag, "enqueue", dir, String(perProcess), "p\(w)"]
            p.standardOutput = FileHandle.nullDevice
            return p
        }
        // Workers wait for a go file so process start-up is not measured.
        let go = dir + "/go"
        for p in procs { try p.run() }
        while procs.contains(where: { $0.isRunning }) && !allReady(dir, n) { usleep(1000) }
        let t0 = nowNanos()
        _ = FileManager.default.createFile(atPath: go, contents: nil)
        for p in procs { p.waitUntilExit() }
        let elapsed = Double(nowNanos() - t0) / 1e9
        guard procs.allSatisfy({ $0.terminationStatus == 0 }) else { throw BenchError("an enqueue worker process failed") }
        return Double(perProcess * n) / elapsed
    }

    private func allReady(_ dir: String, _ n: Int) -> Bool {
        ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasPrefix("ready-") }.count == n
    }
}

/// The hidden entry point `outbox __bench-worker …` used by the process benchmarks.
public enum BenchWorker {
    public static let flag = "__bench-worker"

    /// Runs a worker if `arguments` ask for one; returns its exit code, or nil when not a worker.
    public static func runIfRequested(_ arguments: [String]) -> Int32? {
        guard arguments.count >= 2, arguments[1] == flag else { return nil }
        let a = Array(arguments.dropFirst(2))
        do {
            switch a.first {
            case "enqueue" where a.count == 4:
                let (dir, count, tag) = (a[1], Int(a[2]) ?? 0, a[3])
                let outbox = try Outbox.open(directory: dir)
                _ = FileManager.default.createFile(atPath: "\(dir)/ready-\(tag)", contents: nil)
                while !FileManager.default.fileExists(atPath: dir + "/go") { usleep(200) }
                for i in 0..<count {
                    try outbox.enqueue(TurnDraft(requestID: "\(tag)-\(i)", conversationID: "bench", text: EnqueueBench.text, surface: "cli"))
                }
                return 0
            case "open" where a.count == 2:
                // Prints: seconds records peak-rss-bytes
                var o: Outbox?
                let s = try seconds { o = try Outbox.open(directory: a[1], mode: .readOnly) }
                print("\(s) \(o?.snapshot.recordCount ?? 0) \(peakRSSBytes())")
                return 0
            default:
                FileHandle.standardError.write(Data("bench worker: bad arguments \(a)\n".utf8))
                return 2
            }
        } catch {
            FileHandle.standardError.write(Data("bench worker: \(error)\n".utf8))
            return 1
        }
    }
}

final class Failures: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [String] = []
    func add(_ s: String) { lock.withLock { items.append(s) } }
    var first: String? { lock.withLock { items.first } }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}
