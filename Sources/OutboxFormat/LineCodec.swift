/// Encodes and decodes one record line:
///
///     {"v":1,"seq":7,"type":"turn","at":"2026-11-30T14:55:59.123Z",…fields…,"crc":"1a2b3c4d"}\n
///
/// The checksum is CRC-32C over every byte of the line before `,"crc":"`, written as eight
/// lowercase hex digits. Any change to those bytes, or to the checksum, fails the line, and the
/// line stays a plain JSON object that `jq` reads. See docs/FORMAT.md.
public enum LineCodec {
    public static let version = 1
    /// Longest line we write or accept, newline included.
    public static let maxLineLength = 1 << 20
    static let suffixPrefix: [UInt8] = Array(",\"crc\":\"".utf8)  // 8 bytes
    /// `,"crc":"` + 8 hex + `"}`
    static let suffixLength = 18

    public static func encode(seq: Int64, type: String, at: String, fields: JSONObject) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        out.append(contentsOf: #"{"v":"#.utf8)
        appendDecimal(Int64(version), to: &out)
        out.append(contentsOf: #","seq":"#.utf8)
        appendDecimal(seq, to: &out)
        out.append(contentsOf: #","type":"#.utf8)
        JSONWriter.writeString(type, into: &out)
        out.append(contentsOf: ",\"at\":".utf8)
        JSONWriter.writeString(at, into: &out)
        for pair in fields.pairs {
            out.append(UInt8(ascii: ","))
            JSONWriter.writeString(pair.key, into: &out)
            out.append(UInt8(ascii: ":"))
            JSONWriter.write(pair.value, into: &out)
        }
        let crc = out.withUnsafeBufferPointer { CRC32C.checksum($0) }
        out.append(contentsOf: suffixPrefix)
        out.append(contentsOf: hex8(crc))
        out.append(contentsOf: "\"}\n".utf8)
        return out
    }

    public static func encode(_ entry: LogEntry) -> [UInt8] {
        encode(seq: entry.seq, type: entry.type, at: entry.at, fields: entry.fields)
    }

    /// Decodes one line given without its newline.
    public static func decode(_ line: UnsafeBufferPointer<UInt8>) -> Result<LogEntry, LineError> {
        let n = line.count
        if n + 1 > maxLineLength { return .failure(.tooLong(n + 1)) }
        guard n >= suffixLength + 2 else { return .failure(.missingChecksum) }
        let s = n - suffixLength
        for k in 0..<8 where line[s + k] != suffixPrefix[k] { return .failure(.missingChecksum) }
        guard line[n - 2] == UInt8(ascii: "\""), line[n - 1] == UInt8(ascii: "}") else { return .failure(.missingChecksum) }
        guard let stored = parseHex8(line, from: s + 8) else { return .failure(.missingChecksum) }
        let computed = CRC32C.checksum(UnsafeBufferPointer(rebasing: line[0..<s]))
        if stored != computed {
            return .failure(.checksumMismatch(stored: String(decoding: hex8(stored), as: UTF8.self),
                                              computed: String(decoding: hex8(computed), as: UTF8.self)))
        }
        let object: JSONObject
        do {
            guard case .object(let o) = try JSONParser.parse(line) else {
                return .failure(.invalidJSON(JSONParseError(offset: 0, reason: "not a JSON object")))
            }
            object = o
        } catch {
            return .failure(.invalidJSON(error))
        }
        guard let vValue = object["v"] else { return .failure(.missingField("v")) }
        guard case .int(let v) = vValue else { return .failure(.invalidField("v", "not an integer")) }
        guard v == Int64(version) else { return .failure(.unsupportedVersion(v)) }
        guard case .int(let seq)? = object["seq"] else { return .failure(.missingField("seq")) }
        guard seq > 0 else { return .failure(.invalidField("seq", "must be positive")) }
        guard case .string(let type)? = object["type"], !type.isEmpty else { return .failure(.missingField("type")) }
        guard case .string(let at)? = object["at"] else { return .failure(.missingField("at")) }
        guard Timestamp.parse(at) != nil else { return .failure(.invalidField("at", "not an RFC 3339 time")) }
        var fields = JSONObject()
        fields.pairs = object.pairs.filter { !["v", "seq", "type", "at", "crc"].contains($0.key) }
        return .success(LogEntry(version: Int(v), seq: seq, type: type, at: at, fields: fields, length: n + 1))
    }

    public static func decode(_ line: [UInt8]) -> Result<LogEntry, LineError> {
        line.withUnsafeBufferPointer { decode($0) }
    }

    /// Decimal digits without going through String.
    static func appendDecimal(_ v: Int64, to out: inout [UInt8]) {
        if v < 0 { out.append(contentsOf: String(v).utf8); return }
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                      UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var n = 0
        var x = v
        withUnsafeMutableBytes(of: &digits) { d in
            repeat { d[n] = UInt8(48 + x % 10); x /= 10; n += 1 } while x > 0
            for k in stride(from: n - 1, through: 0, by: -1) { out.append(d[k]) }
        }
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    static func hex8(_ v: UInt32) -> [UInt8] {
        (0..<8).map { hexDigits[Int((v >> UInt32(28 - $0 * 4)) & 0xF)] }
    }

    static func parseHex8(_ buf: UnsafeBufferPointer<UInt8>, from: Int) -> UInt32? {
        var v: UInt32 = 0
        for k in 0..<8 {
            let c = buf[from + k]
            let d: UInt32
            switch c {
            case 0x30...0x39: d = UInt32(c - 0x30)
            case 0x61...0x66: d = UInt32(c - 0x61 + 10)
            default: return nil
            }
            v = v << 4 | d
        }
        return v
    }
}
