import Foundation
import OutboxFormat
import OutboxStore
import OutboxBench

/// The `outbox` command line. The executable only calls `CLI.run`.
public enum CLI {
    public static let version = "0.1.0"

    /// Runs one invocation and returns its exit code (0 ok, 1 failure, 2 usage, 3 sealed).
    public static func run(_ argv: [String], environment: [String: String] = ProcessInfo.processInfo.environment) -> Int32 {
        // `outbox bench` starts this binary again as its enqueue and memory workers.
        if let code = BenchWorker.runIfRequested(argv) { return code }
        ignoreSIGPIPE()
        let term = Terminal(environment: environment)
        do {
            return try dispatch(Array(argv.dropFirst()), environment: environment, term: term).rawValue
        } catch {
            let e = CLIError.from(error)
            term.err("outbox: " + e.oneLine)
            return e.code.rawValue
        }
    }

    static func dispatch(_ args: [String], environment: [String: String], term: Terminal) throws -> ExitCode {
        let g = try GlobalOptions.extract(args)
        if g.version && g.rest.isEmpty { term.out("outbox \(version)"); return .ok }
        guard let name = g.rest.first else {
            if g.help { term.out(Usage.overview); return .ok }
            term.err(Usage.overview)
            return .usage
        }
        guard let command = Commands.byName[name] else {
            if name.hasPrefix("-") {
                throw CLIError.usage("unknown option \(name) (see `outbox --help`)")
            }
            let close = Commands.all.map(\.name).map { ($0, editDistance($0, name)) }.min { $0.1 < $1.1 }
            if let close, close.1 <= 2 {
                throw CLIError.usage("unknown command \"\(name)\" (did you mean `outbox \(close.0)`? see `outbox --help`)")
            }
            throw CLIError.usage("unknown command \"\(name)\" (see `outbox --help`)")
        }
        if g.help { term.out(command.help); return .ok }
        let parsed = try command.spec.parse(Array(g.rest.dropFirst()))
        let settings = try Settings.resolve(g, environment: environment)
        let ctx = Context(term: term, settings: settings, args: parsed, command: command.name)
        return try command.run(ctx)
    }
}

/// One command: its arguments, help text and implementation.
struct Command: Sendable {
    var spec: CommandSpec
    var summary: String
    var help: String
    var run: @Sendable (Context) throws -> ExitCode
    var name: String { spec.name }
}

enum Commands {
    static let all: [Command] = [
        ChatCommand.command, SendCommand.command, StatusCommand.command, ListCommand.command, ShowCommand.command,
        LogCommand.command, ConversationsCommand.command, RetryCommand.command, CancelCommand.command,
        DrainCommand.command, VerifyCommand.command, GCCommand.command, ResetCommand.command, SalvageCommand.command,
        DemoCommand.command, BenchCommand.command, HelpCommand.command, CompletionCommand.command,
    ]
    static let byName: [String: Command] = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })
}

/// What a command runs with.
final class Context: @unchecked Sendable {
    let term: Terminal
    let settings: Settings
    let args: ParsedArgs
    let command: String
    var json: Bool { args.has("--json") }

    init(term: Terminal, settings: Settings, args: ParsedArgs, command: String) {
        self.term = term; self.settings = settings; self.args = args; self.command = command
    }

    var paths: OutboxPaths { OutboxPaths(directory: settings.directory) }

    /// Opens for reading without changing anything; nil when nothing was ever written here.
    func openForReading() throws -> Outbox? {
        guard FileManager.default.fileExists(atPath: paths.log) else { return nil }
        return try Outbox.open(directory: settings.directory, mode: .readOnly)
    }

    /// Opens for writing (creating the outbox on first use). Recovery runs at open; a torn last
    /// line it cut is said on stderr.
    func openForWriting() throws -> Outbox {
        let o = try Outbox.open(directory: settings.directory, mode: .readWrite)
        noteTailRepairs(o)
        return o
    }

