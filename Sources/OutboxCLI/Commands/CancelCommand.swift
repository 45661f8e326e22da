import OutboxStore

enum CancelCommand {
    static let command = Command(spec: CommandSpec(name: "cancel", maxPositionals: 1, positionalName: "ID"),
                                 summary: "cancel a turn that was never sent", help: Usage.cancel, run: run)

    static func run(_ ctx: Context) throws -> ExitCode {
        guard let id = ctx.args.positionals.first else { throw CLIError.usage("which turn? usage: outbox cancel ID") }
        let outbox = try ctx.openUnsealed()
        let t = try ctx.resolveTurn(id, in: outbox)
        if t.state == .cancelled {
            ctx.term.out("turn \(t.id) is already cancelled; it will not be sent")
            return .ok
        }
        try outbox.cancel(t.id)
        ctx.term.out("cancelled \(t.id); it will not be sent")
        return .ok
    }
}
