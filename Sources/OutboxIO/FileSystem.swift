/// An open file descriptor, carrying the path it was opened by so every error can name it.
public struct FileDescriptor: Sendable, Hashable, CustomStringConvertible {
    public let raw: Int32
    public let path: String
    public init(raw: Int32, path: String) { self.raw = raw; self.path = path }
    public var description: String { "\(path) (fd \(raw))" }
}

/// What we need to know about a file.
public struct FileStatus: Sendable, Equatable {
    public var size: Int64
    public var inode: UInt64
    public var device: UInt64
    public var mode: UInt32
    public var modifiedAt: Double  // seconds since 1970
    public var isDirectory: Bool { mode & 0o170000 == 0o040000 }
    public var isRegular: Bool { mode & 0o170000 == 0o100000 }
    public var isSymlink: Bool { mode & 0o170000 == 0o120000 }
    public init(size: Int64, inode: UInt64, device: UInt64, mode: UInt32, modifiedAt: Double) {
        self.size = size; self.inode = inode; self.device = device; self.mode = mode; self.modifiedAt = modifiedAt
    }
}

public struct OpenOptions: OptionSet, Sendable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let read = OpenOptions(rawValue: 1 << 0)
    public static let write = OpenOptions(rawValue: 1 << 1)
    public static let create = OpenOptions(rawValue: 1 << 2)
    public static let exclusive = OpenOptions(rawValue: 1 << 3)
    public static let append = OpenOptions(rawValue: 1 << 4)
    public static let truncate = OpenOptions(rawValue: 1 << 5)
    /// Refuse to follow a symbolic link in the last path component.
    public static let noFollow = OpenOptions(rawValue: 1 << 6)
    public static let directory = OpenOptions(rawValue: 1 << 7)
}

public enum LockKind: Sendable { case shared, exclusive }

/// Every file system call the outbox makes. `PosixFileSystem` is the real one; tests wrap it
/// (`FaultInjectingFileSystem`) to inject ENOSPC, EIO, short writes and crashes at sync points.
/// Implementations retry EINTR and throw `IOError` for every other failure.
public protocol FileSystem: Sendable {
    func open(_ path: String, _ options: OpenOptions, mode: UInt32) throws -> FileDescriptor
    func close(_ fd: FileDescriptor) throws
    /// One write(2) call at the current offset: may be short.
    func write(_ fd: FileDescriptor, _ bytes: UnsafeRawBufferPointer) throws -> Int
    /// One pread(2) call: may return fewer bytes; 0 at end of file.
    func read(_ fd: FileDescriptor, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws -> Int
    func fdatasync(_ fd: FileDescriptor) throws
    func fsync(_ fd: FileDescriptor) throws
    func truncate(_ fd: FileDescriptor, to length: Int64) throws
    func seekToEnd(_ fd: FileDescriptor) throws -> Int64
    func status(_ fd: FileDescriptor) throws -> FileStatus
    /// lstat(2): nil when the path does not exist.
    func linkStatus(_ path: String) throws -> FileStatus?
    /// flock(2). Returns false when `wait` is false and another holder has it.
    func lock(_ fd: FileDescriptor, _ kind: LockKind, wait: Bool) throws -> Bool
    func unlock(_ fd: FileDescriptor) throws
    func rename(_ from: String, _ to: String) throws
    func link(_ from: String, _ to: String) throws
    func unlink(_ path: String) throws
    func makeDirectory(_ path: String, mode: UInt32) throws
    func removeDirectory(_ path: String) throws
    func listDirectory(_ path: String) throws -> [String]
    func syncDirectory(_ path: String) throws
    func setMode(_ path: String, _ mode: UInt32) throws
}
