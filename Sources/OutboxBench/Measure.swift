import Foundation
#if canImport(Glibc)
@preconcurrency import Glibc
#endif

/// Monotonic time in nanoseconds.
func nowNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// Latency samples in microseconds, summarised the way the report prints them.
struct Samples {
    private(set) var micros: [Double] = []
    mutating func add(nanos: UInt64) { micros.append(Double(nanos) / 1000) }
    func percentile(_ p: Double) -> Double {
        guard !micros.isEmpty else { return 0 }
        let sorted = micros.sorted()
        let rank = min(sorted.count - 1, max(0, Int((p / 100 * Double(sorted.count)).rounded(.up)) - 1))
        return sorted[rank]
    }
    var p50: Double { percentile(50) }
    var p99: Double { percentile(99) }
    var count: Int { micros.count }
}

/// Times `body` once, in seconds.
func seconds(_ body: () throws -> Void) rethrows -> Double {
    let t0 = nowNanos()
    try body()
    return Double(nowNanos() - t0) / 1e9
}

/// Peak resident set size of this process (VmHWM), in bytes.
func peakRSSBytes() -> Int64 {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }) else { return 0 }
    return (line.split(separator: " ").compactMap { Int64($0) }.first ?? 0) * 1024
}
