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
                return "turn \(t.id) needs attention: \(t.lastError.map(peopleWords) ?? "unknown error"); \(Delivery.guidance(turn: t.id, lastError: t.lastError))"
            case .cancelled: return "turn \(t.id) was cancelled"
            case .retired: return "turn \(t.id) was delivered"
            }
        }
    }

    static func deliver(turn id: String, outbox: Outbox, ctx: Context) -> Outcome {
        // Ctrl-C while waiting: the turn is durable; say so, and where it goes from here.
        let interrupt = Interrupt.onSIGINT {
            ctx.term.err("outbox: interrupted; turn \(id) is saved and will be delivered by the next `outbox drain`, send or chat")
        }
        defer { interrupt.cancel() }
        // A word on stderr when the engine is slow to answer: at once on a terminal (after a
        // second, so a quick reply shows no flicker), after a few seconds otherwise.
        let notice = DispatchWorkItem { ctx.narrate("sending… (the engine has not answered yet; Ctrl-C leaves turn \(id) saved for the next drain)") }
        DispatchQueue.global().asyncAfter(deadline: .now() + (ctx.term.stderrIsTTY ? 1 : 3), execute: notice)
        defer { notice.cancel() }
        return deliverNow(turn: id, outbox: outbox, ctx: ctx)
    }

    static func deliverNow(turn id: String, outbox: Outbox, ctx: Context) -> Outcome {
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

    /// What a person can do about a turn that needs attention, from the engine's answer
    /// ("… HTTP 401 unauthorized: …") kept in its last error.
    static func guidance(turn id: String, lastError: String?) -> String {
        let e = lastError ?? ""
        func has(_ s: String) -> Bool { e.contains(s) }
        if has("HTTP 401") || has("HTTP 403") {
            return "check OUTBOX_ENGINE_TOKEN (the engine refused it), then `outbox retry \(id)`"
        }
        if has("HTTP 404") && has("conversation_not_found") {
            return "the engine does not know its conversation; `outbox retry \(id)` — the drain creates the conversation again"
        }
        if has("HTTP 422") || has("idempotency_key_reused") {
            return "the engine holds another turn under this request id, so this one cannot land as it is; `outbox cancel \(id)` and send its text again"
        }
        if has("HTTP 413") || has("body_too_large") {
            return "the engine refuses a turn this large; `outbox cancel \(id)` and send it smaller (long documents as attachments)"
        }
        if has("HTTP 400") || has("HTTP 415") {
            return "the engine refuses the turn as it is; `outbox show \(id)` has the details, `outbox cancel \(id)` drops it"
        }
        return "`outbox show \(id)` has the details; `outbox retry \(id)` once the cause is fixed"
    }

    /// A transport failure as people say it: "connection refused", never "NSURLErrorDomain -1004".
    static func peopleWords(_ message: String) -> String {
        guard let p = message.range(of: " (NSURLErrorDomain ") else { return message }
        let code = Int(message[p.upperBound...].prefix { $0 == "-" || $0.isNumber }) ?? 0
        let text = String(message[..<p.lowerBound]) + String(message[p.upperBound...].drop { $0 != ")" }.dropFirst())
        switch code {
        case -1004 where !text.contains("refused"): return text.isEmpty ? "connection refused" : "connection refused (\(text))"
        case -1001 where !text.lowercased().contains("timed out"): return "timed out"
        case -1005 where !text.lowercased().contains("lost"): return "connection lost"
        default: return text
        }
    }

    /// "POST http://…/api/conversations (turn x): engine unreachable: connection refused (…)" →
    /// "http://127.0.0.1:1: connection refused".
    static func shortEngineError(_ s: String) -> String {
        guard let r = s.range(of: "engine unreachable: ") else { return s }
        let url = s.split(separator: " ").dropFirst().first.map(String.init) ?? ""
        let base = url.components(separatedBy: "/api/").first ?? url
        var why = String(s[r.upperBound...])
        why = peopleWords(why)
        return "\(base): \(why)"
    }
}

/// SIGINT handled on a dispatch queue: a last line on stderr, then exit 130 (128 + SIGINT), as
/// the shell expects of an interrupted command. Nothing needs undoing: every write the command
/// made is already durable, and a turn left `syncing` is asked about first by the next drain.
final class Interrupt: @unchecked Sendable {
    private let source: any DispatchSourceSignal

    private init(source: any DispatchSourceSignal) { self.source = source }

    static func onSIGINT(_ lastWords: @escaping @Sendable () -> Void) -> Interrupt {
        signal(SIGINT, SIG_IGN)
        let src = DispatchSource.makeSignalSource(signal: SIGINT, queue: DispatchQueue.global())
        src.setEventHandler {
            lastWords()
            _exit(130)
        }
        src.resume()
        return Interrupt(source: src)
    }

    func cancel() {
        source.cancel()
        signal(SIGINT, SIG_DFL)
    }
}
