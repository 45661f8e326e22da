import Foundation
import Synchronization
import Testing
import OutboxFormat
import OutboxIO
@testable import OutboxStore

/// Simulated power loss (SQLite's test6.c, ALICE): the store workload runs on a
/// `CrashSimulatingFileSystem`; at every sync call and after every acknowledged step, every crash
/// state the persistence model allows (bounded) is written to a real directory, reopened with the
/// real store, and held to what was acknowledged. docs/RELIABILITY.md has the numbers.
///
/// `OUTBOX_POWERLOSS=long` widens the enumeration (every subset of up to 6 pending directory
/// operations, every torn sector boundary, random mixes of per-file damage, three seeds).
@Suite struct PowerLossTests {
    struct Settings {
        var enumerations: [CrashEnumeration]
        var minimumStates: Int
        static var current: Settings {
            if ProcessInfo.processInfo.environment["OUTBOX_POWERLOSS"] == "long" {
                return Settings(enumerations: (1...3).map { CrashEnumeration(allSubsetsUpTo: 6, tornCuts: 0, randomMixes: 12, seed: UInt64($0)) },
                                minimumStates: 10_000)
            }
            return Settings(enumerations: [CrashEnumeration(allSubsetsUpTo: 4, tornCuts: 0, randomMixes: 2)], minimumStates: 300)
        }
    }

    /// One crash point with what was acknowledged before it and what its operation would add.
    struct Point {
        var label: String
        var step: String
        var disk: SimulatedDisk
        /// Index into `chains`: what may be found after a crash here.
        var chain: Int
    }

    @Test func everyCrashStateOfTheWorkloadKeepsEveryPromise() throws {
        let started = Date()
        let dir = TempDir()
        let simRoot = dir.path + "/sim"
        try FileManager.default.createDirectory(atPath: simRoot, withIntermediateDirectories: false)
        let source = dir.path + "/source-c.bin"
        writeBytes(source, StoreWorkload.blobC)
        let fs = try CrashSimulatingFileSystem(root: simRoot)
        fs.setCrashPointBeforeEveryChange(true)
        let context = WorkloadContext(fs: fs, directory: simRoot + "/outbox", sourceFile: source)

        // Run the workload once, recording crash points and what each step acknowledged.
        var acknowledged = Expectation()
        var chains: [[Expectation]] = []
        var points: [Point] = []
        for (i, step) in StoreWorkload.steps.enumerated() {
            fs.setPhase(i + 1)
            let logBefore = context.logOnDisk()
            try step.run(context)
            let now = context.expectation()
            chains.append([acknowledged] + context.intermediates(since: logBefore) + [now])
            chains.append([now])
            acknowledged = now
            fs.markCrashPoint("after it returned")
            for p in fs.takeCrashPoints() {
                let done = p.label == "after it returned"
                points.append(Point(label: p.label, step: step.name, disk: p.disk, chain: done ? chains.count - 1 : chains.count - 2))
            }
        }
        #expect(fs.divergences().isEmpty, "the model's volatile view must match the real files: \(fs.divergences())")
        context.outbox = nil

        // Build every state, drop duplicates, check each with the real store (two workers).
        struct Job { var point: Int; var state: CrashState }
        var jobs: [Job] = []
        var seen = Set<String>()
        var generated = 0
        for (pi, p) in points.enumerated() {
            for options in Settings.current.enumerations {
                for s in p.disk.crashStates(options) {
                    generated += 1
                    if seen.insert("\(p.chain)-\(s.fingerprint)").inserted { jobs.append(Job(point: pi, state: s)) }
                }
            }
        }
        struct Tally { var next = 0; var checked = 0; var lost = 0; var falseSeals = 0; var failures: [String] = [] }
        let tally = Mutex(Tally())
        let crashRoot = dir.path + "/crash"
        try FileManager.default.createDirectory(atPath: crashRoot, withIntermediateDirectories: false)
        let frozenJobs = jobs, frozenPoints = points, frozenChains = chains
        DispatchQueue.concurrentPerform(iterations: 2) { worker in
            while true {
                let n: Int = tally.withLock { t in defer { t.next += 1 }; return t.next }
                if n >= frozenJobs.count { return }
                let job = frozenJobs[n]
                let p = frozenPoints[job.point]
                let where_ = "\(crashRoot)/\(worker)-\(n)"
                var problems: [String] = []
                var outcome = PromiseChecker.Outcome()
                do {
                    try FileManager.default.createDirectory(atPath: where_, withIntermediateDirectories: false)
                    try job.state.materialize(into: where_)
                    outcome = PromiseChecker.check(outbox: where_ + "/outbox", acceptable: frozenChains[p.chain])
                    problems = outcome.problems
                } catch {
                    problems = ["could not materialise the state: \(error)"]
                }
                if problems.isEmpty || ProcessInfo.processInfo.environment["OUTBOX_KEEP_FAILING"] == nil {
                    try? FileManager.default.removeItem(atPath: where_)
                }
                tally.withLock { t in
                    t.checked += 1
                    if outcome.lost { t.lost += 1 }
                    if outcome.falseSeal { t.falseSeals += 1 }
                    if !problems.isEmpty && t.failures.count < 10 {
                        t.failures.append("during \"\(p.step)\", at \(p.label), state [\(job.state.label)] (\(where_)): " + problems.joined(separator: "; "))
                    }
                }
            }
        }
        let t = tally.withLock { $0 }
        for f in t.failures { Issue.record(Comment(rawValue: f)) }
        let seconds = Date().timeIntervalSince(started)
        print("power-loss: \(t.checked) crash states checked (\(points.count) crash points, \(generated) generated, \(fs.syncCalls) sync calls), \(t.lost) lost, \(t.falseSeals) false seals, \(String(format: "%.1f", seconds)) s")
        #expect(t.lost == 0 && t.falseSeals == 0 && t.failures.isEmpty)
        #expect(t.checked >= Settings.current.minimumStates, "too few crash states to mean anything: \(t.checked)")
    }

    /// Found by the power-loss simulation: a process killed after creating the log but before
    /// fsyncing the directory left an entry every later open trusted, so turns acknowledged after
    /// the next open could vanish with the power. Every writable open now fsyncs the directory.
    @Test func aLogCreatedByAKilledProcessIsMadeDurableByTheNextOpen() throws {
        let dir = TempDir()
        let root = dir.path + "/sim"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: false)
        let fs = try CrashSimulatingFileSystem(root: root)
        let outbox = root + "/outbox"
        try fs.makeDirectory(outbox, mode: 0o700)
        for name in ["turns.jsonl", "lock"] {
            try fs.close(try fs.open(outbox + "/" + name, [.write, .create, .exclusive, .noFollow], mode: 0o600))
        }
        let o = try Outbox.open(directory: outbox, fileSystem: fs)
        try o.send("t1")
        let states = fs.disk.crashStates()
        #expect(!states.isEmpty)
        for s in states {
            let log = s.files.first { $0.path == "outbox/turns.jsonl" }
            #expect(log.map { String(decoding: $0.bytes, as: UTF8.self).contains(#""id":"t1""#) } == true,
                    "an acknowledged turn is lost in crash state [\(s.label)]")
        }
    }
}
