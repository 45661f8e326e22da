import Foundation
import OutboxFormat
import OutboxIO
@testable import OutboxStore

// The short store workload that the power-loss and I/O-fault tests drive, what each step
// acknowledges, and the checker that holds a recovered outbox to those promises.

/// What a recovered turn must look like: everything a person or the drain relies on, nothing
/// that recovery legitimately rewrites (timestamps). A `syncing` turn counts as `queued`:
/// recovery at open puts an interrupted attempt back in the queue, keeping its attempt count.
struct TurnProjection: Equatable, CustomStringConvertible {
    var conversation: String
    var text: String
    var surface: String
    var attachments: [AttachmentRef]
    var state: TurnState
    var attempt: Int
    var mayHaveLanded: Bool
    var lastError: String?
    var nextAttemptAt: String?
    var engine: EngineAnswer?
    var reply: String?

    init(_ t: Turn) {
        conversation = t.conversationID; text = t.text; surface = t.surface; attachments = t.attachments
        state = t.state == .syncing ? .queued : t.state
        attempt = t.attempt; mayHaveLanded = t.mayHaveLanded; lastError = t.lastError
        nextAttemptAt = t.nextAttemptAt; engine = t.engineAnswer
        reply = t.reply.map { "\($0.status)|\($0.text ?? "")|\($0.error ?? "")" }
    }

    var description: String {
        "\(state.rawValue) attempt \(attempt)\(mayHaveLanded ? " may-have-landed" : "")\(reply != nil ? " +reply" : "")"
            + " \(attachments.count) attachment(s)"
    }
}

enum Requirement: Equatable, CustomStringConvertible {
    /// Live in the outbox's log, like this, with its attachment bytes in blobs/.
    case main(TurnProjection)
    /// Retired, cancelled or compacted away: must not come back to life.
    case dead
    /// Moved aside by a reset: in a keepsake's log like this, its bytes in the keepsake's blobs/.
    case keepsake(TurnProjection)

    var description: String {
        switch self {
        case .main(let p): return "live: \(p)"
        case .dead: return "retired/cancelled"
        case .keepsake(let p): return "in the reset keepsake: \(p)"
        }
    }
}

/// Everything acknowledged at one moment.
struct Expectation {
    var turns: [String: Requirement] = [:]
    var conversations: Set<String> = []
}

/// State a workload run carries from step to step.
final class WorkloadContext {
    let fs: any FileSystem
    let directory: String
    let sourceFile: String
    var outbox: Outbox?
    var keepsake: [String: Requirement] = [:]
    var damagedLog: String?
    var everSeen: Set<String> = []
    /// For random workloads: a deterministic generator, a counter for ids, what the last step did.
    var random: UInt64
    var counter = 0
    var lastAction = ""

    init(fs: any FileSystem, directory: String, sourceFile: String, seed: UInt64 = 0) {
        self.fs = fs; self.directory = directory; self.sourceFile = sourceFile; self.random = seed
    }

    /// SplitMix64.
    func next(_ bound: Int) -> Int {
        random &+= 0x9E3779B97F4A7C15
        var z = random
        z = (z ^ (z >> 30)) &* 0xBF58476D1CE4E5B9
        z = (z ^ (z >> 27)) &* 0x94D049BB133111EB
        return Int((z ^ (z >> 31)) % UInt64(bound))
    }

    func o() throws -> Outbox {
        guard let outbox else { throw StoreError.invalidInput("workload: the outbox is not open") }
        return outbox
    }

    func reopen() throws {
        outbox = nil
        outbox = try Outbox.open(directory: directory, fileSystem: fs, clock: clock)
    }

    /// A clock that advances 1 ms per reading from a fixed start: the same workload makes the
    /// same calls every run (file stamps included), which the fault matrix's call indexes need.
    let ticks = Ticks()
    var clock: @Sendable () -> Int64 { let t = ticks; return { t.next() } }

    /// What is acknowledged now that the last step returned.
    func expectation() -> Expectation {
        guard let o = outbox else { return expectation(turns: [], conversations: []) }
        return expectation(turns: o.turns, conversations: o.conversations.map(\.id))
    }

