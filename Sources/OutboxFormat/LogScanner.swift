/// Reads a log's bytes and classifies every line, applying the recovery rules of
/// docs/DURABILITY.md in one pure function:
///
/// - Only the tail may be torn: one incomplete last line (no newline, zero bytes included), or
///   a complete line whose checksum fails when no line after it passes its checksum (a power cut
///   can zero-fill or garbage-fill unsynced bytes, newlines included). Those bytes were never
///   acknowledged.
/// - Anything else that does not decode, or a sequence number that is not the previous plus one,
///   is corruption: scanning stops there and the entries before it are returned.
public struct LogScan: Sendable {
    public var entries: [LogEntry] = []
    /// Offset just past the last valid line: where the next append goes after repair.
    public var validEnd: Int64
    public var tail: Tail = .clean
    public var corruption: Corruption?
    /// The last valid sequence number (or the one given to start from).
    public var lastSeq: Int64?
    public var linesRead: Int

    public init(validEnd: Int64, lastSeq: Int64?, linesRead: Int) {
        self.validEnd = validEnd; self.lastSeq = lastSeq; self.linesRead = linesRead
    }

    public enum Tail: Sendable, Equatable {
        case clean
        /// Bytes after the last newline: a write that never finished (or one in progress).
        case incomplete(offset: Int64, length: Int)
        /// A whole final line whose checksum fails: a torn write that happened to end in a newline.
        case badFinalLine(offset: Int64, length: Int, line: Int, reason: String)

        public var offset: Int64? {
            switch self {
            case .clean: return nil
            case .incomplete(let o, _), .badFinalLine(let o, _, _, _): return o
            }
        }
    }

    public struct Corruption: Sendable, Equatable, CustomStringConvertible {
        public var line: Int
        public var offset: Int64
        public var reason: String
        public init(line: Int, offset: Int64, reason: String) { self.line = line; self.offset = offset; self.reason = reason }
        public var description: String { "line \(line), byte offset \(offset): \(reason)" }
    }
}

public enum LogScanner {
    /// Scans `bytes`, which start at file offset `baseOffset` and line number `baseLine` + 1.
    /// `lastSeq` is the sequence number of the line before `bytes` (nil at the start of a file).
    public static func scan(_ bytes: [UInt8], baseOffset: Int64 = 0, baseLine: Int = 0, lastSeq: Int64? = nil) -> LogScan {
        bytes.withUnsafeBufferPointer { scan($0, baseOffset: baseOffset, baseLine: baseLine, lastSeq: lastSeq) }
    }

    public static func scan(_ buf: UnsafeBufferPointer<UInt8>, baseOffset: Int64 = 0, baseLine: Int = 0, lastSeq: Int64? = nil) -> LogScan {
        var result = LogScan(validEnd: baseOffset, lastSeq: lastSeq, linesRead: baseLine)
        var start = 0
        var line = baseLine
        var expected = lastSeq.map { $0 + 1 }
        let n = buf.count
        while start < n {
            guard let nl = firstNewline(buf, from: start) else {
                result.tail = .incomplete(offset: baseOffset + Int64(start), length: n - start)
                break
            }
            line += 1
            let lineOffset = baseOffset + Int64(start)
            let isLast = nl + 1 == n
            switch LineCodec.decode(UnsafeBufferPointer(rebasing: buf[start..<nl])) {
            case .success(var entry):
                if let e = expected, entry.seq != e {
                    let what = entry.seq < e ? "repeats or goes back" : "skips ahead"
                    result.corruption = .init(line: line, offset: lineOffset,
                                              reason: "sequence number \(entry.seq) \(what) (expected \(e))")
                    return result
                }
                entry.offset = lineOffset
                entry.line = line
                expected = entry.seq + 1
                result.lastSeq = entry.seq
                result.entries.append(entry)
                result.validEnd = baseOffset + Int64(nl + 1)
                result.linesRead = line
            case .failure(let error):
                if isLast && error.isChecksumFailure {
                    result.tail = .badFinalLine(offset: lineOffset, length: nl + 1 - start, line: line, reason: error.description)
                } else if error.isChecksumFailure, let more = linesWithoutARecord(buf, from: nl + 1) {
                    // Unsynced bytes torn, zero-filled or garbage-filled by a power cut can hold
                    // newlines: damage that no checksummed line follows is still a torn tail.
                    result.tail = .badFinalLine(offset: lineOffset, length: n - start, line: line,
                                                reason: "\(error.description), then \(more) more damaged line(s) and no record")
                } else {
                    result.corruption = .init(line: line, offset: lineOffset, reason: error.description)
                }
                return result
            }
            start = nl + 1
        }
        return result
    }

    /// How many lines follow `from` when none of them passes its checksum (a trailing piece
    /// without a newline counts as one); nil as soon as one does.
    static func linesWithoutARecord(_ buf: UnsafeBufferPointer<UInt8>, from: Int) -> Int? {
        var start = from
        var count = 0
        while start < buf.count {
            let end = firstNewline(buf, from: start) ?? buf.count
            if case .failure(let e) = LineCodec.decode(UnsafeBufferPointer(rebasing: buf[start..<end])), e.isChecksumFailure {
                count += 1
            } else if end == buf.count {
                count += 1  // an incomplete last piece that happens to decode was never terminated
            } else {
                return nil
            }
            start = end + 1
        }
        return count
    }

    @inline(__always)
    static func firstNewline(_ buf: UnsafeBufferPointer<UInt8>, from: Int) -> Int? {
        guard from < buf.count, let base = buf.baseAddress else { return nil }
        // memchr-speed scan without importing libc into a pure module.
        var i = from
        let n = buf.count
        while i < n {
            if base[i] == 0x0A { return i }
            i += 1
        }
        return nil
    }
}
