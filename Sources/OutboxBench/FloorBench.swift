import OutboxIO

/// The physical floor: a bare write + fdatasync of a line the size of a turn record, through the
/// same syscall layer the store uses, with nothing else around it.
struct FloorBench {
    let directory: String
    let lineBytes: Int
    let iterations: Int

    func run() throws -> Samples {
        let fs = PosixFileSystem()
        let path = directory + "/floor.jsonl"
        let fd = try fs.open(path, [.read, .write, .create, .append, .noFollow], mode: 0o600)
        defer { try? fs.close(fd); try? fs.unlink(path) }
        var line = [UInt8](repeating: UInt8(ascii: "x"), count: lineBytes - 1)
        line.append(0x0A)
        var samples = Samples()
        for _ in 0..<iterations {
            let t0 = nowNanos()
            try fs.writeAll(fd, line)
            try fs.fdatasync(fd)
            samples.add(nanos: nowNanos() - t0)
        }
        return samples
    }
}
