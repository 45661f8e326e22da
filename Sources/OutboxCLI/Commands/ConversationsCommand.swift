import OutboxFormat
import OutboxStore

enum ConversationsCommand {
    static let command = Command(spec: CommandSpec(name: "conversations", flags: ["--json"]),
                                 summary: "conversations with origin surface and turn counts", help: Usage.conversations, run: run)

    static func run(_ ctx: Context) throws -> ExitCode {
        let outbox = try ctx.openForReading()
        let conversations = outbox?.conversations ?? []
        let turns = outbox?.turns ?? []
        ctx.noteSealedRead(outbox)
        if ctx.json {
            ctx.printJSON(.object(["conversations": .array(conversations.map { Render.conversationJSON($0, turns: turns) }),
                                   "sealed": Render.sealJSON(outbox?.sealed)]))
            return .ok
        }
        if conversations.isEmpty { ctx.term.out("no conversations yet"); return .ok }
        let rows = conversations.map { c -> [String] in
            let mine = turns.filter { $0.conversationID == c.id }
            return [c.id, c.originSurface, Render.conversationState(c, turns: mine), "\(mine.count)", Render.clip(c.title, 50)]
        }
        for line in Render.table(["ID", "ORIGIN", "STATE", "TURNS", "TITLE"], rows) { ctx.term.out(line) }
        return .ok
    }
}
