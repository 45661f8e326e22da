/// What a drain run did, for `outbox send`/`status` to print.
public struct DrainReport: Sendable {
    public struct Failure: Sendable, Equatable {
        public var turnID: String
        public var error: String
        /// RFC 3339; nil for needs-attention.
        public var nextAttemptAt: String?
        public var attempt: Int
    }

    /// Turns the engine took with 201 in this run.
    public var delivered: [String] = []
    /// Turns the engine answered 200 for: it already held them (an idempotent replay).
    public var replayed: [String] = []
    /// Turns that may have landed and that the status check found on the engine: marked synced
    /// without being sent again.
    public var foundByStatusCheck: [String] = []
    /// Turns found `syncing` when the drain started (a drain died mid-attempt), put back to queued.
    public var requeuedAtStart: [String] = []
    /// Retryable failures: back to queued with a next attempt time.
    public var failed: [Failure] = []
    /// Turns that went to `failedNeedsAttention` in this run.
    public var needsAttention: [Failure] = []
    /// Queued turns held back behind a turn needing attention: turn id → blocking turn id.
    public var blockedBehind: [String: String] = [:]
    /// Conversations created on (or confirmed by) the engine.
    public var conversationsSynced: [String] = []
    /// Attachments uploaded (PUT) because the engine did not have them.
    public var blobsUploaded = 0
    /// Replies recorded in this run.
    public var replies: [String] = []
    /// Turns retired in this run.
    public var retired = 0
    /// Turns still queued after the run.
    public var pending = 0
    /// Synced turns whose reply is not recorded yet.
    public var awaitingReply = 0
    /// When the earliest queued turn falls due (RFC 3339), if any is waiting.
    public var nextAttemptAt: String?
    /// False when the last call got no HTTP answer at all.
    public var engineReachable = true
    /// The last engine error seen (what, where, why), if any.
    public var lastEngineError: String?
    /// The run stopped on SIGINT/SIGTERM.
    public var stopped = false
    /// HTTP requests made.
    public var requests = 0

    public init() {}

    /// Everything the engine holds now that was ours to send.
    public var settled: Int { delivered.count + replayed.count + foundByStatusCheck.count }

    mutating func merge(_ o: DrainReport) {
        delivered += o.delivered; replayed += o.replayed; foundByStatusCheck += o.foundByStatusCheck
        requeuedAtStart += o.requeuedAtStart; failed += o.failed; needsAttention += o.needsAttention
        conversationsSynced += o.conversationsSynced; blobsUploaded += o.blobsUploaded; replies += o.replies
        retired += o.retired
        blockedBehind = o.blockedBehind; pending = o.pending; awaitingReply = o.awaitingReply
        nextAttemptAt = o.nextAttemptAt; engineReachable = o.engineReachable
        if o.lastEngineError != nil { lastEngineError = o.lastEngineError }
        stopped = stopped || o.stopped
    }
}

/// Progress, as it happens, for a live view (`outbox chat`: queued → sending → thinking → reply).
public enum DrainEvent: Sendable, Equatable {
    /// An attempt at this turn starts (attempt n).
    case sending(turnID: String, attempt: Int)
    /// The engine holds the turn. `how`: delivered, replayed, or foundByStatusCheck.
    case delivered(turnID: String, how: String)
    /// Delivered; the reply is not there yet.
    case thinking(turnID: String)
    case reply(turnID: String, status: String, text: String?, error: String?)
    case failed(turnID: String, error: String, nextAttemptAt: String)
    case needsAttention(turnID: String, error: String)
    case engineUnreachable(error: String, nextProbeAt: String)
    case engineReachable
}
