/// Whole-buffer helpers built on the single calls, shared by every caller.
extension FileSystem {
    /// Writes every byte or throws. A short write that makes no progress is reported as EIO-like
    /// `IOError` with the number of bytes that did land, so the caller can truncate them away.
    public func writeAll(_ fd: FileDescriptor, _ bytes: [UInt8]) throws {
        var done = 0
        while done < bytes.count {
            let n: Int
            do {
                n = try bytes.withUnsafeBytes { buf in
                    try write(fd, UnsafeRawBufferPointer(rebasing: buf[done...]))
                }
            } catch let error as IOError {
                throw WriteError(error: error, written: done)
            } catch {
                throw WriteError(error: IOError(.io, "write", fd.path), written: done)
            }
            if n == 0 { throw WriteError(error: IOError(.noSpace, "write (no progress)", fd.path), written: done) }
            done += n
        }
    }

    /// Reads `count` bytes from `offset`, or fewer at end of file.
    public func read(_ fd: FileDescriptor, count: Int, at offset: Int64) throws -> [UInt8] {
        if count <= 0 { return [] }
        var result = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = try result.withUnsafeMutableBytes { buf in
                try read(fd, into: UnsafeMutableRawBufferPointer(rebasing: buf[got...]), at: offset + Int64(got))
            }
            if n == 0 { break }
            got += n
        }
        if got < count { result.removeSubrange(got...) }
        return result
    }

    /// Reads a whole file (not following a symlink).
    public func readFile(_ path: String) throws -> [UInt8] {
        let fd = try open(path, [.read, .noFollow], mode: 0)
        defer { try? close(fd) }
        let size = try status(fd).size
        var bytes = try read(fd, count: Int(size), at: 0)
        // The file may have grown since fstat; read on to the end.
        while true {
            let more = try read(fd, count: 1 << 16, at: Int64(bytes.count))
            if more.isEmpty { break }
            bytes += more
        }
        return bytes
    }

    /// Creates a file durably: write to a temp name, fsync, rename, fsync the directory.
    public func writeFileDurably(_ path: String, _ bytes: [UInt8], mode: UInt32 = 0o600) throws {
        let dir = parentDirectory(of: path)
        let tmp = path + ".tmp-\(processID())"
        let fd = try open(tmp, [.write, .create, .truncate, .noFollow], mode: mode)
        do {
            do { try writeAll(fd, bytes) } catch let w as WriteError { throw w.error }
            try fsync(fd)
            try close(fd)
        } catch {
            try? close(fd)
            try? unlink(tmp)
            throw error
        }
        try rename(tmp, path)
        try syncDirectory(dir)
    }

    public func exists(_ path: String) -> Bool {
        ((try? linkStatus(path)) ?? nil) != nil
    }
}

/// A write that failed after `written` bytes had landed.
public struct WriteError: Error, Sendable {
    public var error: IOError
    public var written: Int
}

public func parentDirectory(of path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return "." }
    if slash == path.startIndex { return "/" }
    return String(path[..<slash])
}

public func lastComponent(of path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return path }
    return String(path[path.index(after: slash)...])
}