    func expectation(turns: [Turn], conversations: [String]) -> Expectation {
        var e = Expectation()
        for id in everSeen { e.turns[id] = .dead }
        for (id, r) in keepsake { e.turns[id] = r }
        for t in turns {
            e.turns[t.id] = t.isLive ? .main(TurnProjection(t)) : .dead
            everSeen.insert(t.id)
        }
        e.conversations = Set(conversations)
        return e
    }

    /// The log as it is on disk now (read around the file system under test).
    func logOnDisk() -> (inode: UInt64, entries: [LogEntry])? {
        let path = directory + "/turns.jsonl"
        guard let st = try? PosixFileSystem().linkStatus(path) else { return nil }
        return (st.inode, LogScanner.scan(fileBytes(path)).entries)
    }

    /// A power cut can keep any prefix of the records one step appended (a multi-record write is
    /// not atomic on disk): the state after each such prefix, in order.
    func intermediates(since before: (inode: UInt64, entries: [LogEntry])?) -> [Expectation] {
        guard let before, let now = logOnDisk(), now.inode == before.inode, now.entries.count > before.entries.count + 1 else { return [] }
        var out: [Expectation] = []
        for n in (before.entries.count + 1)..<now.entries.count {
            var state = OutboxState()
            for e in now.entries.prefix(n) { _ = state.apply(e) }
            out.append(expectation(turns: state.orderedTurns, conversations: state.orderedConversations.map(\.id)))
        }
        return out
    }
}

struct WorkloadStep: Sendable {
    var name: String
    var run: @Sendable (WorkloadContext) throws -> Void
}

