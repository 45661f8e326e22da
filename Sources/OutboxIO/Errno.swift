#if canImport(Glibc)
@preconcurrency import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An errno value with a name a person can search for.
public struct Errno: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    public static let noSpace = Errno(rawValue: ENOSPC)
    public static let io = Errno(rawValue: EIO)
    public static let interrupted = Errno(rawValue: EINTR)
    public static let wouldBlock = Errno(rawValue: EWOULDBLOCK)
    public static let noEntry = Errno(rawValue: ENOENT)
    public static let exists = Errno(rawValue: EEXIST)
    public static let tooManyLinks = Errno(rawValue: ELOOP)
    public static let notDirectory = Errno(rawValue: ENOTDIR)
    public static let permission = Errno(rawValue: EACCES)
    public static let badDescriptor = Errno(rawValue: EBADF)
    public static let invalid = Errno(rawValue: EINVAL)
    public static let connectionRefused = Errno(rawValue: ECONNREFUSED)
    public static let connectionReset = Errno(rawValue: ECONNRESET)
    public static let brokenPipe = Errno(rawValue: EPIPE)
    public static let again = Errno(rawValue: EAGAIN)
    public static let addressInUse = Errno(rawValue: EADDRINUSE)
    public static let quota = Errno(rawValue: EDQUOT)
    public static let readOnlyFS = Errno(rawValue: EROFS)
    public static let timedOut = Errno(rawValue: ETIMEDOUT)
    public static let inProgress = Errno(rawValue: EINPROGRESS)
    public static let networkUnreachable = Errno(rawValue: ENETUNREACH)
    public static let hostUnreachable = Errno(rawValue: EHOSTUNREACH)

    static var current: Errno { Errno(rawValue: errno) }

    /// Short symbolic name (ENOSPC) where we know it.
    public var name: String {
        switch rawValue {
        case ENOSPC: return "ENOSPC"
        case EIO: return "EIO"
        case EINTR: return "EINTR"
        case EWOULDBLOCK: return "EWOULDBLOCK"
        case ENOENT: return "ENOENT"
        case EEXIST: return "EEXIST"
        case ELOOP: return "ELOOP"
        case ENOTDIR: return "ENOTDIR"
        case EACCES: return "EACCES"
        case EPERM: return "EPERM"
        case EBADF: return "EBADF"
        case EINVAL: return "EINVAL"
        case ECONNREFUSED: return "ECONNREFUSED"
        case ECONNRESET: return "ECONNRESET"
        case EPIPE: return "EPIPE"
        case EADDRINUSE: return "EADDRINUSE"
        case EDQUOT: return "EDQUOT"
        case EROFS: return "EROFS"
        case EISDIR: return "EISDIR"
        case EMFILE: return "EMFILE"
        case ENFILE: return "ENFILE"
        case ETIMEDOUT: return "ETIMEDOUT"
        case EINPROGRESS: return "EINPROGRESS"
        case ENETUNREACH: return "ENETUNREACH"
        case EHOSTUNREACH: return "EHOSTUNREACH"
        default: return "errno \(rawValue)"
        }
    }

    public var description: String {
        "\(String(cString: strerror(rawValue))) (\(name))"
    }
}

/// A failed system call: which call, on what, and why.
public struct IOError: Error, Sendable, CustomStringConvertible, Equatable {
    public var errno: Errno
    public var operation: String
    public var path: String

    public init(_ errno: Errno, _ operation: String, _ path: String) {
        self.errno = errno
        self.operation = operation
        self.path = path
    }

    public var description: String { "\(operation) \(path): \(errno)" }
}
