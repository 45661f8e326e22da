import Foundation
import OutboxFormat

extension BenchReport {
    /// The table a person reads.
    public func table() -> String {
        func us(_ v: Double) -> String { String(format: "%.0f µs", v) }
        func x(_ v: Double) -> String { String(format: "%.2f×", v) }
        func rate(_ v: Double) -> String { String(format: "%.0f/s", v) }
        var lines: [String] = []
        lines.append("outbox bench\(quick ? " --quick" : "") — \(machine)")
        #if DEBUG
        lines.append("(a debug build: CPU-bound figures are several times slower; use `swift run -c release outbox bench`)")
        #endif
        lines.append("")
        lines.append("1. floor      write + fdatasync, \(floorLineBytes)-byte line   p50 \(us(floorP50))   p99 \(us(floorP99))")
        lines.append("2. enqueue    text turn (\(recordBytes)-byte record)     p50 \(us(enqueueP50))   p99 \(us(enqueueP99))   p50/floor \(x(enqueueRatio))  (target ≤ 1.25×)")
        lines.append("             with a 100 KiB attachment          p50 \(us(attachmentP50))   p99 \(us(attachmentP99))")
        let one = threadRate(1)
        var conc = "3. concurrent "
        conc += threads.map { "\($0.0) thr \(rate($0.1)) (\(x(one > 0 ? $0.1 / one : 0)))" }.joined(separator: "  ")
        lines.append(conc)
        lines.append("             4 processes \(rate(processes4)) (\(x(one > 0 ? processes4 / one : 0)))   (target: 8 threads ≥ 3×)")
        for (label, p) in open {
            var l = String(format: "4. open %-4@ %7d records %6.1f MB: %9.0f rec/s %6.1f MB/s", label as NSString, p.records,
                           Double(p.bytes) / 1_048_576, p.recordsPerSecond, p.mbPerSecond)
            if let jq = p.jqSeconds { l += String(format: "  (%.1f× jq)", jq / p.seconds) }
            l += String(format: "  compacted %d rec: %.0f rec/s", p.compactedRecords, p.compactedRecordsPerSecond)
            lines.append(l)
        }
        if let rss = peakRSS100k {
            lines.append(String(format: "6. memory     peak RSS opening 100k live records: %.1f MiB (%.2f× the %.1f MiB log; target ≤ 3×); a 1k-record open peaks at %.1f MiB",
                                Double(rss) / 1_048_576, Double(rss) / Double(max(1, log100kBytes)), Double(log100kBytes) / 1_048_576,
                                Double(baselineRSS) / 1_048_576))
        }
        lines.append(String(format: "5. drain      %d turns: %.0f turns/s, raw POSTs %.0f/s (%.2f× raw; target ≥ 0.5×), %d requests",
                            drainTurns, drainPerSecond, rawPerSecond, rawPerSecond > 0 ? drainPerSecond / rawPerSecond : 0, drainRequests))
        return lines.joined(separator: "\n") + "\n"
    }

    /// The JSON object `--json` prints (keys documented in docs/PERFORMANCE.md).
    public func json() -> String {
        func d(_ v: Double) -> JSONValue { .double((v * 100).rounded() / 100) }
        var concurrent = JSONObject()
        for (n, v) in threads { concurrent["threads_\(n)"] = .object(["turns_per_s": d(v)]) }
        concurrent["processes_4"] = .object(["turns_per_s": d(processes4)])
        var openObj = JSONObject()
        for (label, p) in open {
            var o: JSONObject = ["records": .int(Int64(p.records)), "bytes": .int(p.bytes),
                                 "records_per_s": d(p.recordsPerSecond), "mb_per_s": d(p.mbPerSecond),
                                 "compacted_records": .int(Int64(p.compactedRecords)),
                                 "compacted_records_per_s": d(p.compactedRecordsPerSecond),
                                 "compacted_mb_per_s": d(p.compactedMBPerSecond)]
            if let jq = p.jqSeconds { o["jq_seconds"] = d(jq); o["ratio_to_jq"] = d(jq / p.seconds) }
            openObj["records_\(label)"] = .object(o)
        }
        var root: JSONObject = [
            "machine": .string(machine), "quick": .bool(quick),
            "floor": .object(["p50_us": d(floorP50), "p99_us": d(floorP99), "line_bytes": .int(Int64(floorLineBytes))]),
            "enqueue": .object(["p50_us": d(enqueueP50), "p99_us": d(enqueueP99), "ratio_to_floor": d(enqueueRatio),
                                "record_bytes": .int(Int64(recordBytes)),
                                "attachment_100k": .object(["p50_us": d(attachmentP50), "p99_us": d(attachmentP99)])]),
            "concurrent": .object(concurrent),
            "open": .object(openObj),
            "drain": .object(["turns": .int(Int64(drainTurns)), "turns_per_s": d(drainPerSecond),
                              "raw_requests_per_s": d(rawPerSecond), "requests": .int(Int64(drainRequests))]),
        ]
        if let rss = peakRSS100k {
            root["memory"] = .object(["peak_rss_bytes_100k": .int(rss), "log_bytes_100k": .int(log100kBytes),
                                      "ratio_to_log": d(Double(rss) / Double(max(1, log100kBytes))),
                                      "peak_rss_bytes_1k": .int(baselineRSS)])
        }
        return String(decoding: JSONWriter.encode(.object(root)), as: UTF8.self) + "\n"
    }
}