    /// One stderr line per torn last line the read-write open cut off (never silent).
    func noteTailRepairs(_ o: Outbox) {
        for r in o.tailRepairs {
            term.err("outbox: cut a torn last line (\(Render.count(r.length, "byte")) at offset \(r.offset), never acknowledged) from the log; "
                     + "its bytes are kept in \(r.savedAs) — `outbox salvage \(r.savedAs)` re-imports a whole record from it")
        }
    }

    /// Reads of a sealed outbox show what was written before the damage, and say so (not with
    /// --json: there the `sealed` field says it).
    func noteSealedRead(_ o: Outbox?) {
        guard let s = o?.sealed, !json else { return }
        let at = s.line.map { "at line \($0)" } ?? s.offset.map { "at byte offset \($0)" } ?? "in \(s.path)"
        term.err("outbox: the outbox is sealed \(at) (\(s.reason)); showing what was written before the damage — see `outbox status`")
    }

    /// `send`, `chat` and `drain` with a configured engine need its token: refuse before writing.
    func requireEngineToken() throws {
        if settings.engineURL != nil && settings.engineToken == nil {
            throw CLIError.usage("--engine/OUTBOX_ENGINE_URL is set but OUTBOX_ENGINE_TOKEN is empty; export the engine's token (outbox-engine prints where it stored it)")
        }
    }

    /// A writable outbox that refuses to go on when sealed, with the exit code for that.
    func openUnsealed() throws -> Outbox {
        let o = try openForWriting()
        if let s = o.sealed { throw StoreError.sealed(s) }
        return o
    }

    /// A turn by full id or by a unique prefix of at least 4 characters.
    func resolveTurn(_ idOrPrefix: String, in outbox: Outbox) throws -> Turn {
        if let t = outbox.turn(idOrPrefix) { return t }
        try requireLongPrefix(idOrPrefix)
        let matches = idOrPrefix.count >= 4 ? outbox.turns.filter { $0.id.hasPrefix(idOrPrefix) } : []
        if matches.count == 1 { return matches[0] }
        if matches.count > 1 {
            throw CLIError.failure("\"\(idOrPrefix)\" matches \(matches.count) turns (\(matches.prefix(3).map(\.id).joined(separator: ", "))…); give more of the id")
        }
        throw CLIError.failure("no turn \(idOrPrefix) in the outbox at \(settings.directory) (see `outbox list`)")
    }

    /// A conversation by full id or by a unique prefix of at least 4 characters.
    func resolveConversation(_ idOrPrefix: String, in outbox: Outbox) throws -> OutboxStore.Conversation {
        if let c = outbox.conversation(idOrPrefix) { return c }
        try requireLongPrefix(idOrPrefix)
        let matches = idOrPrefix.count >= 4 ? outbox.conversations.filter { $0.id.hasPrefix(idOrPrefix) } : []
        if matches.count == 1 { return matches[0] }
        if matches.count > 1 {
            throw CLIError.failure("\"\(idOrPrefix)\" matches \(matches.count) conversations; give more of the id")
        }
        throw CLIError.failure("no conversation \(idOrPrefix) in the outbox at \(settings.directory) (see `outbox conversations`)")
    }

    func requireLongPrefix(_ idOrPrefix: String) throws {
        if idOrPrefix.count < 4 {
            throw CLIError.usage("\"\(idOrPrefix)\" is too short: an id prefix needs at least 4 characters (see `outbox list`)")
        }
    }

    func printJSON(_ v: OutboxFormat.JSONValue) { term.out(Render.json(v)) }

    /// Narration: to stderr so stdout stays for what a script wants (replies, ids, JSON).
    func narrate(_ line: String) { if !json { term.err(line) } }
}

/// The conversation with the latest activity (its creation or its latest turn).
func mostRecentConversation(_ outbox: Outbox) -> OutboxStore.Conversation? {
    var last: [String: Int64] = [:]
    for c in outbox.conversations { last[c.id] = c.seq }
    for t in outbox.turns { last[t.conversationID] = max(last[t.conversationID] ?? 0, t.enqueuedSeq) }
    return outbox.conversations.max { (last[$0.id] ?? 0) < (last[$1.id] ?? 0) }
}
