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
/// The fixed workload (StoreWorkload.steps) runs first, then seeded random workloads.
/// `OUTBOX_POWERLOSS=long` widens the enumeration (every subset of up to 6 pending directory
/// operations, random mixes of per-file damage) and runs 40 random workloads of 40 steps
/// (`OUTBOX_POWERLOSS_WORKLOADS=N` for another number).
@Suite struct PowerLossTests {
    struct Settings {
        var enumeration: CrashEnumeration
        /// Seeded random workloads run after the fixed one, and their length.
        var randomWorkloads: Int
        var randomSteps: Int
        var minimumStates: Int
        static var current: Settings {
            let env = ProcessInfo.processInfo.environment
            if env["OUTBOX_POWERLOSS"] == "long" {
                return Settings(enumeration: CrashEnumeration(allSubsetsUpTo: 6, tornCuts: 0, randomMixes: 6),
                                randomWorkloads: Int(env["OUTBOX_POWERLOSS_WORKLOADS"] ?? "") ?? 40, randomSteps: 40, minimumStates: 10_000)
            }
            return Settings(enumeration: CrashEnumeration(allSubsetsUpTo: 4, tornCuts: 0, randomMixes: 2),
                            randomWorkloads: 2, randomSteps: 25, minimumStates: 1_000)
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

    struct Recorded {
        var points: [Point] = []
        var chains: [[Expectation]] = []
        var syncCalls = 0
    }

    /// Runs one workload on a crash-simulating file system, recording crash points and, for
    /// each, the acknowledged states a recovered outbox may match.
    static func record(_ steps: [WorkloadStep], seed: UInt64, in dir: String) throws -> Recorded {
        let simRoot = dir + "/sim"
        try FileManager.default.createDirectory(atPath: simRoot, withIntermediateDirectories: false)
        let source = dir + "/source-c.bin"
        writeBytes(source, StoreWorkload.blobC)
        let fs = try CrashSimulatingFileSystem(root: simRoot)
        fs.setCrashPointBeforeEveryChange(true)
        let context = WorkloadContext(fs: fs, directory: simRoot + "/outbox", sourceFile: source, seed: seed)
        var r = Recorded()
        var acknowledged = Expectation()
        for (i, step) in steps.enumerated() {
            fs.setPhase(i + 1)
            let logBefore = context.logOnDisk()
            context.lastAction = ""
            try step.run(context)
            let name = context.lastAction.isEmpty ? step.name : "\(step.name): \(context.lastAction) (seed \(seed))"
            let now = context.expectation()
            r.chains.append([acknowledged] + context.intermediates(since: logBefore) + [now])
            r.chains.append([now])
            acknowledged = now
            fs.markCrashPoint("after it returned")
            for p in fs.takeCrashPoints() {
                let done = p.label == "after it returned"
                r.points.append(Point(label: p.label, step: name, disk: p.disk, chain: done ? r.chains.count - 1 : r.chains.count - 2))
            }
        }
        let off = fs.divergences()
        if !off.isEmpty { throw StoreError.invalidInput("the model's volatile view does not match the real files: \(off)") }
        r.syncCalls = fs.syncCalls
        return r
    }

    @Test func everyCrashStateOfTheWorkloadKeepsEveryPromise() throws {
        let started = Date()
        let settings = Settings.current
        let dir = TempDir()
        var workloads: [(steps: [WorkloadStep], seed: UInt64)] = [(StoreWorkload.steps, 0)]
        for seed in 1...max(1, settings.randomWorkloads) where settings.randomWorkloads > 0 {
            workloads.append((StoreWorkload.random(count: settings.randomSteps), UInt64(seed)))
        }

        // Record every workload, build every state, drop duplicates.
        struct Job { var workload: Int; var point: Int; var state: CrashState }
        var recorded: [Recorded] = []
        var jobs: [Job] = []
        var seen = Set<String>()
        var generated = 0, pointCount = 0, syncCalls = 0
        for (w, workload) in workloads.enumerated() {
            let wdir = dir.path + "/w\(w)"
            try FileManager.default.createDirectory(atPath: wdir, withIntermediateDirectories: false)
            let r = try Self.record(workload.steps, seed: workload.seed, in: wdir)
            pointCount += r.points.count
            syncCalls += r.syncCalls
            for (pi, p) in r.points.enumerated() {
                for s in p.disk.crashStates(settings.enumeration) {
                    generated += 1
                    if seen.insert("\(w)-\(p.chain)-\(s.fingerprint)").inserted { jobs.append(Job(workload: w, point: pi, state: s)) }
                }
            }
            recorded.append(r)
        }

        // Check each with the real store (two workers).
        struct Tally { var next = 0; var checked = 0; var lost = 0; var falseSeals = 0; var failures: [String] = [] }
        let tally = Mutex(Tally())
        let crashRoot = dir.path + "/crash"
        try FileManager.default.createDirectory(atPath: crashRoot, withIntermediateDirectories: false)
        let frozenJobs = jobs, frozenRecorded = recorded
        DispatchQueue.concurrentPerform(iterations: 2) { worker in
            while true {
                let n: Int = tally.withLock { t in defer { t.next += 1 }; return t.next }
                if n >= frozenJobs.count { return }
                let job = frozenJobs[n]
                let p = frozenRecorded[job.workload].points[job.point]
                let where_ = "\(crashRoot)/\(worker)-\(n)"
                var problems: [String] = []
                var outcome = PromiseChecker.Outcome()
                do {
                    try FileManager.default.createDirectory(atPath: where_, withIntermediateDirectories: false)
                    try job.state.materialize(into: where_)
                    outcome = PromiseChecker.check(outbox: where_ + "/outbox", acceptable: frozenRecorded[job.workload].chains[p.chain])
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
        print("power-loss: \(t.checked) crash states checked (\(workloads.count) workloads, \(pointCount) crash points, \(generated) generated, \(syncCalls) sync calls), \(t.lost) lost, \(t.falseSeals) false seals, \(String(format: "%.1f", seconds)) s")
        #expect(t.lost == 0 && t.falseSeals == 0 && t.failures.isEmpty)
        #expect(t.checked >= settings.minimumStates, "too few crash states to mean anything: \(t.checked)")
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
