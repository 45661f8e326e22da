import Foundation
import Synchronization
import Testing
import OutboxFormat
import OutboxIO
@testable import OutboxStore

/// The I/O-fault matrix (SQLite's SimulateIOError / SimulateDiskfullError): the store workload
/// runs once to record every file call it makes; then, for every call of an injectable kind,
/// it runs again in a fresh directory with that one call failing with EIO, then ENOSPC. For each:
/// the step either throws or succeeds; if it threw, its error names the call and the errno and
/// nothing it would have acknowledged is required; no partial line is left (the log scans clean,
/// or keeps only a tail that was there before, or the outbox is sealed); a failed fdatasync or
/// fsync of the log during an append seals; after a restart every acknowledged turn is there, and
/// an outbox that is not sealed takes the next turn.
@Suite struct IOFaultMatrixTests {
    static let injected: Set<FileOperation> = [.write, .fsync, .fdatasync, .rename, .open, .syncDirectory, .link, .unlink, .truncate, .makeDirectory]

    struct Call { var op: FileOperation; var path: String; var step: Int }

    struct Reference {
        var calls: [Call] = []
        /// Per step: what was acknowledged before it, each prefix of its records, and after it.
        var chains: [[Expectation]] = []
    }

    /// Records the file calls in order, and fails exactly one of them when asked.
    final class Injector: Sendable {
        struct State { var count = 0; var failAt: Int?; var code = Errno.io; var seen: [String] = []; var fired: String? }
        let state = Mutex(State())
        var rule: FaultInjectingFileSystem.Rule {
            { [self] op, path, _ in
                state.withLock { s -> Fault? in
                    defer { s.count += 1 }
                    if s.failAt == nil { s.seen.append("\(op.rawValue) \(path)") }
                    guard s.count == s.failAt else { return nil }
                    s.fired = "\(op.rawValue) \(path)"
                    return .fail(s.code)
                }
            }
        }
    }

    static func setUp(_ dir: TempDir, _ fs: any FileSystem) throws -> WorkloadContext {
        let source = dir.path + "/source-c.bin"
        writeBytes(source, StoreWorkload.blobC)
        return WorkloadContext(fs: fs, directory: dir.outbox, sourceFile: source)
    }

    static let reference: Result<Reference, any Error> = Result {
        let dir = TempDir("fault-matrix-reference")
        let injector = Injector()
        let fs = FaultInjectingFileSystem(rule: injector.rule)
        let context = try setUp(dir, fs)
        var ref = Reference()
        var acknowledged = Expectation()
        for (i, step) in StoreWorkload.steps.enumerated() {
            let logBefore = context.logOnDisk()
            let first = injector.state.withLock { $0.count }
            try step.run(context)
            let now = context.expectation()
            ref.chains.append([acknowledged] + context.intermediates(since: logBefore) + [now])
            acknowledged = now
            let seen = injector.state.withLock { $0.seen }
            for n in first..<seen.count {
                let parts = seen[n].split(separator: " ", maxSplits: 1)
                ref.calls.append(Call(op: FileOperation(rawValue: String(parts[0]))!, path: parts.count > 1 ? String(parts[1]) : "", step: i))
            }
        }
        return ref
    }

