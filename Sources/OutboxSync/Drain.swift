import Foundation
import enum EngineProtocol.ErrorCode
import OutboxFormat
import OutboxIO
import OutboxStore

public enum DrainError: Error, Sendable, CustomStringConvertible {
    /// Another process holds the drain lock: a drain is already delivering this outbox.
    case alreadyRunning(lockPath: String)

    public var description: String {
        switch self {
        case .alreadyRunning(let p):
            return "another drain is already delivering this outbox (it holds \(p)); turns you enqueue are picked up by it"
        }
    }
}

/// Asks a running drain to stop after the request in flight, leaving no turn `syncing` that it
/// could settle. `onSignals()` wires it to SIGINT and SIGTERM.
public final class DrainStop: @unchecked Sendable {
    private let mutex = NSLock()
    private var requested = false
    private var wakers: [@Sendable () -> Void] = []
    private var sources: [DispatchSourceSignal] = []

    public init() {}

    public var isRequested: Bool { mutex.withLock { requested } }

    public func request() {
        let ws: [@Sendable () -> Void] = mutex.withLock { requested = true; return wakers }
        for w in ws { w() }
    }

    func onRequest(_ wake: @escaping @Sendable () -> Void) {
        let already: Bool = mutex.withLock { wakers.append(wake); return requested }
        if already { wake() }
    }

    /// A stop that SIGINT or SIGTERM requests (their default action is replaced for the process).
    public static func onSignals(_ signals: [Int32] = [SIGINT, SIGTERM]) -> DrainStop {
        let stop = DrainStop()
        let queue = DispatchQueue(label: "outbox.drain.signals")
        for s in signals {
            signal(s, SIG_IGN)
            let src = DispatchSource.makeSignalSource(signal: s, queue: queue)
            src.setEventHandler { stop.request() }
            src.resume()
            stop.sources.append(src)
        }
        return stop
    }
}

/// Delivers an outbox's turns to an engine, exactly once in effect (docs/DRAIN.md,
/// docs/DURABILITY.md D1–D9). One drain per outbox across processes: `runOnce` and `watch` hold
/// `drain.lock` while they run. Not for concurrent use from several threads.
public final class Drain: @unchecked Sendable {
    public struct Options: Sendable {
        public var retry = RetryPolicy()
        /// Synced turns with a recorded reply are retired this long after the reply (0: at once).
        public var retentionMillis: Int64 = 24 * 3_600_000
        /// Turns per pass: their `syncing` records share one fdatasync, their outcomes another.
        public var batchSize = 64
        /// Conversations delivered side by side within a pass (each strictly in order).
        public var parallelConversations = 4
        /// Reply polling backoff: base·2^k, capped.
        public var replyPollBaseMillis: Int64 = 50
        public var replyPollCapMillis: Int64 = 30_000
        /// `runOnce`: how long to keep polling for the replies of turns it delivered (0: one look).
        public var replyWaitMillis: Int64 = 0
        public init() {}
    }

    public let outbox: Outbox
    public let client: EngineClient
    public let options: Options
    let clock: @Sendable () -> Int64
    let random: @Sendable () -> Double
    let sleep: @Sendable (Int64) -> Void
    /// Progress events, called on the drain's thread.
    public var onEvent: (@Sendable (DrainEvent) -> Void)?

    private var replyPolls: [String: (count: Int, at: Int64)] = [:]
    private var knownBlobs: Set<String> = []
    var requests = 0
    var uploads = 0

    public init(outbox: Outbox, client: EngineClient, options: Options = Options(),
                clock: @escaping @Sendable () -> Int64 = Journal.systemClock,
                random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
                sleep: @escaping @Sendable (Int64) -> Void = { ms in if ms > 0 { usleep(useconds_t(min(ms, 60_000) * 1000)) } },
                onEvent: (@Sendable (DrainEvent) -> Void)? = nil) {
        self.outbox = outbox; self.client = client; self.options = options
        self.clock = clock; self.random = random; self.sleep = sleep; self.onEvent = onEvent
    }

    // MARK: - entry points

