import OutboxFormat

/// The outbox folded from its log: pure, one entry at a time. A record that makes no sense here
/// (a transition for an unknown turn, a state change the machine does not allow) is returned as
/// a reason, and the store seals at that line.
public struct OutboxState: Sendable {
    public private(set) var conversations: [String: Conversation] = [:]
    public private(set) var conversationOrder: [String] = []
    public private(set) var turns: [String: Turn] = [:]
    public private(set) var turnOrder: [String] = []
    /// Records in the current file, and the sequence number of the last one.
    public private(set) var recordCount = 0
    public private(set) var lastSeq: Int64 = 0

    public init() {}

    /// The `reason` of a `failedNeedsAttention` record written when the engine refused the turn.
    public static let rejectedReason = "rejected"

    /// Whether `from → to` is a move the state machine allows (docs/FORMAT.md, "Transitions").
    public static func allows(_ from: TurnState, _ to: TurnState) -> Bool {
        switch (from, to) {
        case (.queued, .syncing), (.queued, .synced), (.queued, .failedNeedsAttention), (.queued, .queued): return true
        case (.syncing, .synced), (.syncing, .queued), (.syncing, .failedNeedsAttention): return true
        case (.failedNeedsAttention, .queued): return true
        default: return false
        }
    }

    public mutating func apply(_ entry: LogEntry) -> String? {
        let record: OutboxRecord
        do { record = try OutboxRecord(type: entry.type, fields: entry.fields) } catch { return error.description }
        return apply(record, entry)
    }

    /// Applies a record already in hand (the writer's own, just appended as `entry`): no decode.
    public mutating func apply(_ record: OutboxRecord, _ entry: LogEntry) -> String? {
        recordCount += 1
        lastSeq = entry.seq
        switch record {
        case let .conversation(id, title, origin, createdAt):
            if conversations[id] != nil { return "conversation \(id) is created twice" }
            conversations[id] = Conversation(id: id, title: title, originSurface: origin, createdAt: createdAt,
                                             engineOriginSurface: nil, seq: entry.seq, recordedAt: entry.at)
            conversationOrder.append(id)
        case let .conversationSynced(id, origin):
            guard conversations[id] != nil else { return "conversation.synced for unknown conversation \(id)" }
            conversations[id]!.engineOriginSurface = origin
        case let .turn(id, conversation, text, attachments, surface, createdAt):
            if let old = turns[id], old.isLive { return "turn \(id) is enqueued twice" }
            guard conversations[conversation] != nil else { return "turn \(id) names unknown conversation \(conversation)" }
            if turns[id] == nil { turnOrder.append(id) }
            let previous = turns[id]
            turns[id] = Turn(id: id, conversationID: conversation, text: text, attachments: attachments, surface: surface,
                             createdAt: createdAt, state: .queued, attempt: 0, nextAttemptAt: nil, lastError: nil,
                             engineAnswer: nil, reply: nil, mayHaveLanded: false, enqueuedSeq: entry.seq, enqueuedAt: entry.at,
                             updatedAt: entry.at, syncedAt: nil)
            account(previous, turns[id]!)
        case let .state(id, to, attempt, next, error, answer, reason):
            guard var t = turns[id] else { return "state change for unknown turn \(id)" }
            guard Self.allows(t.state, to) else { return "turn \(id) cannot go from \(t.state.rawValue) to \(to.rawValue)" }
            if to == .syncing { t.mayHaveLanded = true }
            // The engine refused the POST itself: it does not hold the turn.
            if to == .failedNeedsAttention && reason == Self.rejectedReason { t.mayHaveLanded = false }
            if to == .synced { t.syncedAt = entry.at; t.engineAnswer = answer; t.mayHaveLanded = true }
            if to == .queued && reason == "retry" { t.lastError = nil }
            t.state = to
            t.attempt = attempt
            t.nextAttemptAt = next
            if let error { t.lastError = error } else if to == .synced { t.lastError = nil }
            t.updatedAt = entry.at
            account(turns[id], t)
            turns[id] = t
        case let .reply(id, status, text, error):
            guard var t = turns[id] else { return "reply for unknown turn \(id)" }
            guard t.state == .synced else { return "reply for turn \(id), which is \(t.state.rawValue), not synced" }
            t.reply = Reply(status: status, text: text, error: error, at: entry.at)
            t.updatedAt = entry.at
            account(turns[id], t)
            turns[id] = t
        case let .retired(id):
            guard var t = turns[id] else { return "retired record for unknown turn \(id)" }
            guard t.state == .synced else { return "turn \(id) is retired while \(t.state.rawValue), not synced" }
            t.state = .retired
            t.updatedAt = entry.at
            account(turns[id], t)
            turns[id] = t
        case let .cancelled(id):
            guard var t = turns[id] else { return "cancelled record for unknown turn \(id)" }
            guard t.state == .queued || t.state == .failedNeedsAttention, !t.mayHaveLanded else {
                return "turn \(id) is cancelled while \(t.state.rawValue) after an attempt"
            }
            t.state = .cancelled
            t.updatedAt = entry.at
            account(turns[id], t)
            turns[id] = t
        }
        return nil
    }

