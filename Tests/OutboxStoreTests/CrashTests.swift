import Foundation
import Testing
import OutboxFormat
import OutboxIO
@testable import OutboxStore

/// Real processes, real kill -9. Every line a workload printed after an operation returned is a
/// promise; after the kill, a reopen must keep every promise and must not seal.
@Suite(.serialized) struct CrashTests {
    let workload = builtProduct("outbox-workload")

    func acked(_ out: String, _ word: String = "acked") -> [String] {
        out.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ")
            // A line cut by the kill has no trailing newline; only whole lines count.
            return parts.count >= 2 && parts[0] == word ? String(parts[1]) : nil
        }
    }

    @Test func twoHundredKillsDuringEnqueueLoopsLoseNothing() throws {
        let dir = TempDir()
        var promised: [String: [String]] = [:]   // id → attachment hashes
        var kills = 0
        var rounds = 0
        while kills < 200 {
            rounds += 1
            let r = try runAndKill(workload, ["enqueue", "--dir", dir.outbox, "--attach", "--tag", "r\(rounds)"],
                                   after: "acked ", extraMicros: UInt32.random(in: 0...8_000))
            if r.killed { kills += 1 } else if r.status != 0 { Issue.record("workload failed: \(r.stderr)"); return }
            for line in r.stdout.split(separator: "\n") where line.hasPrefix("acked ") && r.stdout.contains(line + "\n") {
                let parts = line.split(separator: " ", omittingEmptySubsequences: false)
                promised[String(parts[1])] = parts.count > 2 && !parts[2].isEmpty ? parts[2].split(separator: ",").map(String.init) : []
            }
            if rounds % 25 == 0 { try check(dir, promised) }
        }
        try check(dir, promised)
        #expect(kills >= 200)
        print("kill -9 enqueue: \(kills) kills, \(promised.count) acknowledged turns, \(promised.values.filter { !$0.isEmpty }.count) with attachments")
        #expect(promised.count > kills, "the workload must make progress between kills for the test to mean anything")
    }

    func check(_ dir: TempDir, _ promised: [String: [String]]) throws {
        let o = try Outbox.open(directory: dir.outbox)
        #expect(o.sealed == nil, "false seal: \(String(describing: o.sealed))")
        for (id, hashes) in promised {
            guard let t = o.turn(id) else { Issue.record("acknowledged turn \(id) is lost"); continue }
            #expect(t.attachments.map(\.sha256) == hashes)
            for h in hashes {
                #expect((try? BlobStore(directory: o.paths.blobs, fileSystem: PosixFileSystem()).verify(h)) == true, "blob \(h) of \(id)")
            }
        }
        let report = try o.verify()
        #expect(report.missingBlobs.isEmpty && report.corruptBlobs.isEmpty && report.sealed == nil)
    }

    @Test func killsDuringRetireAndCompactionLoseNoLiveTurnAndLeaveNoOrphanAfterSweep() throws {
        let dir = TempDir()
        var acknowledged = Set<String>()
        var retired = Set<String>()
        for round in 0..<40 {
            let r = try runAndKill(workload, ["cycle", "--dir", dir.outbox, "--tag", "k\(round)"],
                                   after: "acked ", extraMicros: UInt32.random(in: 0...40_000))
            acknowledged.formUnion(acked(r.stdout))
            retired.formUnion(acked(r.stdout, "retired"))
        }
        let o = try Outbox.open(directory: dir.outbox)
        #expect(o.sealed == nil)
        for id in acknowledged where !retired.contains(id) {
            // A turn retired and then compacted away is gone on purpose; every other one is here.
            if let t = o.turn(id) { #expect(t.isLive || t.state == .retired) } else {
                let wasRetired = try o.history(id).isEmpty
                #expect(wasRetired, "acknowledged turn \(id) missing")
            }
        }
        print("kill -9 cycle: \(acknowledged.count) acknowledged, \(retired.count) retired")
        #expect(acknowledged.count >= 40 && !retired.isEmpty, "the workload must make progress between kills")
        try o.sweep()
        let v = try o.verify()
        #expect(v.orphanBlobs.isEmpty && v.missingBlobs.isEmpty && v.tempFiles.isEmpty)
    }

    @Test func concurrentProcessesNeverInterleaveBytes() throws {
        let dir = TempDir()
        _ = try Outbox.open(directory: dir.outbox)
        let procs = (0..<4).map { n -> Process in
            let p = Process()
            p.executableURL = URL(fileURLWithPath: workload)
            p.arguments = ["enqueue", "--dir", dir.outbox, "--count", "150", "--tag", "p\(n)", n % 2 == 0 ? "--attach" : "--tag"]
                + (n % 2 == 0 ? [] : ["p\(n)"])
            p.standardOutput = FileHandle.nullDevice
            return p
        }
        for p in procs { try p.run() }
        for p in procs { p.waitUntilExit(); #expect(p.terminationStatus == 0) }
        let scan = LogScanner.scan(fileBytes(dir.outbox + "/turns.jsonl"))
        #expect(scan.corruption == nil && scan.tail == .clean)
        #expect(scan.entries.filter { $0.type == "turn" }.count == 600)
        #expect(scan.entries.map(\.seq) == Array(1...Int64(scan.entries.count)))
    }
}