    /// Delivers every turn that is due, records the replies that are there (waiting up to
    /// `replyWaitMillis` for the ones it delivered), retires what the retention allows, and
    /// returns. Stops early when the engine is unreachable. Throws `DrainError.alreadyRunning`
    /// when another drain holds the lock, and store errors (the store refused a write).
    public func runOnce(stop: DrainStop? = nil) throws -> DrainReport {
        let lock = try acquire()
        defer { lock.release() }
        let requestsAtStart = requests
        var report = try requeueInterrupted()
        var down = false
        while !(stop?.isRequested ?? false) {
            let (r, more) = try deliverPass(ignoreBackoff: false, stop: stop)
            report.merge(r)
            if !r.engineReachable { down = true; break }
            // Another pass only while passes settle turns: a Retry-After of 0 must not spin.
            if !more || r.settled == 0 { break }
        }
        if !down {
            let deadline = clock() + options.replyWaitMillis
            let mine = Set(report.delivered + report.replayed + report.foundByStatusCheck)
            while true {
                let r = try pollReplies(force: true, only: nil)
                report.merge(r)
                if !r.engineReachable || (stop?.isRequested ?? false) { break }
                let waiting = outbox.turns.filter { mine.contains($0.id) && $0.state == .synced && $0.reply == nil }
                let now = clock()
                if waiting.isEmpty || now >= deadline { break }
                let next = waiting.compactMap { replyPolls[$0.id]?.at }.min() ?? now
                sleep(max(1, min(next, deadline) - now))
            }
        }
        report.retired += try retireDue()
        finish(&report)
        report.requests = requests - requestsAtStart
        report.stopped = stop?.isRequested ?? false
        return report
    }

    /// Runs until `stop` is requested: wakes when the outbox directory changes (inotify), when a
    /// turn's next attempt or a reply poll falls due, and probes the engine's health on the
    /// backoff while it is unreachable. Returns the totals.
    public func watch(stop: DrainStop) throws -> DrainReport {
        let lock = try acquire()
        defer { lock.release() }
        let watcher = try DirectoryWatch(directory: outbox.paths.directory)
        stop.onRequest { watcher.wake() }
        let requestsAtStart = requests
        var report = try requeueInterrupted()
        var engineDownUntil: Int64?
        var probes = 0
        var ignoreBackoff = false
        while !stop.isRequested {
            let now = clock()
            if let until = engineDownUntil {
                if now >= until {
                    do {
                        requests += 1
                        _ = try client.health()
                        engineDownUntil = nil; probes = 0; ignoreBackoff = true
                        report.engineReachable = true
                        emit(.engineReachable)
                        continue
                    } catch {
                        probes += 1
                        let next = now + options.retry.delay(afterAttempt: probes, unit: random())
                        engineDownUntil = next
                        report.lastEngineError = error.description
                        emit(.engineUnreachable(error: error.description, nextProbeAt: Timestamp.format(millis: next)))
                    }
                }
            } else {
                var down: EngineError?
                while !stop.isRequested {
                    let (r, more) = try deliverPass(ignoreBackoff: ignoreBackoff, stop: stop)
                    report.merge(r)
                    if !r.engineReachable { down = lastDown; break }
                    ignoreBackoff = false
                    if !more || r.settled == 0 { break }
                }
                if down == nil && !stop.isRequested {
                    let r = try pollReplies(force: false, only: nil)
                    report.merge(r)
                    if !r.engineReachable { down = lastDown }
                }
                if down == nil { report.retired += try retireDue() }
                if let d = down {
                    probes = 1
                    let next = clock() + options.retry.delay(afterAttempt: probes, unit: random())
                    engineDownUntil = next
                    emit(.engineUnreachable(error: d.description, nextProbeAt: Timestamp.format(millis: next)))
                }
            }
            if stop.isRequested { break }
            // Sleep until something falls due, the directory changes, or a stop. While the engine
            // is down only the probe matters (turns put off are due at once: they must not spin).
            let wakeAt = engineDownUntil
                ?? [nextDueAt(), replyPolls.values.map(\.at).min(), nextRetireAt()].compactMap { $0 }.min()
            // At least 20 ms: a turn due again at once (Retry-After: 0, 409) is retried, not spun on.
            let timeout = wakeAt.map { Int(max(20, min($0 - clock(), 60_000))) } ?? 60_000
            let woke = try watcher.wait(timeoutMillis: timeout)
            if woke.contains(.changed) { try outbox.refresh() }
        }
        finish(&report)
        report.requests = requests - requestsAtStart
        report.stopped = true
        return report
    }

    // MARK: - steps

    private var lastDown: EngineError?

    private func acquire() throws -> FileLock {
        guard let lock = try FileLock.acquire(outbox.paths.drainLock, .exclusive, wait: false, fileSystem: outbox.fileSystem) else {
            throw DrainError.alreadyRunning(lockPath: outbox.paths.drainLock)
        }
        return lock
    }

