/// One decoded line of a log: the envelope every record shares, and the record's own fields.
public struct LogEntry: Sendable, Equatable {
    public var version: Int
    public var seq: Int64
    public var type: String
    public var at: String
    /// The record's own fields, in file order, without v/seq/type/at/crc.
    public var fields: JSONObject
    /// Where the line starts in its file, its 1-based line number, and its length with newline.
    public var offset: Int64
    public var line: Int
    public var length: Int

    public init(version: Int = LineCodec.version, seq: Int64, type: String, at: String, fields: JSONObject,
                offset: Int64 = 0, line: Int = 0, length: Int = 0) {
        self.version = version; self.seq = seq; self.type = type; self.at = at; self.fields = fields
        self.offset = offset; self.line = line; self.length = length
    }
}

/// Why a line does not decode. `isChecksumFailure` separates a torn write (bytes never
/// completed) from a line that is whole but says something we cannot accept.
public enum LineError: Error, Sendable, Equatable, CustomStringConvertible {
    case missingChecksum
    case checksumMismatch(stored: String, computed: String)
    case invalidJSON(JSONParseError)
    case unsupportedVersion(Int64)
    case missingField(String)
    case invalidField(String, String)
    case tooLong(Int)

    public var isChecksumFailure: Bool {
        switch self {
        case .missingChecksum, .checksumMismatch: return true
        default: return false
        }
    }

    public var description: String {
        switch self {
        case .missingChecksum: return "no checksum at the end of the line (torn or not a record)"
        case .checksumMismatch(let s, let c): return "checksum mismatch (stored \(s), computed \(c))"
        case .invalidJSON(let e):
            return e.reason.contains("UTF-8") ? "invalid UTF-8 (\(e))" : "not valid JSON (\(e))"
        case .unsupportedVersion(let v): return "unsupported format version \(v) (this build reads version \(LineCodec.version))"
        case .missingField(let f): return "missing field \"\(f)\""
        case .invalidField(let f, let why): return "invalid field \"\(f)\": \(why)"
        case .tooLong(let n): return "line of \(n) bytes is over the \(LineCodec.maxLineLength)-byte record limit"
        }
    }
}
