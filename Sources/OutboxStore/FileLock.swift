import OutboxIO

/// A flock on its own open file description: released on `release()`, on deinit, or when the
/// process dies (kill -9 included), which is why locks and not pid files guard the outbox.
public final class FileLock: @unchecked Sendable {
    let fd: FileDescriptor
    let fileSystem: any FileSystem
    private var held = true

    private init(fd: FileDescriptor, fileSystem: any FileSystem) { self.fd = fd; self.fileSystem = fileSystem }

    /// Takes the lock, or returns nil when `wait` is false and someone else holds it.
    public static func acquire(_ path: String, _ kind: LockKind, wait: Bool, fileSystem: any FileSystem) throws -> FileLock? {
        let fd = try fileSystem.open(path, [.read, .write, .create, .noFollow], mode: 0o600)
        do {
            guard try fileSystem.lock(fd, kind, wait: wait) else { try? fileSystem.close(fd); return nil }
        } catch {
            try? fileSystem.close(fd)
            throw error
        }
        return FileLock(fd: fd, fileSystem: fileSystem)
    }

    public func release() {
        guard held else { return }
        held = false
        try? fileSystem.close(fd)
    }

    deinit { release() }
}
