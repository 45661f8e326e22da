#if canImport(Glibc)
@preconcurrency import Glibc

/// Waits for a directory to change (inotify), for a wake-up from another thread (a self-pipe,
/// so a signal handler running on a dispatch queue can interrupt the wait), or for a timeout.
/// The only place the package calls inotify and poll(2).
public final class DirectoryWatch: @unchecked Sendable {
    public enum Wake: Sendable, Hashable { case changed, woken, timeout }

    public let directory: String
    private let inotifyFD: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32

    /// Watches `directory` itself (not subdirectories) for appends, creations and renames into it.
    public init(directory: String) throws {
        self.directory = directory
        let fd = inotify_init1(Int32(O_NONBLOCK | O_CLOEXEC))
        guard fd >= 0 else { throw IOError(Errno.current, "inotify_init1", directory) }
        let mask = UInt32(IN_MODIFY) | UInt32(IN_CREATE) | UInt32(IN_MOVED_TO)
        if inotify_add_watch(fd, directory, mask) < 0 {
            let e = Errno.current
            Glibc.close(fd)
            throw IOError(e, "inotify_add_watch", directory)
        }
        var fds: [Int32] = [0, 0]
        if pipe(&fds) != 0 {
            let e = Errno.current
            Glibc.close(fd)
            throw IOError(e, "pipe", directory)
        }
        for p in fds {
            _ = fcntl(p, F_SETFL, fcntl(p, F_GETFL) | O_NONBLOCK)
            _ = fcntl(p, F_SETFD, FD_CLOEXEC)
        }
        inotifyFD = fd; wakeRead = fds[0]; wakeWrite = fds[1]
    }

    deinit {
        Glibc.close(inotifyFD); Glibc.close(wakeRead); Glibc.close(wakeWrite)
    }

    /// Interrupts a `wait` now or the next one. Safe from any thread.
    public func wake() {
        var b: UInt8 = 1
        _ = Glibc.write(wakeWrite, &b, 1)
    }

    /// Blocks until the directory changes, `wake()` is called, or `timeoutMillis` pass (< 0: no
    /// timeout). Pending events are consumed, so the next wait blocks again.
    public func wait(timeoutMillis: Int) throws -> Set<Wake> {
        var pfds = [pollfd(fd: inotifyFD, events: Int16(POLLIN), revents: 0),
                    pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        let timeout = Int32(clamping: timeoutMillis)
        let n = poll(&pfds, 2, timeout)
        if n < 0 {
            let e = Errno.current
            if e == .interrupted { return [.woken] }
            throw IOError(e, "poll", directory)
        }
        if n == 0 { return [.timeout] }
        var out: Set<Wake> = []
        if pfds[0].revents != 0 { drain(inotifyFD); out.insert(.changed) }
        if pfds[1].revents != 0 { drain(wakeRead); out.insert(.woken) }
        return out
    }

    private func drain(_ fd: Int32) {
        var buf = [UInt8](repeating: 0, count: 4096)
        while true {
            let r = buf.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if r <= 0 { break }
        }
    }
}
#endif
