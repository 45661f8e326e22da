import Foundation

/// Where the outbox lives, which engine it talks to, and as what surface. Flags win over the
/// environment; the environment wins over defaults.
struct Settings: Sendable {
    var directory: String
    /// A configured engine; nil means the reference engine embedded in this process.
    var engineURL: String?
    /// Bearer token for a configured engine (never written to the log).
    var engineToken: String?
    var surface: String
    /// Where the embedded engine keeps its data.
    var embeddedEngineDirectory: String
    var environment: [String: String]

    static func resolve(_ g: GlobalOptions, environment env: [String: String]) throws -> Settings {
        let home = env["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        let dataHome: String
        if let x = env["XDG_DATA_HOME"], x.hasPrefix("/") { dataHome = x } else { dataHome = home + "/.local/share" }
        let dir = expandTilde(g.dir ?? nonEmpty(env["OUTBOX_DIR"]) ?? dataHome + "/outbox", home: home)
        var engine = g.engine ?? nonEmpty(env["OUTBOX_ENGINE_URL"])
        if let e = engine {
            guard let url = URL(string: e), let scheme = url.scheme, scheme == "http" || scheme == "https", url.host != nil else {
                throw CLIError.usage("engine URL \"\(e)\" is not an http(s) URL (for example http://127.0.0.1:8787)")
            }
            while engine!.hasSuffix("/") { engine!.removeLast() }
        }
        let surface = g.surface ?? nonEmpty(env["OUTBOX_SURFACE"]) ?? "cli"
        guard !surface.isEmpty, surface.utf8.count <= 32,
              surface.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D || $0 == 0x5F }) else {
            throw CLIError.usage("surface \"\(surface)\" must be 1–32 characters of lowercase letters, digits, - _ (for example cli, ios, web)")
        }
        return Settings(directory: dir, engineURL: engine, engineToken: nonEmpty(env["OUTBOX_ENGINE_TOKEN"]), surface: surface,
                        embeddedEngineDirectory: dataHome + "/outbox-engine", environment: env)
    }
}

func nonEmpty(_ s: String?) -> String? { s.flatMap { $0.isEmpty ? nil : $0 } }

func expandTilde(_ p: String, home: String) -> String {
    if p == "~" { return home }
    if p.hasPrefix("~/") { return home + p.dropFirst(1) }
    if !p.hasPrefix("/") { return FileManager.default.currentDirectoryPath + "/" + p }
    return p
}