    @Test(arguments: [Errno.io, Errno.noSpace])
    func everyCallSiteFailing(_ code: Errno) throws {
        let started = Date()
        let ref = try Self.reference.get()
        let sites = ref.calls.indices.filter { Self.injected.contains(ref.calls[$0].op) }
        #expect(sites.count >= 200, "the workload must make enough calls for the matrix to mean anything")
        var threw = 0, succeeded = 0, sealed = 0, failures: [String] = []
        for k in sites {
            let call = ref.calls[k]
            let what = "\(code.name) at call \(k) (\(call.op.rawValue) \(lastComponent(of: call.path))) in \"\(StoreWorkload.steps[call.step].name)\""
            var problems = Self.run(failing: k, code, ref)
            if problems.list.contains(where: { $0.contains("not deterministic") }) {
                // A rare run takes another path before the fault (the harness's own variance,
                // not the store's); one rerun puts the fault where it was meant to go.
                problems = Self.run(failing: k, code, ref)
            }
            switch problems.outcome {
            case .threw: threw += 1
            case .succeeded: succeeded += 1
            }
            if problems.sealed { sealed += 1 }
            if !problems.list.isEmpty && failures.count < 15 { failures.append("\(what): " + problems.list.joined(separator: "; ")) }
        }
        for f in failures { Issue.record(Comment(rawValue: f)) }
        print("io-faults: \(code.name) injected at \(sites.count) call sites of \(ref.calls.count) calls: \(threw) threw, \(succeeded) succeeded, \(sealed) sealed, \(failures.count) problems, \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
        #expect(failures.isEmpty)
    }

    struct RunResult {
        enum Outcome { case threw, succeeded }
        var outcome = Outcome.succeeded
        var sealed = false
        var list: [String] = []
    }

    static func run(failing k: Int, _ code: Errno, _ ref: Reference) -> RunResult {
        var r = RunResult()
        let call = ref.calls[k]
        let dir = TempDir("fault-\(k)")
        let injector = Injector()
        injector.state.withLock { $0.failAt = k; $0.code = code }
        let fs = FaultInjectingFileSystem(rule: injector.rule)
        let context: WorkloadContext
        do { context = try setUp(dir, fs) } catch { r.list.append("setup: \(error)"); return r }
        for i in 0..<call.step {
            do { try StoreWorkload.steps[i].run(context) } catch {
                r.list.append("step \(i) failed before the fault was injected: \(error)")
                return r
            }
        }
        let log = dir.outbox + "/turns.jsonl"
        let tailBefore = LogScanner.scan(fileBytes(log)).tail
        var thrown: (any Error)?
        do { try StoreWorkload.steps[call.step].run(context) } catch { thrown = error }
        let fired = injector.state.withLock { $0.fired }
        guard let fired, fired.hasPrefix(call.op.rawValue + " ") else {
            r.list.append("the workload did not reach the same call (fired: \(fired ?? "nothing")); it is not deterministic")
            return r
        }
        let marker = FileManager.default.fileExists(atPath: log + ".sealed")
        r.sealed = marker || context.outbox?.sealed != nil
        if let thrown {
            r.outcome = .threw
            let text = "\(thrown)"
            if !(text.contains(code.name) && text.contains(call.op.rawValue)) {
                r.list.append("the error does not name the call and the errno: \(text)")
            }
        }
        // No partial line: clean, or only the tail that was there before, or sealed.
        let scan = LogScanner.scan(fileBytes(log))
        if !r.sealed && (scan.corruption != nil || (scan.tail != .clean && scan.tail != tailBefore)) {
            r.list.append("a partial line was left behind: \(scan.tail) \(String(describing: scan.corruption))")
        }
        // A failed sync of the log's appended lines seals (never retried and trusted). The sync
        // after a torn-tail cut is the exception: the open fails and the next one scans again.
        let previous = k > 0 ? ref.calls[k - 1] : nil
        if (call.op == .fdatasync || call.op == .fsync) && call.path.hasSuffix("/turns.jsonl") && previous?.op != .truncate && !r.sealed {
            r.list.append("a failed \(call.op.rawValue) of the log did not seal")
        }
        // Restart: what was acknowledged is there; what the failed step would have added is optional.
        context.outbox = nil
        let acceptable = thrown == nil ? [ref.chains[call.step].last!] : ref.chains[call.step]
        let check = PromiseChecker.check(outbox: dir.outbox, acceptable: acceptable, sealIsExpected: r.sealed)
        r.list += check.problems
        if !r.sealed && check.problems.isEmpty {
            do {
                let o = try Outbox.open(directory: dir.outbox)
                if o.conversation("c9") == nil { try o.createConversation(id: "c9", title: "after the fault", originSurface: "cli") }
                try o.enqueue(TurnDraft(requestID: "after-fault", conversationID: "c9", text: "still works",
                                        attachments: [AttachmentSource(bytes: StoreWorkload.blobA, name: "a.bin")], surface: "cli"))
            } catch {
                r.list.append("the outbox does not take a turn after the fault: \(error)")
            }
        }
        return r
    }
}

/// Bugs the matrix found, each pinned on its own.
@Suite struct IOFaultRegressionTests {
    /// Recovery at open took a failed read of a blob (EIO) for damage and durably moved a healthy
    /// queued turn to failedNeedsAttention, saying its file "does not match its hash".
    @Test(arguments: [Errno.io, Errno.noSpace])
    func anUnreadableAttachmentAtOpenIsNotCalledDamaged(_ code: Errno) throws {
        let dir = TempDir()
        let sha = SHA256.hex(StoreWorkload.blobA)
        do {
            let o = try Outbox.open(directory: dir.outbox)
            try o.send("t1", attachments: [AttachmentSource(bytes: StoreWorkload.blobA, name: "a.bin")])
        }
        let fs = FaultInjectingFileSystem(rule: { op, path, _ in op == .open && path.hasSuffix("/" + sha) ? .fail(code) : nil })
        let o = try Outbox.open(directory: dir.outbox, fileSystem: fs)
        #expect(o.turn("t1")?.state == .queued, "a read error is no evidence of damage")
        #expect(o.recoveryNotes.contains { $0.contains("could not check attachment a.bin of turn t1") && $0.contains(code.name) })
        let again = try Outbox.open(directory: dir.outbox)
        #expect(again.turn("t1")?.state == .queued && again.turn("t1")?.lastError == nil)
    }

