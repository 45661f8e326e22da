/// What a command accepts. Parsing is strict: an unknown option is a usage error (exit 2) with
/// a hint, never ignored.
struct CommandSpec: Sendable {
    var name: String
    /// Flags without a value, with their aliases (e.g. "-c" → "--continue").
    var flags: [String] = []
    var options: [String] = []
    /// Options that may be given more than once (e.g. -a FILE).
    var repeatable: Set<String> = []
    var aliases: [String: String] = [:]
    /// Most positionals accepted (nil: any number).
    var maxPositionals: Int? = 0
    /// Name of the positionals, for messages ("ID", "TEXT").
    var positionalName = "argument"
}

struct ParsedArgs: Sendable {
    var flags: Set<String> = []
    var options: [String: [String]] = [:]
    var positionals: [String] = []
    func has(_ flag: String) -> Bool { flags.contains(flag) }
    func value(_ option: String) -> String? { options[option]?.last }
    func values(_ option: String) -> [String] { options[option] ?? [] }
}

/// Options every command accepts, wherever they appear.
struct GlobalOptions: Sendable {
    var dir: String?
    var engine: String?
    var surface: String?
    var help = false
    var version = false
    /// Everything that was not a global option, in order.
    var rest: [String] = []

    static let valued = ["--dir", "--engine", "--surface"]

    static func extract(_ args: [String]) throws -> GlobalOptions {
        var g = GlobalOptions()
        var i = 0
        var afterDashDash = false
        while i < args.count {
            let a = args[i]
            if afterDashDash { g.rest.append(a); i += 1; continue }
            if a == "--" { afterDashDash = true; g.rest.append(a); i += 1; continue }
            let (name, inline) = splitInline(a)
            if valued.contains(name) {
                let v: String
                if let inline { v = inline } else {
                    guard i + 1 < args.count else { throw CLIError.usage("\(name) needs a value (for example \(example(name)))") }
                    v = args[i + 1]; i += 1
                }
                guard !v.isEmpty else { throw CLIError.usage("\(name) needs a non-empty value (for example \(example(name)))") }
                switch name {
                case "--dir": g.dir = v
                case "--engine": g.engine = v
                default: g.surface = v
                }
            } else if a == "-h" || a == "--help" {
                g.help = true
            } else if a == "--version" && g.rest.isEmpty {
                g.version = true
            } else {
                g.rest.append(a)
            }
            i += 1
        }
        return g
    }

    static func example(_ name: String) -> String {
        switch name {
        case "--dir": return "--dir ~/.local/share/outbox"
        case "--engine": return "--engine http://127.0.0.1:8787"
        default: return "--surface cli"
        }
    }
}

/// "--name=value" → ("--name", "value").
func splitInline(_ a: String) -> (String, String?) {
    guard a.hasPrefix("--"), let eq = a.firstIndex(of: "=") else { return (a, nil) }
    return (String(a[..<eq]), String(a[a.index(after: eq)...]))
}

extension CommandSpec {
    func parse(_ args: [String]) throws -> ParsedArgs {
        var p = ParsedArgs()
        var i = 0
        var afterDashDash = false
        while i < args.count {
            let raw = args[i]
            i += 1
            if afterDashDash || raw == "-" || !raw.hasPrefix("-") {
                p.positionals.append(raw)
                continue
            }
            if raw == "--" { afterDashDash = true; continue }
            var (name, inline) = splitInline(raw)
            name = aliases[name] ?? name
            if flags.contains(name) {
                if inline != nil { throw CLIError.usage("\(name) takes no value (see `outbox help \(self.name)`)") }
                p.flags.insert(name)
            } else if options.contains(name) {
                let v: String
                if let inline { v = inline } else {
                    guard i < args.count else { throw CLIError.usage("\(name) needs a value (see `outbox help \(self.name)`)") }
                    v = args[i]; i += 1
                }
                if !repeatable.contains(name), p.options[name] != nil {
                    throw CLIError.usage("\(name) is given twice (see `outbox help \(self.name)`)")
                }
                p.options[name, default: []].append(v)
            } else {
                throw CLIError.usage(unknownOption(raw))
            }
        }
        if let max = maxPositionals, p.positionals.count > max {
            let extra = p.positionals[max]
            if max == 0 {
                throw CLIError.usage("`outbox \(self.name)` takes no arguments, but got \"\(extra)\" (see `outbox help \(self.name)`)")
            }
            throw CLIError.usage("unexpected argument \"\(extra)\" for `outbox \(self.name)` (see `outbox help \(self.name)`)")
        }
        return p
    }

    func unknownOption(_ raw: String) -> String {
        let name = splitInline(raw).0
        let known = flags + options + Array(aliases.keys) + GlobalOptions.valued + ["--help"]
        if let best = known.map({ ($0, editDistance($0, name)) }).min(by: { $0.1 < $1.1 }), best.1 <= 2 {
            return "unknown option \(name) for `outbox \(self.name)` (did you mean \(best.0)? see `outbox help \(self.name)`)"
        }
        return "unknown option \(name) for `outbox \(self.name)` (see `outbox help \(self.name)`)"
    }
}

/// Levenshtein distance, for "did you mean".
func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a), b = Array(b)
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var prev = Array(0...b.count)
    var cur = [Int](repeating: 0, count: b.count + 1)
    for i in 1...a.count {
        cur[0] = i
        for j in 1...b.count {
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        swap(&prev, &cur)
    }
    return prev[b.count]
}
