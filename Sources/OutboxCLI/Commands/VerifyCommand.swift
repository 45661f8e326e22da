import OutboxFormat
import OutboxStore

enum VerifyCommand {
    static let command = Command(spec: CommandSpec(name: "verify", flags: ["--json"]),
                                 summary: "check every record and attachment", help: Usage.verify, run: run)

    static func run(_ ctx: Context) throws -> ExitCode {
        guard let outbox = try ctx.openForReading() else {
            if ctx.json {
                ctx.printJSON(.object(["directory": .string(ctx.settings.directory), "exists": false, "healthy": true, "sealed": .null]))
            } else {
                ctx.term.out("nothing to verify: no outbox at \(ctx.settings.directory) yet")
            }
            return .ok
        }
        let r = try outbox.verify()
        let code: ExitCode = r.sealed != nil ? .sealed : (r.healthy ? .ok : .failure)
        if ctx.json {
            let pairs: ([(turn: String, sha256: String)]) -> JSONValue = { list in
                .array(list.map { .object(["turn": .string($0.turn), "sha256": .string($0.sha256)]) })
            }
            ctx.printJSON(.object([
                "directory": .string(ctx.settings.directory), "exists": true,
                "healthy": .bool(r.healthy), "sealed": Render.sealJSON(r.sealed),
                "lines": .int(Int64(r.lines)), "conversations": .int(Int64(r.conversations)), "liveTurns": .int(Int64(r.liveTurns)),
                "blobsChecked": .int(Int64(r.blobsChecked)),
                "missingBlobs": pairs(r.missingBlobs), "corruptBlobs": pairs(r.corruptBlobs),
                "orphanBlobs": .array(r.orphanBlobs.map { .string($0) }), "tempFiles": .array(r.tempFiles.map { .string($0) }),
                "unrepairedTail": r.pendingTail == .clean ? .null : .object(["offset": .optional(r.pendingTail.offset)]),
                "exitCode": .int(Int64(code.rawValue)),
            ]))
            return code
        }
        let term = ctx.term
        term.out("\(Render.count(r.lines, "record")), \(Render.count(r.conversations, "conversation")), \(Render.count(r.liveTurns, "live turn")), \(Render.count(r.blobsChecked, "attachment")) checked")
        if let s = r.sealed {
            term.err("outbox: sealed: \(s); run `outbox reset` (the damaged log is kept), then `outbox salvage`")
        }
        for m in r.missingBlobs { term.out("missing attachment \(m.sha256) of turn \(m.turn)") }
        for m in r.corruptBlobs { term.out("damaged attachment \(m.sha256) of turn \(m.turn) (its bytes do not hash to its name)") }
        if case .clean = r.pendingTail {} else { term.out("an unfinished last line at byte \(r.pendingTail.offset ?? 0); the next write repairs it") }
        if !r.orphanBlobs.isEmpty || !r.tempFiles.isEmpty {
            term.out("\(Render.count(r.orphanBlobs.count, "unreferenced attachment")), \(Render.count(r.tempFiles.count, "temp file")): harmless; `outbox gc` removes them")
        }
        if code == .ok { term.out("healthy") }
        else if code == .failure { term.err("outbox: problems found (see above); affected turns need attention") }
        return code
    }
}