    /// D0: with the lock held, any turn still `syncing` was left by a drain that died mid-attempt.
    private func requeueInterrupted() throws -> DrainReport {
        try outbox.refresh()
        var report = DrainReport()
        let stuck = outbox.turns.filter { $0.state == .syncing }.map(\.id)
        if !stuck.isEmpty {
            try outbox.apply(stuck.map { .requeue($0, reason: "interrupted: found syncing when the drain started; the engine is asked before any resend") })
            report.requeuedAtStart = stuck
        }
        return report
    }

    private enum Outcome {
        case posted(TurnPostResult)
        case found(EngineTurnStatus)
    }

    /// An attachment the outbox cannot read: retrying cannot fix it.
    private struct LocalAttachmentError: Error, CustomStringConvertible {
        var description: String
    }

    /// One pass: plan a batch, record `syncing` for all of it (one fdatasync), deliver it in
    /// order per conversation, record every outcome (one fdatasync). Returns whether more due
    /// turns remain.
    private func deliverPass(ignoreBackoff: Bool, stop: DrainStop?) throws -> (DrainReport, more: Bool) {
        try outbox.refresh()
        var report = DrainReport()
        let now = clock()
        let plan = DrainPlan.make(turns: outbox.turns, now: now, limit: options.batchSize, ignoreBackoff: ignoreBackoff)
        report.blockedBehind = plan.blockedBehind
        if plan.count == 0 { return (report, false) }
        let uploadsBefore = uploads

        // D1: every attempt is durable before its request goes out.
        try outbox.apply(plan.groups.flatMap { $0 }.map { .syncing($0.id) })

        // D3 (attachments): each blob the batch needs, once, before the turns that name it.
        blobFailures = uploadBlobs(for: plan.groups.flatMap { $0 })

        // Conversations go out side by side (each strictly in order on its own thread), so the
        // engine can commit several turns under one fsync; outcomes are merged in plan order.
        let shared = PassShared()
        var outcomes = [GroupOutcome](repeating: GroupOutcome(), count: plan.groups.count)
        let width = max(1, min(options.parallelConversations, plan.groups.count))
        if width == 1 {
            for (i, g) in plan.groups.enumerated() { outcomes[i] = runGroup(g, shared, stop) }
        } else {
            let collect = NSLock()
            let everyone = DispatchGroup()
            let box = OutcomeBox(outcomes)
            for _ in 0..<width {
                everyone.enter()
                Thread { [self] in
                    while true {
                        let i: Int = collect.withLock { defer { box.next += 1 }; return box.next }
                        if i >= plan.groups.count { break }
                        let o = runGroup(plan.groups[i], shared, stop)
                        collect.withLock { box.items[i] = o }
                    }
                    everyone.leave()
                }.start()
            }
            everyone.wait()
            outcomes = box.items
        }
        var results: [Transition] = []
        for o in outcomes {
            results += o.results
            report.merge(o.report)
        }
        let down = shared.down
        // D4: every outcome of the pass in one write and one fdatasync.
        try outbox.apply(results)
        report.blobsUploaded = uploads - uploadsBefore
        if let d = down {
            lastDown = d
            report.engineReachable = false
            report.lastEngineError = d.description
        }
        let more = DrainPlan.make(turns: outbox.turns, now: clock(), limit: 1).count > 0
        return (report, more && down == nil)
    }

    private struct GroupOutcome {
        var results: [Transition] = []
        var report = DrainReport()
    }

    private final class OutcomeBox: @unchecked Sendable {
        var items: [GroupOutcome]
        var next = 0
        init(_ i: [GroupOutcome]) { items = i }
    }

    /// What the groups of one pass share: the first "engine unreachable", which puts off the rest.
    private final class PassShared: @unchecked Sendable {
        private let lock = NSLock()
        private var _down: EngineError?
        var down: EngineError? { lock.withLock { _down } }
        func markDown(_ e: EngineError) { lock.withLock { if _down == nil { _down = e } } }
    }

