import OutboxFormat
import OutboxStore

enum ListCommand {
    static let command = Command(spec: CommandSpec(name: "list", flags: ["--json"], options: ["--state"]),
                                 summary: "turns, optionally of one state", help: Usage.list, run: run)

    static func run(_ ctx: Context) throws -> ExitCode {
        var filter: TurnState?
        if let s = ctx.args.value("--state") {
            guard let st = Render.parseState(s) else {
                throw CLIError.usage("--state \(s) is not a state; use one of queued, syncing, synced, needs-attention, cancelled, retired")
            }
            filter = st
        }
        let outbox = try ctx.openForReading()
        let turns = (outbox?.turns ?? []).filter { filter == nil || $0.state == filter }
        ctx.noteSealedRead(outbox)
        if ctx.json {
            ctx.printJSON(.object(["turns": .array(turns.map(Render.turnJSON)), "sealed": Render.sealJSON(outbox?.sealed)]))
            return .ok
        }
        if turns.isEmpty {
            ctx.term.out(filter.map { "no \(Render.stateName($0)) turns" } ?? "no turns")
            return .ok
        }
        let now = Render.nowMillis()
        let rows = turns.map { t -> [String] in
            var note = ""
            if t.state == .queued, let next = t.nextAttemptAt { note = "next \(Render.until(next, now: now))" }
            if t.state == .failedNeedsAttention, let e = t.lastError { note = Render.clip(Delivery.peopleWords(e), 40) }
            if t.state == .synced, let r = t.reply { note = r.status == "answered" ? "replied" : "reply \(r.status)" }
            return [t.id, Render.stateName(t.state), "\(t.attempt)", Render.ago(t.enqueuedAt, now: now), t.conversationID,
                    Render.clip(t.text.isEmpty ? "[\(Render.count(t.attachments.count, "attachment"))]" : t.text, 40), note]
        }
        for line in Render.table(["ID", "STATE", "TRIES", "AGE", "CONVERSATION", "TEXT", "NOTE"], rows) {
            ctx.term.out(line.trimmingCharacters(in: .whitespaces))
        }
        return .ok
    }
}
