import Foundation
import OutboxFormat
import OutboxStore
import OutboxSync

enum StatusCommand {
    static let command = Command(spec: CommandSpec(name: "status", flags: ["--json"]),
                                 summary: "counts by state, next attempt, seal, engine, paths", help: Usage.status, run: run)

    static func run(_ ctx: Context) throws -> ExitCode {
        let outbox = try ctx.openForReading()
        let paths = ctx.paths
        let turns = outbox?.turns ?? []
        let now = Render.nowMillis()
        var counts: [TurnState: Int] = [:]
        for t in turns { counts[t.state, default: 0] += 1 }
        let queued = turns.filter { $0.state == .queued }
        let oldest = queued.min { $0.enqueuedSeq < $1.enqueuedSeq }
        // Turns held behind a turn that needs attention (same conversation, order kept) are not
        // "next": they go when that turn is retried or cancelled.
        let heldBehind = DrainPlan.blockedTurns(in: turns)
        let pending = turns.filter { $0.isPending && heldBehind[$0.id] == nil }
        let nextAttempt: String? = pending.isEmpty ? nil
            : pending.map { $0.nextAttemptAt ?? Timestamp.format(millis: 0) }.min { (Timestamp.parse($0) ?? 0) < (Timestamp.parse($1) ?? 0) }
        let sealed = outbox?.sealed
        let torn = tornTailFiles(paths)
        let pendingTail = outbox?.pendingTail ?? .clean
        let engine = EngineProbe.probe(ctx.settings)

        if ctx.json {
            var countsObj = JSONObject()
            for s in TurnState.allCases { countsObj[s.rawValue] = .int(Int64(counts[s] ?? 0)) }
            let o: JSONObject = [
                "directory": .string(paths.directory),
                "log": .string(paths.log),
                "blobs": .string(paths.blobs),
                "exists": .bool(outbox != nil),
                "logBytes": .int(outbox?.logSize ?? 0),
                "records": .int(Int64(outbox?.snapshot.recordCount ?? 0)),
                "conversations": .int(Int64(outbox?.conversations.count ?? 0)),
                "counts": .object(countsObj),
                "oldestQueued": oldest.map { t in
                    .object(["id": .string(t.id), "enqueuedAt": .string(t.enqueuedAt),
                             "ageSeconds": .int(max(0, now - (Timestamp.parse(t.enqueuedAt) ?? now)) / 1000)])
                } ?? .null,
                "nextAttemptAt": nextAttempt.map { Timestamp.parse($0) ?? 0 <= now ? .string("now") : .string($0) } ?? .null,
                "sealed": Render.sealJSON(sealed),
                "heldBehind": .object(JSONObject(heldBehind.sorted(by: { $0.key < $1.key }).map { ($0.key, JSONValue.string($0.value)) })),
                "tornTailRepairs": .array(torn.map { .object(["path": .string($0.path), "bytes": .int($0.bytes)]) }),
                "unrepairedTail": pendingTail == .clean ? .null : .object(["offset": .optional(pendingTail.offset)]),
                "engine": engine.json,
                "surface": .string(ctx.settings.surface),
            ]
            ctx.printJSON(.object(o))
            return .ok
        }

        let term = ctx.term
        term.out(term.styled("outbox", .bold) + " at \(paths.directory)" + (outbox == nil ? " (nothing sent from here yet)" : ""))
        if let outbox {
            term.out("  log      \(paths.log) (\(bytes(outbox.logSize)), \(Render.count(outbox.snapshot.recordCount, "record")), \(Render.count(outbox.conversations.count, "conversation")))")
            term.out("  blobs    \(paths.blobs)")
        }
        let order: [TurnState] = [.queued, .syncing, .synced, .failedNeedsAttention, .cancelled, .retired]
        term.out("turns      " + order.map { "\(counts[$0] ?? 0) \(Render.stateName($0))" }.joined(separator: " · "))
        if let oldest {
            term.out("oldest     queued \(Render.ago(oldest.enqueuedAt, now: now)) (\(oldest.id))")
        }
        if let nextAttempt {
            let when = Render.until(nextAttempt, now: now)
            term.out("next try   \(when == "now" ? "now: the next drain sends it" : when)")
        }
        for (turn, blocker) in heldBehind.sorted(by: { $0.key < $1.key }) {
            term.out("held       turn \(turn) is held behind turn \(blocker) (same conversation, order kept)")
        }
        let attention = counts[.failedNeedsAttention] ?? 0
        if attention > 0 {
            term.out(term.styled("attention  \(Render.count(attention, "turn")) \(Render.verb(attention, "needs", "need")) a person: see `outbox list --state needs-attention`, then `outbox retry ID`", .yellow))
        }
        if let sealed {
            term.out(term.styled("sealed     YES — writes are refused: \(sealed)", .red))
            term.out("           run `outbox reset` to start a fresh log (the damaged one is kept), then `outbox salvage`")
        } else {
            term.out("sealed     no")
        }
        if torn.isEmpty {
            term.out("torn tails none repaired")
        } else {
            term.out("torn tails \(torn.count) repaired; the cut bytes are kept in " + torn.map(\.path).joined(separator: ", "))
        }
        if case .clean = pendingTail {} else {
            term.out("           an unfinished last line at byte \(pendingTail.offset ?? 0) (a write in progress, or torn; the next write repairs it)")
        }
        term.out("engine     \(engine.summary)")
        term.out("surface    \(ctx.settings.surface)")
        return .ok
    }

    static func bytes(_ n: Int64) -> String {
        if n < 1024 { return "\(n) B" }
        if n < 1 << 20 { return String(format: "%.1f KB", Double(n) / 1024) }
        return String(format: "%.1f MB", Double(n) / 1_048_576)
    }

    /// Files a torn-tail repair left beside the log (`turns.jsonl.torn-<time>`).
    static func tornTailFiles(_ paths: OutboxPaths) -> [(path: String, bytes: Int64)] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: paths.directory)) ?? []
        return names.filter { $0.hasPrefix("turns.jsonl.torn-") }.sorted().map { name in
            let p = paths.directory + "/" + name
            let size = (try? FileManager.default.attributesOfItem(atPath: p)[.size] as? NSNumber)?.int64Value ?? 0
            return (p, size)
        }
    }
}