    /// One conversation's turns of a pass, strictly in order (D2, D5).
    private func runGroup(_ group: [Turn], _ shared: PassShared, _ stop: DrainStop?) -> GroupOutcome {
        var out = GroupOutcome()
        var hold: String?
        func heldByPass() -> String? {
            if shared.down != nil { return "not sent: the engine is unreachable" }
            if stop?.isRequested ?? false { return "not sent: the drain was stopped" }
            return nil
        }
        if let conv = outbox.conversation(group[0].conversationID), !conv.isOnEngine, heldByPass() == nil {
            // D2: the conversation exists on the engine before any of its turns.
            do {
                bump(\.requests)
                let origin = try client.createConversation(id: conv.id, title: conv.title, originSurface: conv.originSurface,
                                                           createdAt: conv.createdAt)
                out.results.append(.conversationSynced(conv.id, originSurface: origin))
                out.report.conversationsSynced.append(conv.id)
            } catch {
                let (tr, isDown) = failure(group[0], error, &out.report)
                out.results.append(tr)
                if isDown { shared.markDown(error) }
                let h = "not sent: conversation \(conv.id) could not be created on the engine"
                for t in group.dropFirst() { out.results.append(deferral(t, h, now: clock())) }
                return out
            }
        }
        for t in group {
            if hold == nil { hold = heldByPass() }
            if let h = hold { out.results.append(deferral(t, h, now: clock())); continue }
            emit(.sending(turnID: t.id, attempt: t.attempt + 1))
            do {
                switch try deliver(t) {
                case .posted(let r):
                    out.results.append(.synced(t.id, EngineAnswer(httpStatus: r.httpStatus, status: r.status, replayed: r.replayed)))
                    if r.replayed { out.report.replayed.append(t.id) } else { out.report.delivered.append(t.id) }
                    emit(.delivered(turnID: t.id, how: r.replayed ? "replayed" : "delivered"))
                    emit(.thinking(turnID: t.id))
                case .found(let s):
                    out.results.append(.synced(t.id, EngineAnswer(httpStatus: 200, status: s.status, replayed: true)))
                    out.report.foundByStatusCheck.append(t.id)
                    emit(.delivered(turnID: t.id, how: "foundByStatusCheck"))
                    if s.hasReply {
                        out.results.append(.reply(t.id, status: s.status, text: s.replyText, error: s.replyError))
                        out.report.replies.append(t.id)
                        emit(.reply(turnID: t.id, status: s.status, text: s.replyText, error: s.replyError))
                    } else {
                        emit(.thinking(turnID: t.id))
                    }
                }
            } catch {
                let (tr, isDown) = failure(t, error, &out.report)
                out.results.append(tr)
                if isDown, let e = error as? EngineError { shared.markDown(e) }
                if let e = error as? EngineError, e.httpStatus == 424 {
                    // The engine lost a blob we thought it had: look again next attempt.
                    counters.withLock { for a in t.attachments { knownBlobs.remove(a.sha256) } }
                }
                // D5: strict order: nothing after a failed turn of this conversation goes out.
                hold = "not sent: waiting for turn \(t.id) of this conversation"
            }
        }
        return out
    }

    private let counters = NSLock()
    private func bump(_ k: ReferenceWritableKeyPath<Drain, Int>) { counters.withLock { self[keyPath: k] += 1 } }

    private var blobFailures: [String: any Error] = [:]

    /// HEAD each blob the batch names (once), PUT it when the engine lacks it. Returns the
    /// failures by hash; the turns naming a failed blob fail with its error. Stops at the first
    /// "unreachable": the remaining blobs get the same error.
    private func uploadBlobs(for turns: [Turn]) -> [String: any Error] {
        var failures: [String: any Error] = [:]
        var down: (any Error)?
        var seen = Set<String>()
        for t in turns {
            for a in t.attachments where !counters.withLock({ knownBlobs.contains(a.sha256) }) && seen.insert(a.sha256).inserted {
                if let d = down { failures[a.sha256] = d; continue }
                do {
                    bump(\.requests)
                    if try !client.hasBlob(a.sha256) {
                        let bytes: [UInt8]
                        do { bytes = try outbox.readBlob(a.sha256) } catch {
                            throw LocalAttachmentError(description: "attachment \(a.name) (\(a.sha256)) cannot be read from \(outbox.blobPath(a.sha256)): \(error)")
                        }
                        guard SHA256.hex(bytes) == a.sha256 else {
                            throw LocalAttachmentError(description: "attachment \(a.name) at \(outbox.blobPath(a.sha256)) does not match its hash; the file is damaged")
                        }
                        bump(\.requests)
                        try client.putBlob(a.sha256, bytes: bytes)
                        bump(\.uploads)
                    }
                    _ = counters.withLock { knownBlobs.insert(a.sha256) }
                } catch {
                    failures[a.sha256] = error
                    if let e = error as? EngineError, e.isTransport { down = e }
                }
            }
        }
        return failures
    }

