import OutboxFormat
import OutboxStore

enum ShowCommand {
    static let command = Command(spec: CommandSpec(name: "show", flags: ["--json"], maxPositionals: 1, positionalName: "ID"),
                                 summary: "one turn and every record of its history", help: Usage.show, run: run)

    static func run(_ ctx: Context) throws -> ExitCode {
        guard let id = ctx.args.positionals.first else { throw CLIError.usage("which turn? usage: outbox show ID [--json]") }
        guard let outbox = try ctx.openForReading() else {
            throw CLIError.failure("no turn \(id): nothing was ever sent from the outbox at \(ctx.settings.directory)")
        }
        ctx.noteSealedRead(outbox)
        let t = try ctx.resolveTurn(id, in: outbox)
        let history = try outbox.history(t.id)
        if ctx.json {
            ctx.printJSON(.object(["turn": Render.turnJSON(t), "history": .array(history.map(Render.entryJSON)),
                                   "sealed": Render.sealJSON(outbox.sealed)]))
            return .ok
        }
        let term = ctx.term
        term.out(term.styled("turn \(t.id)", .bold) + "  \(Render.stateName(t.state))")
        term.out("conversation  \(t.conversationID)" + (outbox.conversation(t.conversationID).map { " \"\($0.title)\"" } ?? ""))
        term.out("surface       \(t.surface)")
        term.out("created       \(t.createdAt)")
        term.out("attempts      \(t.attempt)" + (t.nextAttemptAt.map { ", next \(Render.until($0))" } ?? ""))
        if let e = t.lastError { term.out("last error    \(Delivery.peopleWords(e))") }
        if let a = t.engineAnswer { term.out("engine        HTTP \(a.httpStatus) \(a.status)" + (a.replayed ? " (replayed: it already had it)" : "")) }
        for a in t.attachments {
            term.out("attachment    \(a.name) (\(a.type), \(a.size) bytes) sha256 \(a.sha256)")
            term.out("              \(outbox.blobPath(a.sha256))")
        }
        term.out("text          " + t.text.replacingOccurrences(of: "\n", with: "\n              "))
        if let r = t.reply {
            term.out("reply         [\(r.status)] " + (r.text ?? r.error ?? "").replacingOccurrences(of: "\n", with: "\n              "))
        }
        term.out("history (\(outbox.paths.log))")
        for e in history {
            var parts = ["  line \(e.line)", e.at, e.type]
            if let s = e.fields["state"]?.stringValue { parts.append(s) }
            if let n = e.fields["attempt"]?.intValue { parts.append("attempt \(n)") }
            if let r = e.fields["reason"]?.stringValue { parts.append("(\(r))") }
            if let n = e.fields["nextAttemptAt"]?.stringValue { parts.append("next \(n)") }
            if let err = e.fields["error"]?.stringValue { parts.append("error: \(Render.clip(err, 100))") }
            if let st = e.fields["status"]?.stringValue, e.type == "reply" { parts.append(st) }
            term.out(parts.joined(separator: "  "))
        }
        return .ok
    }
}
