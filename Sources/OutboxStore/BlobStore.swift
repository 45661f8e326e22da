import OutboxFormat
import OutboxIO

/// Content-addressed attachment files: `blobs/<lowercase hex sha256>`, 0600. Writing one is
/// steps B1–B4 of docs/DURABILITY.md: temp file inside blobs/, fsync, rename to the hash name,
/// fsync blobs/. Identical bytes share one file. Used by the outbox and by the engine.
public struct BlobStore: Sendable {
    public let directory: String
    public let fileSystem: any FileSystem
    static let tempPrefix = "tmp-"
    static let chunk = 1 << 16

    public init(directory: String, fileSystem: any FileSystem) {
        self.directory = directory; self.fileSystem = fileSystem
    }

    public func path(for sha256: String) -> String { "\(directory)/\(sha256)" }

    public func ensureDirectory() throws {
        try Journal.ensureDirectory(directory, fs: fileSystem, allowSymlink: false)
    }

    /// Stores bytes from a file or memory and returns their hash and size. Durable on return.
    public func put(_ content: AttachmentSource.Content) throws -> (sha256: String, size: Int64) {
        try ensureDirectory()
        let tmp = "\(directory)/\(Self.tempPrefix)\(processID())-\(UInt64.random(in: 0...UInt64.max))"
        let out = try fileSystem.open(tmp, [.write, .create, .exclusive, .noFollow], mode: 0o600)
        var hasher = SHA256()
        var size: Int64 = 0
        do {
            switch content {
            case .bytes(let bytes):
                hasher.update(bytes)
                size = Int64(bytes.count)
                try fileSystem.writeAll(out, bytes)
            case .file(let source):
                let input: FileDescriptor
                do { input = try fileSystem.open(source, [.read], mode: 0) } catch let e as IOError {
                    throw StoreError.invalidInput("cannot read attachment \(source): \(e)")
                }
                defer { try? fileSystem.close(input) }
                guard try fileSystem.status(input).isRegular else {
                    throw StoreError.invalidInput("attachment \(source) is not a regular file")
                }
                while true {
                    let bytes = try fileSystem.read(input, count: Self.chunk, at: size)
                    if bytes.isEmpty { break }
                    hasher.update(bytes)
                    try fileSystem.writeAll(out, bytes)
                    size += Int64(bytes.count)
                }
            }
            try fileSystem.fsync(out)
            try fileSystem.close(out)
        } catch {
            try? fileSystem.close(out)
            try? fileSystem.unlink(tmp)
            if let w = error as? WriteError { throw StoreError.io(w.error, context: "cannot store attachment") }
            throw error
        }
        let sha = Hex.encode(hasher.finalize())
        let final = path(for: sha)
        do {
            if let existing = try fileSystem.linkStatus(final), existing.isRegular, existing.size == size,
               (try? verify(sha)) == true {
                // Identical bytes are already durable under this name.
                try fileSystem.unlink(tmp)
            } else {
                try fileSystem.rename(tmp, final)
            }
            try fileSystem.syncDirectory(directory)
        } catch {
            try? fileSystem.unlink(tmp)
            throw error
        }
        return (sha, size)
    }

    /// True when the file exists and its bytes hash to its name.
    public func verify(_ sha256: String) throws -> Bool {
        guard let st = try fileSystem.linkStatus(path(for: sha256)), st.isRegular else { return false }
        return try hash(of: path(for: sha256)) == sha256
    }

    public func hash(of file: String) throws -> String {
        let fd = try fileSystem.open(file, [.read, .noFollow], mode: 0)
        defer { try? fileSystem.close(fd) }
        var hasher = SHA256()
        var offset: Int64 = 0
        while true {
            let bytes = try fileSystem.read(fd, count: Self.chunk, at: offset)
            if bytes.isEmpty { break }
            hasher.update(bytes)
            offset += Int64(bytes.count)
        }
        return Hex.encode(hasher.finalize())
    }

    public func read(_ sha256: String) throws -> [UInt8] {
        try fileSystem.readFile(path(for: sha256))
    }

    /// Names in blobs/: hash-named files, and leftover temp files.
    public func list() throws -> (blobs: [String], temps: [String]) {
        guard try fileSystem.linkStatus(directory) != nil else { return ([], []) }
        let names = try fileSystem.listDirectory(directory)
        return (names.filter { Hex.isSHA256($0) }, names.filter { $0.hasPrefix(Self.tempPrefix) })
    }
}