    /// Status check first when the turn may have landed; attachments; then the POST.
    private func deliver(_ t: Turn) throws -> Outcome {
        if t.mayHaveLanded {
            bump(\.requests)
            if let s = try client.turnStatus(t.id) {
                guard s.conversationID == t.conversationID else {
                    throw LocalAttachmentError(description: "the engine holds request id \(t.id) in conversation \(s.conversationID), not \(t.conversationID); a new message needs a new id")
                }
                return .found(s)
            }
        }
        for a in t.attachments {
            if let e = blobFailures[a.sha256] { throw e }
        }
        do {
            return .posted(try post(t))
        } catch {
            guard let e = error as? EngineError else { throw error }
            guard e.httpStatus == 404, e.code == ErrorCode.conversationNotFound, let conv = outbox.conversation(t.conversationID) else {
                throw PostRejected.ifRejection(e)
            }
            // Every conversation in an outbox was created by this client, so an engine that does
            // not know it (a new engine, a reset one) is told again — the creation is idempotent.
            try recreate(conv)
            return try postAgain(t)
        }
    }

    private func post(_ t: Turn) throws -> TurnPostResult {
        bump(\.requests)
        return try client.postTurn(conversationID: t.conversationID, requestID: t.id, text: t.text, attachments: t.attachments,
                                   createdAt: t.createdAt, surface: t.surface)
    }

    private func recreate(_ conv: OutboxStore.Conversation) throws {
        bump(\.requests)
        _ = try client.createConversation(id: conv.id, title: conv.title, originSurface: conv.originSurface, createdAt: conv.createdAt)
    }

    private func postAgain(_ t: Turn) throws -> Outcome {
        let result: TurnPostResult
        do { result = try post(t) } catch {
            if let e = error as? EngineError { throw PostRejected.ifRejection(e) }
            throw error
        }
        return .posted(result)
    }

    /// D3: the transition a failed attempt records, and whether the engine was unreachable.
    private func failure(_ t: Turn, _ error: Error, _ report: inout DrainReport) -> (Transition, Bool) {
        let attempt = t.attempt + 1
        // A refusal of the POST itself means the engine does not hold the turn.
        let rejected = error is PostRejected
        let error = (error as? PostRejected)?.error ?? error
        let message = "\(error)"
        report.lastEngineError = message
        guard let e = error as? EngineError else {
            report.needsAttention.append(.init(turnID: t.id, error: message, nextAttemptAt: nil, attempt: attempt))
            emit(.needsAttention(turnID: t.id, error: message))
            return (.needsAttention(t.id, error: message), false)
        }
        switch FailureDisposition.classify(e) {
        case .needsAttention:
            report.needsAttention.append(.init(turnID: t.id, error: message, nextAttemptAt: nil, attempt: attempt))
            emit(.needsAttention(turnID: t.id, error: message))
            return (rejected ? .rejected(t.id, error: message) : .needsAttention(t.id, error: message), false)
        case .retryLater(let spends, let retryAfter, let engineDown):
            if spends && attempt >= options.retry.attemptLimit {
                let m = "gave up after \(attempt) attempts; last error: \(message)"
                report.needsAttention.append(.init(turnID: t.id, error: m, nextAttemptAt: nil, attempt: attempt))
                emit(.needsAttention(turnID: t.id, error: m))
                return (.needsAttention(t.id, error: m), engineDown)
            }
            let n = spends ? attempt : max(1, attempt - 1)
            let next = Timestamp.format(millis: clock() + options.retry.delay(afterAttempt: n, unit: random(), retryAfterMillis: retryAfter))
            report.failed.append(.init(turnID: t.id, error: message, nextAttemptAt: next, attempt: spends ? attempt : attempt - 1))
            emit(.failed(turnID: t.id, error: message, nextAttemptAt: next))
            return (.failed(t.id, error: message, nextAttemptAt: next, spendsAttempt: spends), engineDown)
        }
    }

    /// A turn marked `syncing` in this pass but not sent: back to queued, no attempt spent.
    private func deferral(_ t: Turn, _ why: String, now: Int64) -> Transition {
        .failed(t.id, error: why, nextAttemptAt: Timestamp.format(millis: now), spendsAttempt: false)
    }

