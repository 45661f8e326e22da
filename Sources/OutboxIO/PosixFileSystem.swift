#if canImport(Glibc)
@preconcurrency import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Retries a call while it fails with EINTR; any other failure becomes an `IOError`.
@inline(__always)
func retryingInterrupts<T: BinaryInteger>(_ operation: String, _ path: String, _ call: () -> T) throws -> T {
    while true {
        let result = call()
        if result != -1 { return result }
        let code = Errno.current
        if code == .interrupted { continue }
        throw IOError(code, operation, path)
    }
}

/// The real file system, through Glibc. Nothing else in the package calls these functions.
public struct PosixFileSystem: FileSystem {
    public init() {}

    public func open(_ path: String, _ options: OpenOptions, mode: UInt32) throws -> FileDescriptor {
        var flags: Int32 = O_CLOEXEC
        if options.contains(.read) && options.contains(.write) { flags |= O_RDWR }
        else if options.contains(.write) { flags |= O_WRONLY }
        else { flags |= O_RDONLY }
        if options.contains(.create) { flags |= O_CREAT }
        if options.contains(.exclusive) { flags |= O_EXCL }
        if options.contains(.append) { flags |= O_APPEND }
        if options.contains(.truncate) { flags |= O_TRUNC }
        if options.contains(.noFollow) { flags |= O_NOFOLLOW }
        if options.contains(.directory) { flags |= O_DIRECTORY }
        let raw = try retryingInterrupts("open", path) { Glibc.open(path, flags, mode_t(mode)) }
        return FileDescriptor(raw: raw, path: path)
    }

    public func close(_ fd: FileDescriptor) throws {
        // close(2) must not be retried on EINTR on Linux: the descriptor is already gone.
        if Glibc.close(fd.raw) == -1 {
            let code = Errno.current
            if code != .interrupted { throw IOError(code, "close", fd.path) }
        }
    }

    public func write(_ fd: FileDescriptor, _ bytes: UnsafeRawBufferPointer) throws -> Int {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return 0 }
        return try retryingInterrupts("write", fd.path) { Glibc.write(fd.raw, base, bytes.count) }
    }

    public func read(_ fd: FileDescriptor, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws -> Int {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return 0 }
        return try retryingInterrupts("read", fd.path) { pread(fd.raw, base, buffer.count, off_t(offset)) }
    }

    public func fdatasync(_ fd: FileDescriptor) throws {
        _ = try retryingInterrupts("fdatasync", fd.path) { Glibc.fdatasync(fd.raw) }
    }

    public func fsync(_ fd: FileDescriptor) throws {
        _ = try retryingInterrupts("fsync", fd.path) { Glibc.fsync(fd.raw) }
    }

    public func truncate(_ fd: FileDescriptor, to length: Int64) throws {
        _ = try retryingInterrupts("ftruncate", fd.path) { ftruncate(fd.raw, off_t(length)) }
    }

    public func seekToEnd(_ fd: FileDescriptor) throws -> Int64 {
        Int64(try retryingInterrupts("lseek", fd.path) { lseek(fd.raw, 0, SEEK_END) })
    }

    public func status(_ fd: FileDescriptor) throws -> FileStatus {
        var st = stat()
        _ = try retryingInterrupts("fstat", fd.path) { fstat(fd.raw, &st) }
        return FileStatus(st)
    }

    public func linkStatus(_ path: String) throws -> FileStatus? {
        var st = stat()
        while lstat(path, &st) == -1 {
            let code = Errno.current
            if code == .interrupted { continue }
            if code == .noEntry { return nil }
            throw IOError(code, "lstat", path)
        }
        return FileStatus(st)
    }

    public func lock(_ fd: FileDescriptor, _ kind: LockKind, wait: Bool) throws -> Bool {
        var op: Int32 = kind == .shared ? LOCK_SH : LOCK_EX
        if !wait { op |= LOCK_NB }
        while flock(fd.raw, op) == -1 {
            let code = Errno.current
            if code == .interrupted { continue }
            if code == .wouldBlock && !wait { return false }
            throw IOError(code, "flock", fd.path)
        }
        return true
    }

    public func unlock(_ fd: FileDescriptor) throws {
        _ = try retryingInterrupts("flock(LOCK_UN)", fd.path) { flock(fd.raw, LOCK_UN) }
    }

    public func rename(_ from: String, _ to: String) throws {
        _ = try retryingInterrupts("rename", "\(from) -> \(to)") { Glibc.rename(from, to) }
    }

    public func link(_ from: String, _ to: String) throws {
        _ = try retryingInterrupts("link", "\(from) -> \(to)") { Glibc.link(from, to) }
    }

    public func unlink(_ path: String) throws {
        _ = try retryingInterrupts("unlink", path) { Glibc.unlink(path) }
    }

    public func makeDirectory(_ path: String, mode: UInt32) throws {
        _ = try retryingInterrupts("mkdir", path) { mkdir(path, mode_t(mode)) }
    }

    public func removeDirectory(_ path: String) throws {
        _ = try retryingInterrupts("rmdir", path) { rmdir(path) }
    }

    public func listDirectory(_ path: String) throws -> [String] {
        guard let dir = opendir(path) else { throw IOError(Errno.current, "opendir", path) }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    public func syncDirectory(_ path: String) throws {
        let fd = try open(path, [.read, .directory], mode: 0)
        defer { try? close(fd) }
        try fsync(fd)
    }

    public func setMode(_ path: String, _ mode: UInt32) throws {
        _ = try retryingInterrupts("chmod", path) { chmod(path, mode_t(mode)) }
    }
}

extension FileStatus {
    init(_ st: stat) {
        self.init(size: Int64(st.st_size), inode: UInt64(st.st_ino), device: UInt64(st.st_dev),
                  mode: UInt32(st.st_mode),
                  modifiedAt: Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9)
    }
}
