import Foundation
import OutboxFormat
import OutboxStore
import OutboxSync

/// `send` after the enqueue: run one drain (which delivers every due turn, this one included)
/// and wait for this turn's reply. If another drain is running, let it deliver and watch the log.
enum Delivery {
    /// Longest a send waits for the reply after the engine took the turn.
    static let replyWaitMillis: Int64 = 120_000

    struct Outcome {
        /// What happened to the engine connection, if the turn is not settled.
        var engineError: String?
        /// Another drain (e.g. `outbox drain --watch`) delivered it.
        var byOtherDrain = false
        var engineURL: String?
        var report: DrainReport?
        /// Still open: the caller prints the reply first, then closes it (stopping an embedded
        /// engine takes up to 100 ms).
        var connection: EngineConnection?

        var json: JSONValue {
            .object(["engine": .optional(engineURL), "engineError": .optional(engineError), "byOtherDrain": .bool(byOtherDrain)])
        }

        /// What a person should know when there is no reply to print.
        func sentence(turn t: Turn) -> String {
            switch t.state {
            case .queued, .syncing:
                let why = engineError.map { "the engine is unreachable (\($0))" } ?? "it was not sent yet"
                let next = t.nextAttemptAt.map { "; next attempt \(Render.until($0))" } ?? ""
                return "turn \(t.id) is queued and safe: \(why)\(next). `outbox drain` (or the next send or chat) delivers it; `outbox status` shows the queue"
            case .synced:
                return "the engine has turn \(t.id); its reply is not there yet — `outbox drain` records it and `outbox log` shows it"
            case .failedNeedsAttention:
                return "turn \(t.id) needs attention: \(t.lastError ?? "unknown error"); fix the cause, then `outbox retry \(t.id)`"
            case .cancelled: return "turn \(t.id) was cancelled"
            case .retired: return "turn \(t.id) was delivered"
            }
        }
    }

    static func deliver(turn id: String, outbox: Outbox, ctx: Context) -> Outcome {
        var outcome = Outcome()
        let connection: EngineConnection
        do { connection = try EngineConnection.open(ctx.settings) } catch {
            outcome.engineError = CLIError.from(error).oneLine
            return outcome
        }
        outcome.connection = connection
        outcome.engineURL = connection.url
        var options = Drain.Options()
        options.replyWaitMillis = replyWaitMillis
        let drain = Drain(outbox: outbox, client: connection.client(), options: options)
        do {
            let report = try drain.runOnce()
            outcome.report = report
            if !report.engineReachable || outbox.turn(id)?.isPending == true {
                outcome.engineError = report.lastEngineError.map(shortEngineError)
            }
        } catch DrainError.alreadyRunning {
            outcome.byOtherDrain = true
            ctx.narrate("another drain is delivering this outbox; waiting for it…")
            waitForOtherDrain(turn: id, outbox: outbox)
        } catch {
            outcome.engineError = CLIError.from(error).oneLine
        }
        return outcome
    }

    /// Watches the log until the turn has a reply, needs attention, or the wait is over.
    static func waitForOtherDrain(turn id: String, outbox: Outbox) {
        let deadline = Render.nowMillis() + replyWaitMillis
        while Render.nowMillis() < deadline {
            try? outbox.refresh()
            guard let t = outbox.turn(id) else { return }
            if t.reply != nil || t.state == .failedNeedsAttention || t.state == .cancelled || t.state == .retired { return }
            if t.state == .queued, t.lastError != nil { return }   // the other drain could not reach the engine
            usleep(100_000)
        }
    }

    /// "POST http://…/api/conversations (turn x): engine unreachable: connection refused (…)" →
    /// "http://127.0.0.1:1: connection refused".
    static func shortEngineError(_ s: String) -> String {
        guard let r = s.range(of: "engine unreachable: ") else { return s }
        let url = s.split(separator: " ").dropFirst().first.map(String.init) ?? ""
        let base = url.components(separatedBy: "/api/").first ?? url
        var why = String(s[r.upperBound...])
        if why.contains("NSURLErrorDomain -1004") { why = "connection refused" }
        else if why.contains("NSURLErrorDomain -1001") { why = "timed out" }
        else if why.contains("NSURLErrorDomain -1005") { why = "connection lost" }
        else if let p = why.range(of: " (NSURLErrorDomain") { why = String(why[..<p.lowerBound]) }
        return "\(base): \(why)"
    }
}
