import OutboxFormat

extension Outbox {
    /// Records a batch of drain transitions in one write and one fdatasync. Each is checked
    /// against the state it meets (earlier ones in the batch included); an illegal one fails the
    /// whole batch and nothing is written.
    @discardableResult
    public func apply(_ transitions: [Transition]) throws -> [Turn] {
        if transitions.isEmpty { return [] }
        try commit { state in
            var scratch = state
            var records: [OutboxRecord] = []
            for tr in transitions {
                let rec = try record(for: tr, in: scratch)
                var probe = LogEntry(seq: scratch.lastSeq + 1, type: rec.typeName, at: now(), fields: rec.fields)
                probe.line = 0
                if let reason = scratch.apply(probe) { throw StoreError.illegalTransition(reason) }
                records.append(rec)
            }
            return (records, ())
        }
        return transitions.compactMap { turn($0.turnID) }
    }

    public func apply(_ transition: Transition) throws {
        try apply([transition])
    }

    private func record(for tr: Transition, in state: OutboxState) throws -> OutboxRecord {
        if case .conversationSynced(let id, let origin) = tr {
            guard state.conversations[id] != nil else { throw StoreError.notFound("no conversation \(id)") }
            return .conversationSynced(id: id, originSurface: origin)
        }
        guard let t = state.turns[tr.turnID] else { throw StoreError.notFound("no turn \(tr.turnID) in this outbox") }
        func refuse(_ what: String) -> StoreError {
            .illegalTransition("turn \(t.id) is \(t.state.rawValue); it cannot \(what)")
        }
        switch tr {
        case .syncing:
            guard t.state == .queued else { throw refuse("start an attempt") }
            return .state(id: t.id, state: .syncing, attempt: t.attempt + 1, nextAttemptAt: nil, error: nil, answer: nil, reason: nil)
        case .synced(_, let answer):
            guard t.state == .queued || t.state == .syncing else { throw refuse("be marked synced") }
            return .state(id: t.id, state: .synced, attempt: t.attempt, nextAttemptAt: nil, error: nil, answer: answer, reason: nil)
        case .failed(_, let error, let next, let spends):
            guard t.state == .syncing || t.state == .queued else { throw refuse("be rescheduled") }
            let attempt = spends ? t.attempt : max(0, t.attempt - (t.state == .syncing ? 1 : 0))
            return .state(id: t.id, state: .queued, attempt: attempt, nextAttemptAt: next, error: error, answer: nil, reason: "retry-later")
        case .needsAttention(_, let error):
            guard t.state == .syncing || t.state == .queued else { throw refuse("be marked as needing attention") }
            return .state(id: t.id, state: .failedNeedsAttention, attempt: t.attempt, nextAttemptAt: nil, error: error, answer: nil, reason: nil)
        case .rejected(_, let error):
            guard t.state == .syncing || t.state == .queued else { throw refuse("be marked as rejected") }
            return .state(id: t.id, state: .failedNeedsAttention, attempt: t.attempt, nextAttemptAt: nil, error: error, answer: nil,
                          reason: OutboxState.rejectedReason)
        case .requeue(_, let reason):
            guard t.state == .syncing else { throw refuse("go back to queued") }
            return .state(id: t.id, state: .queued, attempt: t.attempt, nextAttemptAt: nil, error: t.lastError, answer: nil, reason: reason)
        case .retry:
            guard t.state == .failedNeedsAttention || t.state == .queued else { throw refuse("be retried") }
            return .state(id: t.id, state: .queued, attempt: 0, nextAttemptAt: nil, error: nil, answer: nil, reason: "retry")
        case .reply(_, let status, let text, let error):
            guard t.state == .synced else { throw refuse("take a reply") }
            return .reply(id: t.id, status: status, text: text, error: error)
        case .conversationSynced:
            fatalError("handled above")
        }
    }

    /// Cancels a turn that was never sent (queued, or needing attention, with no attempt made),
    /// then deletes attachment bytes no live turn needs. Record first, files after.
    public func cancel(_ id: String) throws {
        try commit { state in
            guard let t = state.turns[id] else { throw StoreError.notFound("no turn \(id) in this outbox") }
            guard t.state == .queued || t.state == .failedNeedsAttention else {
                throw StoreError.illegalTransition("turn \(id) is \(t.state.rawValue); only a turn that was never sent can be cancelled")
            }
            guard !t.mayHaveLanded else {
                throw StoreError.illegalTransition("turn \(id) was already sent (attempt \(t.attempt)) and may have reached the engine; it cannot be cancelled")
            }
            return ([OutboxRecord.cancelled(id: id)], ())
        }
        _ = try? deleteUnreferencedBlobs()
    }
}
