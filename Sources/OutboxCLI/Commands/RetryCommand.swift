import OutboxStore

enum RetryCommand {
    static let command = Command(spec: CommandSpec(name: "retry", flags: ["--all"], maxPositionals: nil, positionalName: "ID"),
                                 summary: "put failed turns back in the queue", help: Usage.retry, run: run)

    static func run(_ ctx: Context) throws -> ExitCode {
        let ids = ctx.args.positionals
        let all = ctx.args.has("--all")
        if all && !ids.isEmpty { throw CLIError.usage("give turn ids or --all, not both (see `outbox help retry`)") }
        if !all && ids.isEmpty { throw CLIError.usage("which turns? give one or more ids, or --all (see `outbox help retry`)") }
        let outbox = try ctx.openUnsealed()
        let targets: [Turn]
        if all {
            targets = outbox.turns.filter { $0.state == .failedNeedsAttention || ($0.state == .queued && ($0.nextAttemptAt != nil || $0.attempt > 0)) }
        } else {
            targets = try ids.map { try ctx.resolveTurn($0, in: outbox) }
            for t in targets where !(t.state == .failedNeedsAttention || t.state == .queued) {
                throw CLIError.failure("turn \(t.id) is \(Render.stateName(t.state)); only a turn that needs attention or is waiting in the queue can be retried (nothing was changed)")
            }
        }
        if targets.isEmpty {
            ctx.term.out("nothing to retry: no turn needs attention or is waiting out a backoff")
            return .ok
        }
        var seen = Set<String>()
        let unique = targets.filter { seen.insert($0.id).inserted }
        try outbox.apply(unique.map { .retry($0.id) })
        for t in unique { ctx.term.out("retry \(t.id): back in the queue with a fresh attempt budget") }
        ctx.term.out("\(Render.count(unique.count, "turn")) queued; `outbox drain` (or the next send or chat) delivers \(Render.verb(unique.count, "it", "them"))")
        return .ok
    }
}
