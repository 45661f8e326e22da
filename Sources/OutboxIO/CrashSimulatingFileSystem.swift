import Synchronization

/// A `FileSystem` that knows what a power cut would leave behind, in the style of SQLite's
/// test6.c and ALICE (OSDI 2014). Every call passes through to the real file system, so the
/// process sees ordinary files; beside that, a `SimulatedDisk` tracks, for everything under
/// `root`, which bytes and which directory entries are durable and which are not yet (see
/// `SimulatedDisk` for the rules). Before every sync call (fsync, fdatasync, fsync of a
/// directory) it records a crash point — a copy of the model — and a test may add its own with
/// `markCrashPoint`. From a crash point, `SimulatedDisk.crashStates` builds the trees a power cut
/// there could leave, and `CrashState.materialize` writes one into a real directory so the real
/// code can recover it.
///
/// Sync calls are not passed to the real disk (nothing real depends on them here). flock passes
/// through. `root` must exist and be empty; paths outside it pass through unmodelled.
public final class CrashSimulatingFileSystem: FileSystem {
    public struct CrashPoint: Sendable {
        /// The call about to run ("fdatasync /…/turns.jsonl") or the test's own label.
        public var label: String
        /// The test's phase when the point was recorded (`setPhase`).
        public var phase: Int
        public var disk: SimulatedDisk
    }

    public let root: String
    private let base: PosixFileSystem
    private let state: Mutex<State>

    private struct OpenFile {
        var inode: SimulatedDisk.InodeID
        var position: Int
        var append: Bool
    }

    private struct State {
        var disk = SimulatedDisk()
        var open: [Int32: OpenFile] = [:]
        var points: [CrashPoint] = []
        var phase = 0
        var recording = true
        var everyChange = false
        var syncCalls = 0

        mutating func point(_ label: String) {
            if recording { points.append(CrashPoint(label: label, phase: phase, disk: disk)) }
        }
        mutating func beforeChange(_ label: String) {
            if everyChange { point("before " + label) }
        }
    }

    public init(root: String) throws {
        var r = root
        while r.count > 1 && r.hasSuffix("/") { r.removeLast() }
        self.root = r
        self.base = PosixFileSystem()
        self.state = Mutex(State())
        guard let st = try base.linkStatus(r), st.isDirectory else { throw IOError(.notDirectory, "crash simulator root", r) }
        guard try base.listDirectory(r).isEmpty else { throw IOError(.exists, "crash simulator root (must be empty)", r) }
    }

    // MARK: - crash points

    public func setPhase(_ phase: Int) { state.withLock { $0.phase = phase } }
    /// Turns recording of crash points on or off (sync calls still update the model).
    public func setRecording(_ on: Bool) { state.withLock { $0.recording = on } }
    /// Also record a crash point before every call that changes a file or a directory (ALICE's
    /// "crash after any prefix of the trace"), not only before sync calls.
    public func setCrashPointBeforeEveryChange(_ on: Bool) { state.withLock { $0.everyChange = on } }
    public func markCrashPoint(_ label: String) {
        state.withLock { s in s.points.append(CrashPoint(label: label, phase: s.phase, disk: s.disk)) }
    }
    /// The crash points recorded so far, handed over and forgotten here.
    public func takeCrashPoints() -> [CrashPoint] {
        state.withLock { s in defer { s.points = [] }; return s.points }
    }
    public var disk: SimulatedDisk { state.withLock { $0.disk } }
    public var syncCalls: Int { state.withLock { $0.syncCalls } }

    /// Differences between the model's volatile view and the real files (empty when the model
    /// is faithful): a self-check for tests.
    public func divergences() -> [String] {
        let disk = self.disk
        var out: [String] = []
        var modelled = Set<String>()
        for (path, node) in disk.volatilePaths() {
            modelled.insert(path)
            let real = root + "/" + path
            switch node {
            case .directory:
                if ((try? base.linkStatus(real)) ?? nil)?.isDirectory != true { out.append("\(path): not a directory on disk") }
            case .file(let i):
                guard let bytes = try? base.readFile(real) else { out.append("\(path): missing on disk"); continue }
                if bytes != disk.volatileBytes(i) { out.append("\(path): \(bytes.count) bytes on disk, \(disk.size(i)) in the model") }
            }
        }
        func visit(_ rel: String) {
            let dir = rel.isEmpty ? root : root + "/" + rel
            for name in (try? base.listDirectory(dir)) ?? [] {
                let p = rel.isEmpty ? name : rel + "/" + name
                if !modelled.contains(p) { out.append("\(p): on disk, not in the model") }
                if ((try? base.linkStatus(dir + "/" + name)) ?? nil)?.isDirectory == true { visit(p) }
            }
        }
        visit("")
        return out
    }

    // MARK: - paths

    /// Components under root, or nil for a path outside it.
    private func components(_ path: String) -> [String]? {
        if path == root { return [] }
        guard path.hasPrefix(root + "/") else { return nil }
        return path.dropFirst(root.count + 1).split(separator: "/").map(String.init)
    }

    private func parentAndName(_ path: String, _ disk: SimulatedDisk) -> (SimulatedDisk.DirectoryID, String)? {
        guard let c = components(path), let name = c.last, let parent = disk.directory(Array(c.dropLast())) else { return nil }
        return (parent, name)
    }

    // MARK: - FileSystem

