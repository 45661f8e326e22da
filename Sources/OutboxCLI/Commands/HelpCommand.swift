enum HelpCommand {
    static let command = Command(spec: CommandSpec(name: "help", maxPositionals: 1, positionalName: "COMMAND"),
                                 summary: "help for a command", help: Usage.help, run: run)

    static func run(_ ctx: Context) throws -> ExitCode {
        guard let name = ctx.args.positionals.first else { ctx.term.out(Usage.overview); return .ok }
        guard let c = Commands.byName[name] else {
            throw CLIError.usage("no command \"\(name)\"; the commands are: \(Commands.all.map(\.name).joined(separator: ", "))")
        }
        ctx.term.out(c.help)
        return .ok
    }
}
