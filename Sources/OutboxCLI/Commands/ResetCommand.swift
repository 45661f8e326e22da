import Foundation
import OutboxStore

enum ResetCommand {
    static let command = Command(spec: CommandSpec(name: "reset", flags: ["--yes", "--force"], aliases: ["-y": "--yes"]),
                                 summary: "start a fresh log; the damaged one is kept", help: Usage.reset, run: run)

    static func run(_ ctx: Context) throws -> ExitCode {
        let force = ctx.args.has("--force")
        guard let current = try ctx.openForReading() else {
            throw CLIError.failure("no outbox at \(ctx.settings.directory); there is nothing to reset")
        }
        let seal = current.sealed
        if seal == nil && !force {
            throw CLIError.failure("the outbox at \(ctx.settings.directory) is healthy; reset only starts over a sealed outbox (add --force to start over anyway; nothing is deleted)")
        }
        if !ctx.args.has("--yes") && ctx.term.stdinIsTTY && ctx.term.stderrIsTTY {
            let pending = current.turns.filter { $0.isPending || $0.state == .failedNeedsAttention }.count
            if let seal { ctx.term.err("The outbox is sealed: \(seal)") }
            ctx.term.errRaw("Start a fresh log? The current one (\(Render.count(pending, "undelivered turn"))) moves to turns.damaged-<time>/ and nothing is deleted. [y/N] ")
            let answer = readLine()?.trimmingCharacters(in: .whitespaces).lowercased() ?? ""
            guard answer == "y" || answer == "yes" else {
                ctx.term.err("nothing changed")
                return .failure
            }
        }
        let report = try Outbox.reset(directory: ctx.settings.directory, force: force)
        let term = ctx.term
        if let s = report.wasSealed { term.out("the outbox was sealed: \(s)") }
        term.out("started a fresh log at \(ctx.paths.log)")
        term.out("the old log is kept at \(report.damagedLog) (with links to its \(Render.count(report.blobsKept, "attachment")) in \(report.asideDirectory)/blobs)")
        term.out("to re-import its unsent turns: outbox salvage \(report.damagedLog)")
        return .ok
    }
}
