import OutboxFormat
import OutboxStore

/// What to do about a failed engine call (pure). docs/DRAIN.md, "Failures".
public enum FailureDisposition: Sendable, Equatable {
    /// Back to `queued` with a next attempt time. `engineDown` when no HTTP answer came at all:
    /// the rest of the pass is put off and watch mode probes the engine's health on the backoff.
    case retryLater(spendsAttempt: Bool, retryAfterMillis: Int64?, engineDown: Bool)
    /// Retrying cannot fix it: `failedNeedsAttention` at once, with the engine's message.
    case needsAttention

    public static func classify(_ e: EngineError) -> FailureDisposition {
        switch e.kind {
        case .transport:
            return .retryLater(spendsAttempt: true, retryAfterMillis: nil, engineDown: true)
        case .malformed:
            // A success status with a body we cannot read: something in between garbled it, or an
            // engine of another version. Retry on the budget; the give-up point surfaces it.
            return .retryLater(spendsAttempt: true, retryAfterMillis: nil, engineDown: false)
        case .http(let status, _, _):
            switch status {
            case 409: return .retryLater(spendsAttempt: false, retryAfterMillis: e.retryAfterMillis, engineDown: false)
            case 408, 429, 500...599: return .retryLater(spendsAttempt: true, retryAfterMillis: e.retryAfterMillis, engineDown: false)
            // A blob the drain uploaded (or saw) before the turn is gone from the engine: the
            // next attempt uploads it again.
            case 424: return .retryLater(spendsAttempt: true, retryAfterMillis: e.retryAfterMillis, engineDown: false)
            default: return .needsAttention
            }
        }
    }
}

/// One pass's work, chosen from the outbox's turns (pure).
public struct DrainPlan: Sendable {
    /// Turns to deliver now, grouped by conversation; each group in enqueue order and contiguous
    /// from the conversation's first undelivered turn.
    public var groups: [[Turn]] = []
    /// Queued turns held back by an earlier turn of their conversation that needs attention:
    /// turn id → the id of the turn it waits behind.
    public var blockedBehind: [String: String] = [:]
    /// The earliest time a queued turn that is not due yet falls due (ms since 1970).
    public var nextDueAt: Int64?
    /// Queued turns not in this pass (not due, behind a not-due turn, or over the batch size).
    public var waiting = 0
    public var count: Int { groups.reduce(0) { $0 + $1.count } }

    /// - limit: at most this many turns in the pass.
    /// - ignoreBackoff: treat every queued turn as due (the engine just came back).
    public static func make(turns: [Turn], now: Int64, limit: Int, ignoreBackoff: Bool = false) -> DrainPlan {
        var plan = DrainPlan()
        var byConversation: [String: [Turn]] = [:]
        var order: [String] = []
        for t in turns where t.isLive {
            if byConversation[t.conversationID] == nil { order.append(t.conversationID) }
            byConversation[t.conversationID, default: []].append(t)
        }
        var budget = limit
        for c in order {
            var group: [Turn] = []
            var stopped = false
            var blocker: String?
            for t in byConversation[c]! {
                switch t.state {
                case .synced, .retired, .cancelled:
                    continue
                case .failedNeedsAttention:
                    if blocker == nil { blocker = t.id }
                    stopped = true
                case .syncing:
                    // Only a drain holding the lock moves turns to syncing; a pass never starts
                    // with one. Hold the conversation rather than overtake it.
                    stopped = true
                case .queued:
                    if let b = blocker { plan.blockedBehind[t.id] = b; continue }
                    if stopped || budget == 0 { plan.waiting += 1; continue }
                    let due = t.nextAttemptAt.flatMap(Timestamp.parse) ?? Int64.min
                    if !ignoreBackoff && due > now {
                        plan.nextDueAt = min(plan.nextDueAt ?? due, due)
                        plan.waiting += 1
                        stopped = true
                        continue
                    }
                    group.append(t)
                    budget -= 1
                }
            }
            if !group.isEmpty { plan.groups.append(group) }
        }
        return plan
    }

    /// For `outbox status`: queued turns waiting behind a turn that needs attention.
    public static func blockedTurns(in turns: [Turn]) -> [String: String] {
        make(turns: turns, now: Int64.max, limit: 0).blockedBehind
    }
}