    public func open(_ path: String, _ options: OpenOptions, mode: UInt32) throws -> FileDescriptor {
        guard let c = components(path) else { return try base.open(path, options, mode: mode) }
        return try state.withLock { s in
            let existing = s.disk.lookup(c)
            if existing == nil && options.contains(.create) || options.contains(.truncate) { s.beforeChange("open \(path)") }
            let fd = try base.open(path, options, mode: mode)
            var inode: SimulatedDisk.InodeID?
            if existing == nil, options.contains(.create), let (parent, name) = parentAndName(path, s.disk) {
                inode = s.disk.createFile(in: parent, name)
            } else if case .file(let i)? = existing {
                inode = i
                if options.contains(.truncate) && options.contains(.write) && s.disk.size(i) > 0 { s.disk.truncate(i, to: 0) }
            }
            if let inode { s.open[fd.raw] = OpenFile(inode: inode, position: 0, append: options.contains(.append)) }
            return fd
        }
    }

    public func close(_ fd: FileDescriptor) throws {
        state.withLock { _ = $0.open.removeValue(forKey: fd.raw) }
        try base.close(fd)
    }

    public func write(_ fd: FileDescriptor, _ bytes: UnsafeRawBufferPointer) throws -> Int {
        try state.withLock { s in
            if s.open[fd.raw] != nil { s.beforeChange("write \(fd.path)") }
            let n = try base.write(fd, bytes)
            if var f = s.open[fd.raw], n > 0 {
                let offset = f.append ? s.disk.size(f.inode) : f.position
                s.disk.write(f.inode, at: offset, Array(UnsafeRawBufferPointer(rebasing: bytes[0..<n])))
                f.position = offset + n
                s.open[fd.raw] = f
            }
            return n
        }
    }

    public func read(_ fd: FileDescriptor, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws -> Int {
        try base.read(fd, into: buffer, at: offset)
    }

    public func fdatasync(_ fd: FileDescriptor) throws { syncFile(fd, "fdatasync") }
    public func fsync(_ fd: FileDescriptor) throws { syncFile(fd, "fsync") }

    private func syncFile(_ fd: FileDescriptor, _ call: String) {
        state.withLock { s in
            s.syncCalls += 1
            guard let f = s.open[fd.raw] else { return }
            s.point("\(call) \(fd.path)")
            s.disk.syncFile(f.inode)
        }
    }

    public func truncate(_ fd: FileDescriptor, to length: Int64) throws {
        try state.withLock { s in
            if s.open[fd.raw] != nil { s.beforeChange("ftruncate \(fd.path)") }
            try base.truncate(fd, to: length)
            if let f = s.open[fd.raw] { s.disk.truncate(f.inode, to: Int(length)) }
        }
    }

    public func seekToEnd(_ fd: FileDescriptor) throws -> Int64 {
        try state.withLock { s in
            let end = try base.seekToEnd(fd)
            s.open[fd.raw]?.position = Int(end)
            return end
        }
    }

    public func status(_ fd: FileDescriptor) throws -> FileStatus { try base.status(fd) }
    public func linkStatus(_ path: String) throws -> FileStatus? { try base.linkStatus(path) }
    public func lock(_ fd: FileDescriptor, _ kind: LockKind, wait: Bool) throws -> Bool { try base.lock(fd, kind, wait: wait) }
    public func unlock(_ fd: FileDescriptor) throws { try base.unlock(fd) }

    public func rename(_ from: String, _ to: String) throws {
        guard let src = components(from), components(to) != nil else { return try base.rename(from, to) }
        try state.withLock { s in
            let node = s.disk.lookup(src)
            s.beforeChange("rename \(from) -> \(to)")
            try base.rename(from, to)
            if let node, let (fp, fn) = parentAndName(from, s.disk), let (tp, tn) = parentAndName(to, s.disk) {
                s.disk.rename(from: fp, fn, to: tp, tn, node: node)
            }
        }
    }

    public func link(_ from: String, _ to: String) throws {
        guard let src = components(from), components(to) != nil else { return try base.link(from, to) }
        try state.withLock { s in
            let node = s.disk.lookup(src)
            s.beforeChange("link \(from) -> \(to)")
            try base.link(from, to)
            if let node, let (tp, tn) = parentAndName(to, s.disk) { s.disk.link(to: tp, tn, node: node) }
        }
    }

    public func unlink(_ path: String) throws {
        guard components(path) != nil else { return try base.unlink(path) }
        try state.withLock { s in
            s.beforeChange("unlink \(path)")
            try base.unlink(path)
            if let (p, n) = parentAndName(path, s.disk) { s.disk.removeEntry(in: p, n, label: "unlink") }
        }
    }

    public func makeDirectory(_ path: String, mode: UInt32) throws {
        guard components(path) != nil else { return try base.makeDirectory(path, mode: mode) }
        try state.withLock { s in
            s.beforeChange("mkdir \(path)")
            try base.makeDirectory(path, mode: mode)
            if let (p, n) = parentAndName(path, s.disk) { _ = s.disk.makeDirectory(in: p, n) }
        }
    }

    public func removeDirectory(_ path: String) throws {
        guard components(path) != nil else { return try base.removeDirectory(path) }
        try state.withLock { s in
            s.beforeChange("rmdir \(path)")
            try base.removeDirectory(path)
            if let (p, n) = parentAndName(path, s.disk) { s.disk.removeEntry(in: p, n, label: "rmdir") }
        }
    }

    public func listDirectory(_ path: String) throws -> [String] { try base.listDirectory(path) }

    public func syncDirectory(_ path: String) throws {
        guard let c = components(path) else { return try base.syncDirectory(path) }
        try state.withLock { s in
            s.syncCalls += 1
            guard let d = s.disk.directory(c) else { throw IOError(.noEntry, "open", path) }
            s.point("syncDirectory \(path)")
            s.disk.syncDirectory(d)
        }
    }

    public func setMode(_ path: String, _ mode: UInt32) throws { try base.setMode(path, mode) }
}
