import OutboxStore

enum GCCommand {
    static let command = Command(spec: CommandSpec(name: "gc"), summary: "sweep unreferenced files and compact the log",
                                 help: Usage.gc, run: run)

    static func run(_ ctx: Context) throws -> ExitCode {
        // Without the recovery sweep at open, so this sweep reports everything it removes.
        var options = Outbox.Options()
        options.recoverAtOpen = false
        let outbox = try Outbox.open(directory: ctx.settings.directory, mode: .readWrite, options: options)
        ctx.noteTailRepairs(outbox)
        if let s = outbox.sealed { throw StoreError.sealed(s) }
        let sweep = try outbox.sweep()
        if sweep.skippedBecauseBusy {
            ctx.term.out("sweep skipped: another process is saving attachments right now; run `outbox gc` again later")
        } else {
            ctx.term.out("deleted \(Render.count(sweep.deletedBlobs.count, "unreferenced attachment")) and \(Render.count(sweep.deletedTemps.count, "temp file"))")
        }
        let c = try outbox.compact()
        ctx.term.out("compacted the log: \(c.recordsBefore) → \(Render.count(c.recordsAfter, "record")), \(c.bytesBefore) → \(Render.count(Int(c.bytesAfter), "byte"))")
        return .ok
    }
}