    /// Salvage called an attachment it could not read "missing", skipped the turn and succeeded.
    @Test func salvageStopsOnAnUnreadableAttachmentAndCanBeRunAgain() throws {
        let dir = TempDir()
        let sha = SHA256.hex(StoreWorkload.blobA)
        do {
            let o = try Outbox.open(directory: dir.outbox)
            try o.send("t1", attachments: [AttachmentSource(bytes: StoreWorkload.blobA, name: "a.bin")])
        }
        let reset = try Outbox.reset(directory: dir.outbox, force: true)
        let fs = FaultInjectingFileSystem()
        let fresh = try Outbox.open(directory: dir.outbox, fileSystem: fs)
        fs.setRule { op, path, _ in op == .open && path.hasSuffix("/" + sha) ? .fail(.io) : nil }
        do {
            let r = try fresh.salvage(from: reset.damagedLog)
            Issue.record("salvage succeeded though it could not read an attachment: imported \(r.imported), missing \(r.missingAttachments.map(\.turn))")
        } catch {
            #expect("\(error)".contains("open") && "\(error)".contains("EIO") && "\(error)".contains("a.bin"))
        }
        fs.setRule(nil)
        #expect(try fresh.salvage(from: reset.damagedLog).imported == ["t1"])
        #expect(try fresh.readBlob(sha) == StoreWorkload.blobA)
    }

    /// "cannot read attachment X: EIO" did not say which call failed.
    @Test func anUnreadableSourceFileNamesTheCall() throws {
        let dir = TempDir()
        let source = dir.path + "/photo.jpg"
        writeBytes(source, StoreWorkload.blobC)
        let fs = FaultInjectingFileSystem(rule: { op, path, _ in op == .open && path == source ? .fail(.io) : nil })
        let o = try Outbox.open(directory: dir.outbox, fileSystem: fs)
        #expect {
            try o.send("t1", attachments: [AttachmentSource(file: source)])
        } throws: { error in
            "\(error)".contains("open \(source)") && "\(error)".contains("EIO")
        }
    }
}
