import OutboxFormat
import OutboxStore

enum LogCommand {
    static let command = Command(spec: CommandSpec(name: "log", options: ["--cid"]),
                                 summary: "the transcript, rendered from the log", help: Usage.log, run: run)

    static func run(_ ctx: Context) throws -> ExitCode {
        guard let outbox = try ctx.openForReading() else {
            if let cid = ctx.args.value("--cid") { throw CLIError.failure("no conversation \(cid): nothing was ever sent from the outbox at \(ctx.settings.directory)") }
            ctx.term.out("no conversations yet")
            return .ok
        }
        ctx.noteSealedRead(outbox)
        var conversations = outbox.conversations
        if let cid = ctx.args.value("--cid") { conversations = [try ctx.resolveConversation(cid, in: outbox)] }
        if conversations.isEmpty { ctx.term.out("no conversations yet"); return .ok }
        let turns = outbox.turns
        let term = ctx.term
        for (i, c) in conversations.enumerated() {
            if i > 0 { term.out("") }
            term.out(term.styled("── \(c.title) ", .bold) + term.styled("(\(c.id), started on \(c.originSurface), \(c.createdAt))", .dim))
            for t in turns where t.conversationID == c.id {
                let who = t.surface == ctx.settings.surface ? "you" : "you@\(t.surface)"
                var line = term.styled("\(who)>", .cyan) + " " + t.text
                for a in t.attachments { line += " [\(a.name)]" }
                term.out(line)
                switch t.state {
                case .queued: term.out(term.styled("   (queued\(t.nextAttemptAt.map { ", next attempt " + Render.until($0) } ?? "")\(t.lastError.map { ": " + Delivery.peopleWords($0) } ?? ""))", .dim))
                case .syncing: term.out(term.styled("   (sending)", .dim))
                case .failedNeedsAttention: term.out(term.styled("   (needs attention: \(t.lastError.map(Delivery.peopleWords) ?? "unknown"); \(Delivery.guidance(turn: t.id, lastError: t.lastError)))", .yellow))
                case .cancelled: term.out(term.styled("   (cancelled)", .dim))
                case .synced, .retired:
                    if let r = t.reply {
                        if r.status == "answered" {
                            term.out(term.styled("engine>", .green) + " " + (r.text ?? ""))
                        } else {
                            term.out(term.styled("engine> (\(r.status)\(r.error.map { ": " + $0 } ?? ""))", .yellow))
                        }
                    } else if t.state == .synced {
                        term.out(term.styled("   (delivered; waiting for the reply)", .dim))
                    }
                }
            }
        }
        return .ok
    }
}