    /// D6: replies for synced turns, polled on a backoff per turn; one request per conversation
    /// when several of its turns wait. `force` polls every waiting turn now.
    private func pollReplies(force: Bool, only: Set<String>?) throws -> DrainReport {
        try outbox.refresh()
        var report = DrainReport()
        let now = clock()
        let waiting = outbox.turns.filter { $0.state == .synced && $0.reply == nil && (only?.contains($0.id) ?? true) }
        let live = Set(waiting.map(\.id))
        replyPolls = replyPolls.filter { live.contains($0.key) }
        let due = waiting.filter { force || (replyPolls[$0.id]?.at ?? Int64.min) <= now }
        if due.isEmpty { report.awaitingReply = waiting.count; return (report) }
        var byConversation: [String: [Turn]] = [:]
        var order: [String] = []
        for t in due {
            if byConversation[t.conversationID] == nil { order.append(t.conversationID) }
            byConversation[t.conversationID, default: []].append(t)
        }
        var results: [Transition] = []
        for c in order {
            let ts = byConversation[c]!
            var found: [String: EngineTurnStatus] = [:]
            do {
                requests += 1
                if ts.count == 1 {
                    if let s = try client.turnStatus(ts[0].id) { found[s.requestID] = s }
                } else {
                    for s in try client.conversationTurns(c) { found[s.requestID] = s }
                }
            } catch {
                report.lastEngineError = "\(error)"
                if error.isTransport {
                    lastDown = error
                    report.engineReachable = false
                    break
                }
                for t in ts { schedulePoll(t.id, now: now) }
                continue
            }
            for t in ts {
                if let s = found[t.id], s.hasReply {
                    results.append(.reply(t.id, status: s.status, text: s.replyText, error: s.replyError))
                    report.replies.append(t.id)
                    replyPolls[t.id] = nil
                    emit(.reply(turnID: t.id, status: s.status, text: s.replyText, error: s.replyError))
                } else {
                    schedulePoll(t.id, now: now)
                }
            }
        }
        try outbox.apply(results)
        report.awaitingReply = waiting.count - report.replies.count
        return report
    }

    private func schedulePoll(_ id: String, now: Int64) {
        let count = (replyPolls[id]?.count ?? 0) + 1
        let delay = min(options.replyPollBaseMillis << Int64(min(count - 1, 20)), options.replyPollCapMillis)
        replyPolls[id] = (count, now + delay)
    }

    /// D7: synced turns whose reply is recorded and older than the retention window.
    private func retireDue() throws -> Int {
        try outbox.refresh()
        let now = clock()
        let ids = outbox.turns.filter { t in
            guard t.state == .synced, let r = t.reply, let at = Timestamp.parse(r.at) else { return false }
            return at + options.retentionMillis <= now
        }.map(\.id)
        if ids.isEmpty { return 0 }
        return try outbox.retire(ids)
    }

    private func nextRetireAt() -> Int64? {
        outbox.turns.compactMap { t -> Int64? in
            guard t.state == .synced, let r = t.reply, let at = Timestamp.parse(r.at) else { return nil }
            return at + options.retentionMillis
        }.min()
    }

    private func nextDueAt() -> Int64? {
        let plan = DrainPlan.make(turns: outbox.turns, now: clock(), limit: 1)
        return plan.count > 0 ? clock() : plan.nextDueAt
    }

    private func finish(_ report: inout DrainReport) {
        try? outbox.refresh()
        let turns = outbox.turns
        let plan = DrainPlan.make(turns: turns, now: clock(), limit: Int.max)
        report.blockedBehind = plan.blockedBehind
        report.pending = turns.filter { $0.state == .queued || $0.state == .syncing }.count
        report.awaitingReply = turns.filter { $0.state == .synced && $0.reply == nil }.count
        let dues = turns.filter { $0.state == .queued && plan.blockedBehind[$0.id] == nil }.compactMap { $0.nextAttemptAt.flatMap(Timestamp.parse) }
        report.nextAttemptAt = dues.min().map { Timestamp.format(millis: $0) }
    }

    private func emit(_ e: DrainEvent) { onEvent?(e) }
}

/// The engine answered the POST of a turn with a refusal: it does not hold the turn, so the
/// turn is known not to have landed (it may be cancelled).
struct PostRejected: Error, CustomStringConvertible {
    var error: EngineError
    var description: String { "\(error)" }

    /// Wraps 4xx answers that mean "not taken"; 408, 409, 424 and 429 are not refusals.
    static func ifRejection(_ e: EngineError) -> Error {
        guard let s = e.httpStatus, (400..<500).contains(s), ![408, 409, 424, 429].contains(s) else { return e }
        return PostRejected(error: e)
    }
}
