import OutboxIO

/// Why a log refuses writes: the file, the line and byte offset where trust ends, and the reason.
public struct SealInfo: Sendable, Equatable, CustomStringConvertible, Codable {
    public var path: String
    public var line: Int?
    public var offset: Int64?
    public var reason: String

    public init(path: String, line: Int?, offset: Int64?, reason: String) {
        self.path = path; self.line = line; self.offset = offset; self.reason = reason
    }

    public var description: String {
        var where_ = path
        if let line { where_ += ", line \(line)" }
        if let offset { where_ += ", byte offset \(offset)" }
        return "\(where_): \(reason)"
    }
}

public enum StoreError: Error, Sendable, CustomStringConvertible {
    /// The store is sealed: writes are refused until an explicit reset.
    case sealed(SealInfo)
    /// A system call failed; nothing was acknowledged.
    case io(IOError, context: String)
    /// The same id was used with other content.
    case conflict(String)
    case notFound(String)
    /// The operation is not allowed in the turn's current state.
    case illegalTransition(String)
    case invalidInput(String)
    /// Another process holds a lock we need right now.
    case busy(String)

    public var description: String {
        switch self {
        case .sealed(let info):
            return "the outbox is sealed and refuses writes (\(info)); run `outbox reset` to start a fresh log — the damaged one is kept"
        case .io(let e, let context): return "\(context): \(e)"
        case .conflict(let m), .notFound(let m), .illegalTransition(let m), .invalidInput(let m), .busy(let m): return m
        }
    }
}

/// A torn tail that was cut off at open, and where its bytes were kept.
public struct TailRepair: Sendable, Equatable, Codable {
    public var offset: Int64
    public var length: Int
    public var savedAs: String
    public var reason: String
}
