import Synchronization

/// The calls a fault can be attached to.
public enum FileOperation: String, Sendable, CaseIterable {
    case open, close, write, read, fdatasync, fsync, truncate, seek, status, linkStatus
    case lock, unlock, rename, link, unlink, makeDirectory, removeDirectory, listDirectory
    case syncDirectory, setMode

    /// Calls after which data is promised to be on disk: where a power cut matters most.
    public var isSyncPoint: Bool { self == .fdatasync || self == .fsync || self == .syncDirectory }
}

public enum Fault: Sendable {
    /// The call fails with this errno and does nothing.
    case fail(Errno)
    /// A write lands only this many bytes, then the next call fails with ENOSPC.
    case shortWrite(Int)
    /// The process "dies" here: the handler runs (tests throw or `_exit`).
    case crash
}

/// Thrown by `.crash` faults when the test does not want a real process exit.
public struct SimulatedCrash: Error, Sendable, CustomStringConvertible {
    public var operation: FileOperation
    public var path: String
    public var description: String { "simulated crash at \(operation.rawValue) \(path)" }
}

/// Wraps a real file system and injects faults chosen by a rule, counting every call.
/// The rule sees the operation, the path and the 1-based count of that operation so far.
public final class FaultInjectingFileSystem: FileSystem {
    public typealias Rule = @Sendable (_ op: FileOperation, _ path: String, _ count: Int) -> Fault?

    private let base: any FileSystem
    private let state: Mutex<State>
    private struct State {
        var rule: Rule?
        var counts: [FileOperation: Int] = [:]
        var pendingShortWriteFailure = false
        var log: [String] = []
    }

    public init(base: any FileSystem = PosixFileSystem(), rule: Rule? = nil) {
        self.base = base
        self.state = Mutex(State(rule: rule))
    }

    public func setRule(_ rule: Rule?) { state.withLock { $0.rule = rule } }
    public func count(_ op: FileOperation) -> Int { state.withLock { $0.counts[op] ?? 0 } }
    public var callLog: [String] { state.withLock { $0.log } }

    private func check(_ op: FileOperation, _ path: String) throws -> Fault? {
        let fault: Fault? = state.withLock { s in
            s.counts[op, default: 0] += 1
            s.log.append("\(op.rawValue) \(path)")
            return s.rule?(op, path, s.counts[op]!)
        }
        switch fault {
        case .fail(let code)?: throw IOError(code, op.rawValue, path)
        case .crash?: throw IOError(Errno(rawValue: -1), "simulated crash at \(op.rawValue)", path)
        default: return fault
        }
    }

    public func open(_ path: String, _ options: OpenOptions, mode: UInt32) throws -> FileDescriptor {
        _ = try check(.open, path); return try base.open(path, options, mode: mode)
    }
    public func close(_ fd: FileDescriptor) throws {
        do { _ = try check(.close, fd.path) } catch { try? base.close(fd); throw error }
        try base.close(fd)
    }
    public func write(_ fd: FileDescriptor, _ bytes: UnsafeRawBufferPointer) throws -> Int {
        let failNow = state.withLock { s -> Bool in
            defer { s.pendingShortWriteFailure = false }
            return s.pendingShortWriteFailure
        }
        if failNow { throw IOError(.noSpace, "write", fd.path) }
        if case .shortWrite(let n)? = try check(.write, fd.path) {
            let landed = min(n, bytes.count)
            state.withLock { $0.pendingShortWriteFailure = true }
            if landed == 0 { throw IOError(.noSpace, "write", fd.path) }
            return try base.write(fd, UnsafeRawBufferPointer(rebasing: bytes[0..<landed]))
        }
        return try base.write(fd, bytes)
    }
    public func read(_ fd: FileDescriptor, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws -> Int {
        _ = try check(.read, fd.path); return try base.read(fd, into: buffer, at: offset)
    }
    public func fdatasync(_ fd: FileDescriptor) throws { _ = try check(.fdatasync, fd.path); try base.fdatasync(fd) }
    public func fsync(_ fd: FileDescriptor) throws { _ = try check(.fsync, fd.path); try base.fsync(fd) }
    public func truncate(_ fd: FileDescriptor, to length: Int64) throws {
        _ = try check(.truncate, fd.path); try base.truncate(fd, to: length)
    }
    public func seekToEnd(_ fd: FileDescriptor) throws -> Int64 { _ = try check(.seek, fd.path); return try base.seekToEnd(fd) }
    public func status(_ fd: FileDescriptor) throws -> FileStatus { _ = try check(.status, fd.path); return try base.status(fd) }
    public func linkStatus(_ path: String) throws -> FileStatus? { _ = try check(.linkStatus, path); return try base.linkStatus(path) }
    public func lock(_ fd: FileDescriptor, _ kind: LockKind, wait: Bool) throws -> Bool {
        _ = try check(.lock, fd.path); return try base.lock(fd, kind, wait: wait)
    }
    public func unlock(_ fd: FileDescriptor) throws { _ = try check(.unlock, fd.path); try base.unlock(fd) }
    public func rename(_ from: String, _ to: String) throws { _ = try check(.rename, to); try base.rename(from, to) }
    public func link(_ from: String, _ to: String) throws { _ = try check(.link, to); try base.link(from, to) }
    public func unlink(_ path: String) throws { _ = try check(.unlink, path); try base.unlink(path) }
    public func makeDirectory(_ path: String, mode: UInt32) throws { _ = try check(.makeDirectory, path); try base.makeDirectory(path, mode: mode) }
    public func removeDirectory(_ path: String) throws { _ = try check(.removeDirectory, path); try base.removeDirectory(path) }
    public func listDirectory(_ path: String) throws -> [String] { _ = try check(.listDirectory, path); return try base.listDirectory(path) }
    public func syncDirectory(_ path: String) throws { _ = try check(.syncDirectory, path); try base.syncDirectory(path) }
    public func setMode(_ path: String, _ mode: UInt32) throws { _ = try check(.setMode, path); try base.setMode(path, mode) }
}
