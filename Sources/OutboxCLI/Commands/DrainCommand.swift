import Foundation
import OutboxFormat
import OutboxStore
import OutboxSync

enum DrainCommand {
    static let command = Command(spec: CommandSpec(name: "drain", flags: ["--watch"], options: ["--retention"]),
                                 summary: "deliver what is queued", help: Usage.drain, run: run)

    static func run(_ ctx: Context) throws -> ExitCode {
        try ctx.requireEngineToken()
        let outbox = try ctx.openUnsealed()
        let connection = try EngineConnection.open(ctx.settings)
        defer { connection.close() }
        let term = ctx.term
        let watch = ctx.args.has("--watch")
        var options = Drain.Options()
        options.replyWaitMillis = watch ? 0 : 10_000
        if let r = ctx.args.value("--retention") {
            guard let seconds = Double(r), seconds >= 0, seconds.isFinite else {
                throw CLIError.usage("--retention takes seconds, 0 or more (for example 0 to retire at once, 86400 for a day)")
            }
            options.retentionMillis = Int64(seconds * 1000)
        }
        var onEvent: (@Sendable (DrainEvent) -> Void)?
        if watch {
            onEvent = { @Sendable (e: DrainEvent) in term.out(stamp() + " " + describe(e)) }
        }
        let drain = Drain(outbox: outbox, client: connection.client(), options: options, onEvent: onEvent)
        let report: DrainReport
        do {
            if watch {
                // Refuse before announcing: a second watch must not say it is draining.
                if let running = try FileLock.acquire(outbox.paths.drainLock, .exclusive, wait: false, fileSystem: outbox.fileSystem) {
                    running.release()
                } else {
                    throw DrainError.alreadyRunning(lockPath: outbox.paths.drainLock)
                }
                let stop = DrainStop.onSignals()
                term.out(stamp() + " draining \(ctx.paths.directory) to \(connection.embedded ? "the embedded engine at " : "")\(connection.url); Ctrl-C stops")
                report = try drain.watch(stop: stop)
            } else {
                report = try drain.runOnce()
            }
        } catch DrainError.alreadyRunning(let path) {
            term.err("outbox: another drain is already delivering this outbox (it holds \(path)); it picks up new turns itself")
            return .ok
        }
        for line in summary(report) { term.out(line) }
        // A watch ends on SIGINT/SIGTERM: that is a clean stop, whatever the engine was doing.
        if watch { return .ok }
        if !report.engineReachable {
            term.err("outbox: the engine is unreachable (\(Delivery.shortEngineError(report.lastEngineError ?? "no answer"))); \(Render.count(report.pending, "turn")) \(Render.verb(report.pending, "stays", "stay")) queued and safe")
            return .failure
        }
        return report.needsAttention.isEmpty ? .ok : .failure
    }

    static func summary(_ r: DrainReport) -> [String] {
        var lines: [String] = []
        if !r.requeuedAtStart.isEmpty {
            lines.append("\(Render.count(r.requeuedAtStart.count, "turn")) left mid-send by an earlier drain went back to the queue; the engine was asked before any resend")
        }
        var parts = ["delivered \(r.delivered.count)"]
        if !r.replayed.isEmpty { parts.append("\(r.replayed.count) already on the engine (idempotent replay)") }
        if !r.foundByStatusCheck.isEmpty { parts.append("\(r.foundByStatusCheck.count) found on the engine by a status check, not resent") }
        parts.append("\(r.replies.count) repl\(r.replies.count == 1 ? "y" : "ies") recorded")
        if r.retired > 0 { parts.append("\(r.retired) retired") }
        lines.append(parts.joined(separator: ", "))
        for f in r.failed { lines.append("retry later: \(f.turnID): \(Delivery.shortEngineError(f.error))" + (f.nextAttemptAt.map { " (next attempt \(Render.until($0)))" } ?? "")) }
        for f in r.needsAttention { lines.append("needs attention: \(f.turnID): \(Delivery.peopleWords(f.error)) — `outbox retry \(f.turnID)` once fixed") }
        for (turn, blocker) in r.blockedBehind.sorted(by: { $0.key < $1.key }) { lines.append("held back: \(turn) waits for \(blocker) (same conversation, order kept)") }
        var tail = "\(r.pending) queued"
        if r.awaitingReply > 0 { tail += ", \(r.awaitingReply) awaiting a reply" }
        if let n = r.nextAttemptAt { tail += ", next attempt \(Render.until(n))" }
        lines.append(tail)
        return lines
    }

    static func stamp() -> String {
        let ts = Timestamp.format(millis: Render.nowMillis())
        return String(ts.dropFirst(11).prefix(8))
    }

    static func describe(_ e: DrainEvent) -> String {
        switch e {
        case .sending(let id, let attempt): return "sending \(id) (attempt \(attempt))"
        case .delivered(let id, let how):
            switch how {
            case "replayed": return "delivered \(id) (the engine already had it: idempotent replay)"
            case "foundByStatusCheck": return "delivered \(id) (found on the engine by a status check; not resent)"
            default: return "delivered \(id)"
            }
        case .thinking(let id): return "waiting for the reply to \(id)"
        case .reply(let id, let status, let text, let error):
            return status == "answered" ? "reply to \(id): \(Render.clip(text ?? "", 80))" : "reply to \(id) \(status): \(error ?? "")"
        case .failed(let id, let error, let next): return "retry later \(id): \(Delivery.shortEngineError(error)) (next attempt \(Render.until(next)))"
        case .needsAttention(let id, let error): return "needs attention \(id): \(Delivery.peopleWords(error))"
        case .engineUnreachable(let error, let next): return "engine unreachable: \(Delivery.shortEngineError(error)) (next try \(Render.until(next)))"
        case .engineReachable: return "engine reachable again"
        }
    }
}
