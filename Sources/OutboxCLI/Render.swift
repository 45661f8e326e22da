import Foundation
import OutboxFormat
import OutboxStore

/// Shared rendering: durations, tables, and the JSON shapes of turns and conversations.
enum Render {
    static func nowMillis() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)) }

    /// "4s", "3m 05s", "2h 10m", "3d 4h".
    static func duration(millis: Int64) -> String {
        let s = max(0, millis / 1000)
        if s < 60 { return "\(s)s" }
        if s < 3600 { return "\(s / 60)m \(pad2(s % 60))s" }
        if s < 86_400 { return "\(s / 3600)h \(pad2((s % 3600) / 60))m" }
        return "\(s / 86_400)d \((s % 86_400) / 3600)h"
    }

    /// "1 turn", "2 turns"; `plural` for the irregular ones ("1 reply", "2 replies").
    static func count(_ n: Int, _ singular: String, _ plural: String? = nil) -> String {
        "\(n) \(n == 1 ? singular : plural ?? singular + "s")"
    }

    /// "needs" for one, "need" for several: "1 turn needs", "2 turns need".
    static func verb(_ n: Int, _ one: String, _ many: String) -> String { n == 1 ? one : many }

    static func pad2(_ v: Int64) -> String { v < 10 ? "0\(v)" : "\(v)" }

    /// "12s ago" for a timestamp in the past.
    static func ago(_ ts: String, now: Int64 = nowMillis()) -> String {
        guard let t = Timestamp.parse(ts) else { return ts }
        return duration(millis: now - t) + " ago"
    }

    /// "in 12s" / "now" for a timestamp that may be in the future.
    static func until(_ ts: String, now: Int64 = nowMillis()) -> String {
        guard let t = Timestamp.parse(ts) else { return ts }
        return t <= now ? "now" : "in " + duration(millis: t - now)
    }

    /// One line, at most `max` characters, with an ellipsis when cut.
    static func clip(_ s: String, _ max: Int) -> String {
        let flat = s.map { $0.isNewline || $0 == "\t" ? " " : $0 }
        let str = String(flat)
        if str.count <= max { return str }
        return String(str.prefix(Swift.max(1, max - 1))) + "…"
    }

    /// Columns padded to their widest cell; the last column is not padded.
    static func table(_ header: [String], _ rows: [[String]]) -> [String] {
        let all = [header] + rows
        var widths = [Int](repeating: 0, count: header.count)
        for r in all { for (i, c) in r.enumerated() where i < widths.count { widths[i] = max(widths[i], c.count) } }
        return all.map { r in
            r.enumerated().map { i, c in i == r.count - 1 ? c : c + String(repeating: " ", count: widths[i] - c.count) }
                .joined(separator: "  ")
        }
    }

    /// A state as people read it.
    static func stateName(_ s: TurnState) -> String {
        switch s {
        case .failedNeedsAttention: return "needs-attention"
        default: return s.rawValue
        }
    }

    /// Accepts either spelling for --state.
    static func parseState(_ s: String) -> TurnState? {
        if let t = TurnState(rawValue: s) { return t }
        switch s.lowercased() {
        case "needs-attention", "needsattention", "failed", "failedneedsattention", "failed-needs-attention": return .failedNeedsAttention
        default: return TurnState(rawValue: s.lowercased())
        }
    }

    // MARK: - JSON

    static func json(_ v: JSONValue) -> String { String(decoding: JSONWriter.encode(v), as: UTF8.self) }

    static func turnJSON(_ t: Turn) -> JSONValue {
        var o: JSONObject = [
            "id": .string(t.id),
            "conversation": .string(t.conversationID),
            "state": .string(t.state.rawValue),
            "text": .string(t.text),
            "surface": .string(t.surface),
            "attempt": .int(Int64(t.attempt)),
            "createdAt": .string(t.createdAt),
            "enqueuedAt": .string(t.enqueuedAt),
            "updatedAt": .string(t.updatedAt),
            "nextAttemptAt": .optional(t.nextAttemptAt),
            "lastError": .optional(t.lastError),
            "mayHaveLanded": .bool(t.mayHaveLanded),
            "syncedAt": .optional(t.syncedAt),
        ]
        o["attachments"] = .array(t.attachments.map { a in
            .object(["sha256": .string(a.sha256), "name": .string(a.name), "size": .int(a.size), "type": .string(a.type)])
        })
        if let e = t.engineAnswer {
            o["engine"] = .object(["http": .int(Int64(e.httpStatus)), "status": .string(e.status), "replayed": .bool(e.replayed)])
        } else {
            o["engine"] = .null
        }
        o["reply"] = replyJSON(t.reply)
        return .object(o)
    }

    static func replyJSON(_ r: Reply?) -> JSONValue {
        guard let r else { return .null }
        return .object(["status": .string(r.status), "text": .optional(r.text), "error": .optional(r.error), "at": .string(r.at)])
    }

    static func conversationJSON(_ c: Conversation, turns: [Turn]) -> JSONValue {
        let mine = turns.filter { $0.conversationID == c.id }
        return .object([
            "id": .string(c.id),
            "title": .string(c.title),
            "originSurface": .string(c.originSurface),
            "createdAt": .string(c.createdAt),
            "state": .string(conversationState(c, turns: mine)),
            "onEngine": .bool(c.isOnEngine),
            "engineOriginSurface": .optional(c.engineOriginSurface),
            "turns": .int(Int64(mine.count)),
            "pending": .int(Int64(mine.filter(\.isPending).count)),
        ])
    }

    /// "needs-attention", "pending", "synced" (on the engine) or "local" (not yet on the engine).
    static func conversationState(_ c: Conversation, turns: [Turn]) -> String {
        if turns.contains(where: { $0.state == .failedNeedsAttention }) { return "needs-attention" }
        if turns.contains(where: \.isPending) { return "pending" }
        return c.isOnEngine ? "synced" : "local"
    }

    static func sealJSON(_ s: SealInfo?) -> JSONValue {
        guard let s else { return .null }
        return .object(["path": .string(s.path), "line": s.line.map { .int(Int64($0)) } ?? .null,
                        "offset": .optional(s.offset), "reason": .string(s.reason)])
    }

    /// A log entry as the object it is on disk (envelope first, then its fields).
    static func entryJSON(_ e: LogEntry) -> JSONValue {
        var o: JSONObject = ["v": .int(Int64(e.version)), "seq": .int(e.seq), "type": .string(e.type), "at": .string(e.at)]
        for p in e.fields.pairs { o[p.key] = p.value }
        o["line"] = .int(Int64(e.line))
        o["offset"] = .int(e.offset)
        return .object(o)
    }
}