enum StoreWorkload {
    /// Attachment bytes: A is shared by three turns and spans several 512-byte sectors.
    static let blobA: [UInt8] = (0..<1500).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
    static let blobB = Array("a short note\n".utf8)
    static let blobC: [UInt8] = (0..<700).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 1) }
    static let blobD: [UInt8] = (0..<900).map { UInt8(truncatingIfNeeded: $0 &* 5 &+ 11) }

    static func send(_ c: WorkloadContext, _ id: String, _ text: String, conversation: String = "c1",
                     _ attachments: [AttachmentSource] = []) throws {
        try c.o().enqueue(TurnDraft(requestID: id, conversationID: conversation, text: text, attachments: attachments, surface: "cli"))
    }

    static let answer = EngineAnswer(httpStatus: 201, status: "received", replayed: false)

    /// Create, enqueue with shared and unique attachments, every kind of transition, reply,
    /// cancel, retire, reopen with an interrupted attempt, a torn tail left by a killed writer,
    /// compaction, reset and salvage.
    static let steps: [WorkloadStep] = [
        WorkloadStep(name: "a process killed while creating the outbox (log and lock created, directory not yet fsynced)") { c in
            try c.fs.makeDirectory(c.directory, mode: 0o700)
            try c.fs.syncDirectory(parentDirectory(of: c.directory))
            for name in ["turns.jsonl", "lock"] {
                try c.fs.close(try c.fs.open(c.directory + "/" + name, [.write, .create, .exclusive, .noFollow], mode: 0o600))
            }
        },
        WorkloadStep(name: "open (finds the log there)") { c in c.outbox = try Outbox.open(directory: c.directory, fileSystem: c.fs, clock: c.clock) },
        WorkloadStep(name: "create conversation c1") { c in _ = try c.o().createConversation(id: "c1", title: "Trip", originSurface: "cli") },
        WorkloadStep(name: "enqueue t1 (text only)") { c in try send(c, "t1", "first") },
        WorkloadStep(name: "enqueue t2 (unique 1500-byte attachment A)") { c in
            try send(c, "t2", "second", [AttachmentSource(bytes: blobA, name: "a.bin")])
        },
        WorkloadStep(name: "enqueue t3 (A again, shared, and B)") { c in
            try send(c, "t3", "third", [AttachmentSource(bytes: blobA, name: "a-copy.bin"), AttachmentSource(bytes: blobB, name: "b.txt")])
        },
        WorkloadStep(name: "t1 syncing") { c in try c.o().apply(.syncing("t1")) },
        WorkloadStep(name: "t1 synced") { c in try c.o().apply(.synced("t1", answer)) },
        WorkloadStep(name: "t1 reply") { c in try c.o().apply(.reply("t1", status: "answered", text: "echo: first", error: nil)) },
        WorkloadStep(name: "t2 syncing, then failed (retry later)") { c in
            try c.o().apply([.syncing("t2"), .failed("t2", error: "engine unreachable", nextAttemptAt: "2030-01-01T00:00:00.000Z", spendsAttempt: true)])
        },
        WorkloadStep(name: "t3 syncing") { c in try c.o().apply(.syncing("t3")) },
        WorkloadStep(name: "t3 needs attention") { c in try c.o().apply(.needsAttention("t3", error: "422 attachment refused")) },
        WorkloadStep(name: "t3 retry") { c in try c.o().apply(.retry("t3")) },
        WorkloadStep(name: "create conversation c2") { c in _ = try c.o().createConversation(id: "c2", title: "Work", originSurface: "ios") },
        WorkloadStep(name: "enqueue t4 in c2 (file attachment C, unique)") { c in
            try send(c, "t4", "fourth", conversation: "c2", [AttachmentSource(file: c.sourceFile, name: "c.bin")])
        },
        WorkloadStep(name: "cancel t4 (sweeps C)") { c in try c.o().cancel("t4") },
        WorkloadStep(name: "retire t1") { c in _ = try c.o().retire(["t1"]) },
        WorkloadStep(name: "t2 syncing (left in flight)") { c in try c.o().apply(.syncing("t2")) },
        WorkloadStep(name: "reopen (recovery requeues t2)") { c in try c.reopen() },
        WorkloadStep(name: "a killed writer leaves half a line") { c in
            let fd = try c.fs.open(c.directory + "/turns.jsonl", [.write, .append, .noFollow], mode: 0o600)
            defer { try? c.fs.close(fd) }
            try c.fs.writeAll(fd, Array(#"{"v":1,"seq":99,"type":"turn","at":"2026-11-30T1"#.utf8))
        },
        WorkloadStep(name: "reopen (cuts the torn tail)") { c in try c.reopen() },
        WorkloadStep(name: "enqueue t5 (A again: the blob is already there)") { c in
            try send(c, "t5", "fifth", [AttachmentSource(bytes: blobA, name: "a.bin")])
        },
        WorkloadStep(name: "compact") { c in _ = try c.o().compact() },
        WorkloadStep(name: "enqueue t6 (unique attachment D)") { c in
            try send(c, "t6", "sixth", [AttachmentSource(bytes: blobD, name: "d.bin")])
        },
        WorkloadStep(name: "t6 syncing and synced") { c in try c.o().apply([.syncing("t6"), .synced("t6", answer)]) },
        WorkloadStep(name: "reset --force") { c in
            let before = c.expectation()
            c.outbox = nil
            let report = try Outbox.reset(directory: c.directory, force: true, fileSystem: c.fs, clock: c.clock)
            c.damagedLog = report.damagedLog
            for (id, r) in before.turns {
                if case .main(let p) = r { c.keepsake[id] = .keepsake(p) }
            }
            try c.reopen()
        },
        WorkloadStep(name: "salvage") { c in
            guard let log = c.damagedLog else { throw StoreError.notFound("workload: no damaged log to salvage") }
            _ = try c.o().salvage(from: log)
        },
        WorkloadStep(name: "enqueue t7 after salvage") { c in try send(c, "t7", "seventh", [AttachmentSource(bytes: blobB, name: "b.txt")]) },
    ]
}

extension StoreWorkload {
    /// A seeded random workload: open, a conversation, then `count` steps each picking an
    /// operation the current state allows (enqueue with new, shared or file attachments of
    /// random sizes, every transition, reply, retire, cancel, reopen, compaction, a killed
    /// writer's torn tail). Deterministic for a seed.
    static func random(count: Int) -> [WorkloadStep] {
        var steps = [steps[1], steps[2]]  // open, create conversation c1
        for i in 0..<count {
            steps.append(WorkloadStep(name: "random step \(i + 1)") { c in try randomAction(c) })
        }
        return steps
    }

    static func randomAction(_ c: WorkloadContext) throws {
        let o = try c.o()
        let live = o.turns.filter(\.isLive)
        func pick(_ ok: (Turn) -> Bool) -> Turn? {
            let xs = live.filter(ok)
            return xs.isEmpty ? nil : xs[c.next(xs.count)]
        }
        func act(_ what: String, _ body: () throws -> Void) rethrows { c.lastAction = what; try body() }
        let roll = c.next(100)
        if roll >= 35 && roll < 50, let t = pick({ $0.state == .queued }) { return try act("\(t.id) syncing") { try o.apply(.syncing(t.id)) } }
        if roll >= 50 && roll < 58, let t = pick({ $0.state == .syncing }) { return try act("\(t.id) synced") { try o.apply(.synced(t.id, answer)) } }
        if roll >= 58 && roll < 62, let t = pick({ $0.state == .syncing }) {
            return try act("\(t.id) failed") { try o.apply(.failed(t.id, error: "timeout", nextAttemptAt: "2030-01-01T00:00:00.000Z", spendsAttempt: c.next(2) == 0)) }
        }
        if roll >= 62 && roll < 66, let t = pick({ $0.state == .syncing || $0.state == .queued }) {
            return try act("\(t.id) needs attention") { try o.apply(.needsAttention(t.id, error: "refused")) }
        }
        if roll >= 66 && roll < 70, let t = pick({ $0.state == .failedNeedsAttention }) { return try act("\(t.id) retry") { try o.apply(.retry(t.id)) } }
        if roll >= 70 && roll < 74, let t = pick({ $0.state == .synced && $0.reply == nil }) {
            return try act("\(t.id) reply") { try o.apply(.reply(t.id, status: "answered", text: "ok \(t.id)", error: nil)) }
        }
        if roll >= 74 && roll < 80, let t = pick({ $0.state == .synced }) { return try act("retire \(t.id)") { _ = try o.retire([t.id]) } }
        if roll >= 80 && roll < 85, let t = pick({ ($0.state == .queued || $0.state == .failedNeedsAttention) && !$0.mayHaveLanded }) {
            return try act("cancel \(t.id)") { try o.cancel(t.id) }
        }
        if roll >= 85 && roll < 89 { return try act("reopen") { try c.reopen() } }
        if roll >= 89 && roll < 92 { return try act("compact") { _ = try o.compact() } }
        if roll >= 92 && roll < 94 {
            return try act("a killed writer's torn tail, then reopen") {
                let fd = try c.fs.open(c.directory + "/turns.jsonl", [.write, .append, .noFollow], mode: 0o600)
                try c.fs.writeAll(fd, Array(#"{"v":1,"seq":1,"type":"state","at":"#.utf8) + [UInt8](repeating: 0, count: c.next(700)))
                try c.fs.close(fd)
                try c.reopen()
            }
        }
        // Enqueue: 0–3 attachments, from a shared pool, fresh random bytes, or the source file.
        c.counter += 1
        let id = "r\(c.counter)"
        var attachments: [AttachmentSource] = []
        for n in 0..<c.next(4) {
            switch c.next(4) {
            case 0: attachments.append(AttachmentSource(bytes: [blobA, blobB, blobD][c.next(3)], name: "pool\(n).bin"))
            case 1: attachments.append(AttachmentSource(file: c.sourceFile, name: "c\(n).bin"))
            default:
                let size = 1 + c.next(2500)
                attachments.append(AttachmentSource(bytes: (0..<size).map { _ in UInt8(c.next(256)) }, name: "u\(n).bin"))
            }
        }
        try act("enqueue \(id) with \(attachments.count) attachment(s)") {
            try o.enqueue(TurnDraft(requestID: id, conversationID: "c1", text: "random \(id)", attachments: attachments, surface: "cli"))
        }
    }
}

/// Opens a crashed outbox with the real store and holds it to what was acknowledged.
enum PromiseChecker {
    struct Outcome {
        var problems: [String] = []
        var falseSeal = false
        var lost = false
    }

    /// `acceptable` lists what was acknowledged before the operation in flight, the states each
    /// prefix of its records would leave, and what it would acknowledge (a single entry when
    /// nothing was in flight). The recovered outbox must match one of them as a whole.
    static func check(outbox directory: String, acceptable: [Expectation], sealIsExpected: Bool = false) -> Outcome {
        var out = Outcome()
        let fs = PosixFileSystem()
        let o: Outbox
        do { o = try Outbox.open(directory: directory) } catch {
            out.problems.append("open failed: \(error)")
            out.lost = true
            return out
        }
        if let s = o.sealed, !sealIsExpected {
            out.falseSeal = true
            out.problems.append("false seal: \(s)")
            return out
        }
        let scan = LogScanner.scan(fileBytes(o.paths.log))
        if o.sealed == nil && (scan.corruption != nil || scan.tail != .clean) {
            out.problems.append("the log does not scan clean after recovery: \(String(describing: scan.corruption)) \(scan.tail)")
        }
        // Keepsakes of a reset: every turns.damaged-*/ with a log.
        var keepsakes: [(dir: String, turns: [String: Turn])] = []
        for name in (try? fs.listDirectory(directory)) ?? [] where name.hasPrefix("turns.damaged-") {
            let k = directory + "/" + name
            guard fs.exists(k + "/turns.jsonl"), let ko = try? Outbox.open(directory: k, mode: .readOnly) else { continue }
            keepsakes.append((k, Dictionary(uniqueKeysWithValues: ko.turns.map { ($0.id, $0) })))
        }
        let mainBlobs = BlobStore(directory: o.paths.blobs, fileSystem: fs)
        func blobsOK(_ t: Turn, in dirs: [String]) -> Bool {
            t.attachments.allSatisfy { a in
                dirs.contains { d in (try? BlobStore(directory: d, fileSystem: fs).verify(a.sha256)) == true }
            }
        }
        let main = Dictionary(uniqueKeysWithValues: o.turns.map { ($0.id, $0) })
        func satisfies(_ id: String, _ r: Requirement?) -> Bool {
            let t = main[id]
            switch r {
            case nil: return t == nil
            case .dead?: return t == nil || !t!.isLive
            case .main(let p)?:
                guard let t, t.isLive, TurnProjection(t) == p else { return false }
                return blobsOK(t, in: [mainBlobs.directory])
            case .keepsake(let p)?:
                guard t == nil else { return false }
                return keepsakes.contains { k in
                    guard let kt = k.turns[id], TurnProjection(kt) == p else { return false }
                    return blobsOK(kt, in: [k.dir + "/blobs", mainBlobs.directory])
                }
            }
        }
        func mismatches(_ e: Expectation) -> [String] {
            var m: [String] = []
            for id in Set(e.turns.keys).union(main.keys).sorted() where !satisfies(id, e.turns[id]) {
                let found = main[id].map { "\(TurnProjection($0))" + ($0.isLive && !blobsOK($0, in: [mainBlobs.directory]) ? " (attachment missing or damaged)" : "") } ?? "absent"
                m.append("turn \(id): found \(found), acknowledged \(e.turns[id].map(\.description) ?? "absent")")
            }
            for c in e.conversations.sorted() where o.conversation(c) == nil { m.append("conversation \(c) is lost") }
            return m
        }
        let all = acceptable.map(mismatches)
        if !all.contains(where: \.isEmpty) {
            out.lost = true
            let closest = all.indices.min { all[$0].count < all[$1].count }!
            out.problems.append("matches none of the \(acceptable.count) acknowledged states; nearest (#\(closest)): " + all[closest].joined(separator: "; "))
        }
        return out
    }
}

final class Ticks: @unchecked Sendable {
    private let lock = NSLock()
    private var now: Int64 = 1_795_000_000_000
    func next() -> Int64 { lock.withLock { now += 1; return now } }
}
