import Foundation
import OutboxFormat
import OutboxIO
import OutboxStore

/// How fast a log opens (scan + checksum + decode + fold), before and after compaction, against
/// `jq -c . turns.jsonl` on the same file; and the peak memory of opening the largest one.
struct OpenBench {
    let directory: String
    let executable: String

    struct Point {
        var records: Int
        var bytes: Int64
        var seconds: Double
        var compactedRecords: Int
        var compactedBytes: Int64
        var compactedSeconds: Double
        var jqSeconds: Double?
        var peakRSS: Int64?
        var recordsPerSecond: Double { Double(records) / seconds }
        var mbPerSecond: Double { Double(bytes) / 1_048_576 / seconds }
        var compactedRecordsPerSecond: Double { Double(compactedRecords) / compactedSeconds }
    }

    /// Writes a log of about `records` records: one conversation, then turns whose records come
    /// from `turnRecords`, until the count is reached. Returns the records and bytes written.
    static func writeLog(_ dir: String, records: Int, turnRecords: (String, String) -> [OutboxRecord]) throws -> (records: Int, bytes: Int64) {
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        var bytes: [UInt8] = []
        var seq: Int64 = 0
        let at = Timestamp.format(millis: 1_795_000_000_000)
        func add(_ r: OutboxRecord) {
            seq += 1
            bytes += LineCodec.encode(seq: seq, type: r.typeName, at: at, fields: r.fields)
        }
        add(.conversation(id: "bench", title: "bench", originSurface: "cli", createdAt: at))
        var i = 0
        while seq < Int64(records) {
            let id = "t\(i)"
            add(.turn(id: id, conversation: "bench", text: EnqueueBench.text, attachments: [], surface: "cli", createdAt: at))
            turnRecords(id, at).forEach(add)
            i += 1
        }
        try PosixFileSystem().writeFileDurably(dir + "/turns.jsonl", bytes)
        return (Int(seq), Int64(bytes.count))
    }

    /// Turns that went through syncing/synced/reply, every other one retired (dead weight that
    /// compaction removes).
    static func writeLog(_ dir: String, records: Int) throws -> Int {
        try writeLog(dir, records: records) { id, _ in
            var r: [OutboxRecord] = [
                .state(id: id, state: .syncing, attempt: 1, nextAttemptAt: nil, error: nil, answer: nil, reason: nil),
                .state(id: id, state: .synced, attempt: 1, nextAttemptAt: nil, error: nil,
                       answer: EngineAnswer(httpStatus: 201, status: "received", replayed: false), reason: nil),
                .reply(id: id, status: "answered", text: "echo: " + EnqueueBench.text, error: nil),
            ]
            if (Int(id.dropFirst()) ?? 0) % 2 == 0 { r.append(.retired(id: id)) }
            return r
        }.records
    }

    /// Turns that are all live: still waiting, each with one failed attempt on record (what a
    /// long offline stretch leaves behind).
    static func writeLiveLog(_ dir: String, records: Int) throws -> Int64 {
        try writeLog(dir, records: records) { id, at in
            [.state(id: id, state: .syncing, attempt: 1, nextAttemptAt: nil, error: nil, answer: nil, reason: nil),
             .state(id: id, state: .queued, attempt: 1, nextAttemptAt: at, error: "engine unreachable", answer: nil, reason: "retry-later")]
        }.bytes
    }

    /// Peak RSS of a fresh process opening a log of `records` live records, and that log's size.
    func livePeakRSS(records: Int) throws -> (rss: Int64?, logBytes: Int64) {
        let dir = "\(directory)/live-\(records)"
        let size = try Self.writeLiveLog(dir, records: records)
        return (try childOpenPeakRSS(dir), size)
    }

    func run(records: Int, measureMemory: Bool) throws -> Point {
        let dir = "\(directory)/open-\(records)"
        let written = try Self.writeLog(dir, records: records)
        let log = dir + "/turns.jsonl"
        let size = try PosixFileSystem().linkStatus(log)?.size ?? 0
        _ = try PosixFileSystem().readFile(log)  // warm the page cache: we measure parsing, not the disk
        let before = try timeOpen(dir)
        let jq = jqSeconds(log)
        var peak: Int64?
        if measureMemory { peak = try childOpenPeakRSS(dir) }
        var options = Outbox.Options()
        options.recoverAtOpen = false
        try Outbox.open(directory: dir, options: options).compact()
        let compactedSize = try PosixFileSystem().linkStatus(log)?.size ?? 0
        let after = try timeOpen(dir)
        let compacted = try Outbox.open(directory: dir, mode: .readOnly).snapshot.recordCount
        return Point(records: written, bytes: size, seconds: before, compactedRecords: compacted,
                     compactedBytes: compactedSize, compactedSeconds: after, jqSeconds: jq, peakRSS: peak)
    }

    private func timeOpen(_ dir: String) throws -> Double {
        var best = Double.infinity
        for _ in 0..<3 {
            best = min(best, try seconds { _ = try Outbox.open(directory: dir, mode: .readOnly) })
        }
        return best
    }

    private func jqSeconds(_ log: String) -> Double? {
        guard let jq = ["/usr/bin/jq", "/usr/local/bin/jq", "/bin/jq"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else { return nil }
        var best = Double.infinity
        for _ in 0..<2 {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: jq)
            p.arguments = ["-c", ".", log]
            p.standardOutput = FileHandle.nullDevice
            let t = (try? seconds { try p.run(); p.waitUntilExit() }) ?? .infinity
            if p.terminationStatus == 0 { best = min(best, t) }
        }
        return best.isFinite ? best : nil
    }

    /// Peak RSS of a fresh process that only opens the log.
    func childOpenPeakRSS(_ dir: String) throws -> Int64? {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = [BenchWorker.flag, "open", dir]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { return nil }
        return String(decoding: data, as: UTF8.self).split(separator: " ").last.flatMap { Int64($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }
}
