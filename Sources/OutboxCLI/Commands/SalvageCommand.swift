import Foundation
import OutboxStore

enum SalvageCommand {
    static let command = Command(spec: CommandSpec(name: "salvage", maxPositionals: 1, positionalName: "PATH"),
                                 summary: "re-import unsent turns from a damaged log", help: Usage.salvage, run: run)

    static func run(_ ctx: Context) throws -> ExitCode {
        guard var path = ctx.args.positionals.first else {
            throw CLIError.usage("which log? usage: outbox salvage PATH (reset prints it, e.g. \(ctx.settings.directory)/turns.damaged-<time>/turns.jsonl)")
        }
        path = expandTilde(path, home: ctx.settings.environment["HOME"] ?? NSHomeDirectory())
        var isDir: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDir) else {
            throw CLIError.failure("\(path) does not exist")
        }
        if isDir.boolValue { path += "/turns.jsonl" }
        if path == ctx.paths.log { throw CLIError.usage("\(path) is the live log; salvage reads a damaged log that reset moved aside") }
        let outbox = try ctx.openUnsealed()
        let r = try outbox.salvage(from: path)
        let term = ctx.term
        term.out("read \(Render.count(r.linesRead, "line")) of \(path)" + (r.unreadableLines.isEmpty ? "" : "; \(r.unreadableLines.count) unreadable (\(Render.verb(r.unreadableLines.count, "line", "lines")) \(r.unreadableLines.prefix(10).map(String.init).joined(separator: ", "))) skipped"))
        for id in r.imported { term.out("imported \(id)") }
        if r.conversationsCreated > 0 { term.out("recreated \(Render.count(r.conversationsCreated, "conversation"))") }
        if !r.alreadyPresent.isEmpty { term.out("\(Render.count(r.alreadyPresent.count, "turn")) already in this outbox, left as \(Render.verb(r.alreadyPresent.count, "it is", "they are"))") }
        if !r.skippedDelivered.isEmpty { term.out("\(Render.count(r.skippedDelivered.count, "turn")) the old log shows as delivered, not imported") }
        for m in r.missingAttachments { term.out("not imported: turn \(m.turn) — its attachment \(m.sha256) is missing or damaged") }
        term.out("\(Render.count(r.imported.count, "turn")) imported; the engine's idempotency keeps any that already arrived from arriving twice")
        return r.missingAttachments.isEmpty ? .ok : .failure
    }
}
