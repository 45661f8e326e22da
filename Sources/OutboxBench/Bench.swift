import Foundation
#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import OutboxFormat

/// `outbox bench`: every figure is measured in the same run and reported next to the floor it
/// should be judged against, so the numbers mean something on whatever disk it runs on.
public struct BenchOptions: Sendable {
    public var quick = false
    public var json = false
    /// A directory on the filesystem to measure; a temporary one is made inside it.
    public var directory: String?
    /// This executable, started again as a worker for the process and memory figures.
    public var executable: String
    public init(executable: String) { self.executable = executable }
}

public struct BenchReport: Sendable {
    public var machine: String = ""
    public var quick = false
    public var floorP50 = 0.0, floorP99 = 0.0, floorLineBytes = 0
    public var enqueueP50 = 0.0, enqueueP99 = 0.0, recordBytes = 0
    public var attachmentP50 = 0.0, attachmentP99 = 0.0
    public var threads: [(Int, Double)] = []
    public var processes4 = 0.0
    public var open: [(label: String, point: OpenPoint)] = []
    public var drainTurns = 0, drainPerSecond = 0.0, rawPerSecond = 0.0, drainRequests = 0
    public var peakRSS100k: Int64?
    public var log100kBytes: Int64 = 0
    /// Peak RSS of the same worker opening a 1k-record log: the process's own floor.
    public var baselineRSS: Int64 = 0

    public struct OpenPoint: Sendable {
        public var records: Int, bytes: Int64, recordsPerSecond: Double, mbPerSecond: Double
        public var compactedRecords: Int, compactedBytes: Int64, compactedRecordsPerSecond: Double, compactedMBPerSecond: Double
        public var jqSeconds: Double?, seconds: Double
    }

    public var enqueueRatio: Double { floorP50 > 0 ? enqueueP50 / floorP50 : 0 }
    func threadRate(_ n: Int) -> Double { threads.first { $0.0 == n }?.1 ?? 0 }
}

public enum Bench {
    public static func run(_ options: BenchOptions, progress: (String) -> Void = { _ in }) throws -> BenchReport {
        let base = options.directory ?? NSTemporaryDirectory()
        let dir = "\(base)/outbox-bench-\(getpid())-\(UUID().uuidString.prefix(6))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let q = options.quick
        var r = BenchReport()
        r.quick = q
        r.machine = machineDescription(dir)

        progress("floor: write + fdatasync")
        let enqueueProbe = try EnqueueBench(directory: dir + "/probe", iterations: 1, attachmentIterations: 0).run()
        r.recordBytes = enqueueProbe.recordBytes
        r.floorLineBytes = enqueueProbe.recordBytes
        let floor = try FloorBench(directory: dir, lineBytes: max(64, r.recordBytes), iterations: q ? 400 : 3000).run()
        r.floorP50 = floor.p50; r.floorP99 = floor.p99

        progress("enqueue")
        let e = try EnqueueBench(directory: dir, iterations: q ? 400 : 3000, attachmentIterations: q ? 40 : 300).run()
        r.enqueueP50 = e.text.p50; r.enqueueP99 = e.text.p99
        r.attachmentP50 = e.attachment.p50; r.attachmentP99 = e.attachment.p99

        progress("concurrent enqueue")
        let c = ConcurrentBench(directory: dir, turnsPerRun: q ? 800 : 4000, executable: options.executable)
        for n in [1, 2, 4, 8] { r.threads.append((n, try c.threads(n))) }
        r.processes4 = try c.processes(4)

        progress("open")
        let o = OpenBench(directory: dir, executable: options.executable)
        for (label, n) in [("1k", 1_000), ("10k", 10_000), ("100k", 100_000)] {
            let p = try o.run(records: n, measureMemory: false)
            r.open.append((label, BenchReport.OpenPoint(
                records: p.records, bytes: p.bytes, recordsPerSecond: p.recordsPerSecond, mbPerSecond: p.mbPerSecond,
                compactedRecords: p.compactedRecords, compactedBytes: p.compactedBytes,
                compactedRecordsPerSecond: p.compactedRecordsPerSecond,
                compactedMBPerSecond: Double(p.compactedBytes) / 1_048_576 / p.compactedSeconds,
                jqSeconds: p.jqSeconds, seconds: p.seconds)))
        }

        progress("memory")
        let live = try o.livePeakRSS(records: 100_000)
        r.peakRSS100k = live.rss; r.log100kBytes = live.logBytes
        r.baselineRSS = try o.childOpenPeakRSS(dir + "/open-1000") ?? 0

        progress("drain")
        let d = try DrainBench(directory: dir, turns: q ? 1_000 : 10_000).run()
        r.drainTurns = d.turns; r.drainPerSecond = d.turnsPerSecond; r.rawPerSecond = d.rawRequestsPerSecond; r.drainRequests = d.requests
        return r
    }

    static func machineDescription(_ dir: String) -> String {
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let gib = ProcessInfo.processInfo.physicalMemory / (1 << 30)
        var s = "\(cores) cores, \(gib) GiB"
        if let mounts = try? String(contentsOfFile: "/proc/mounts", encoding: .utf8) {
            // The longest mount point that contains the bench directory names its filesystem.
            var best: [Substring] = []
            for line in mounts.split(separator: "\n") {
                let fields = line.split(separator: " ")
                guard fields.count > 2, dir.hasPrefix(String(fields[1])) else { continue }
                if best.isEmpty || fields[1].count > best[1].count { best = fields }
            }
            if !best.isEmpty { s += ", \(best[2]) on \(best[0])" }
        }
        return s
    }
}