    /// Turns in enqueue order.
    public var orderedTurns: [Turn] { turnOrder.compactMap { turns[$0] } }
    public var orderedConversations: [Conversation] { conversationOrder.compactMap { conversations[$0] } }

    /// Records a compacted log needs: the live state and nothing else.
    /// Kept up to date by `apply`, so checking it on every write costs nothing.
    public var liveRecordEstimate: Int { conversations.count * 2 + liveTurnCount * 2 + liveReplyCount }
    private var liveTurnCount = 0
    private var liveReplyCount = 0

    /// Keeps the live counts in step when a turn changes (nil: did not exist).
    private mutating func account(_ old: Turn?, _ new: Turn) {
        if let old, old.isLive { liveTurnCount -= 1; if old.reply != nil { liveReplyCount -= 1 } }
        if new.isLive { liveTurnCount += 1; if new.reply != nil { liveReplyCount += 1 } }
    }

    /// The records that rebuild this state (compaction): every conversation; every live turn
    /// with its current state and reply. Each keeps its original time.
    public func compactedRecords() -> [Journal.NewRecord] {
        var out: [Journal.NewRecord] = []
        for c in orderedConversations {
            let rec = OutboxRecord.conversation(id: c.id, title: c.title, originSurface: c.originSurface, createdAt: c.createdAt)
            out.append(.init(type: rec.typeName, fields: rec.fields, at: c.recordedAt))
            if let origin = c.engineOriginSurface {
                let s = OutboxRecord.conversationSynced(id: c.id, originSurface: origin)
                out.append(.init(type: s.typeName, fields: s.fields, at: c.recordedAt))
            }
        }
        for t in orderedTurns where t.isLive {
            let rec = OutboxRecord.turn(id: t.id, conversation: t.conversationID, text: t.text, attachments: t.attachments,
                                        surface: t.surface, createdAt: t.createdAt)
            out.append(.init(type: rec.typeName, fields: rec.fields, at: t.enqueuedAt))
            if t.state != .queued || t.attempt > 0 || t.mayHaveLanded || t.lastError != nil || t.nextAttemptAt != nil {
                // A turn that may have landed keeps an attempt record so the compacted log
                // still says "ask the engine before resending".
                if t.mayHaveLanded && t.state != .syncing && t.state != .synced {
                    let s1 = OutboxRecord.state(id: t.id, state: .syncing, attempt: max(t.attempt, 1), nextAttemptAt: nil,
                                                error: nil, answer: nil, reason: "compacted")
                    out.append(.init(type: s1.typeName, fields: s1.fields, at: t.updatedAt))
                }
                let s = OutboxRecord.state(id: t.id, state: t.state, attempt: t.attempt, nextAttemptAt: t.nextAttemptAt,
                                           error: t.lastError, answer: t.engineAnswer, reason: "compacted")
                out.append(.init(type: s.typeName, fields: s.fields, at: t.syncedAt ?? t.updatedAt))
            }
            if let r = t.reply {
                let rr = OutboxRecord.reply(id: t.id, status: r.status, text: r.text, error: r.error)
                out.append(.init(type: rr.typeName, fields: rr.fields, at: r.at))
            }
        }
        return out
    }
}
