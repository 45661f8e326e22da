/// Serialises JSON compactly: keys in their stored order, no escaped slashes, non-ASCII as raw
/// UTF-8, control characters as \uXXXX (or their short escapes). Output is always valid UTF-8.
public enum JSONWriter {
    public static func encode(_ value: JSONValue) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(value, into: &out)
        return out
    }

    public static func write(_ value: JSONValue, into out: inout [UInt8]) {
        switch value {
        case .null: out.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C])
        case .bool(let b): out.append(contentsOf: b ? Array("true".utf8) : Array("false".utf8))
        case .int(let i): out.append(contentsOf: String(i).utf8)
        case .double(let d):
            if d.isFinite { out.append(contentsOf: String(d).utf8) } else { out.append(contentsOf: "null".utf8) }
        case .string(let s): writeString(s, into: &out)
        case .array(let a):
            out.append(UInt8(ascii: "["))
            for (i, v) in a.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                write(v, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let o): writeObject(o, into: &out)
        }
    }

    public static func writeObject(_ o: JSONObject, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        for (i, p) in o.pairs.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            writeString(p.key, into: &out)
            out.append(UInt8(ascii: ":"))
            write(p.value, into: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    public static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Fast path: most strings need no escape and are copied whole.
        var s = s
        let copied: Bool = s.withUTF8 { bytes in
            for b in bytes where b < 0x20 || b == 0x22 || b == 0x5C || b == 0x7F { return false }
            out.append(contentsOf: bytes)
            return true
        }
        if copied { out.append(UInt8(ascii: "\"")); return }
        for byte in s.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(UInt8(ascii: "\\")); out.append(byte)
            case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\")); out.append(byte)
            case 0x0A: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "n"))
            case 0x0D: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "r"))
            case 0x09: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "t"))
            case 0x00..<0x20, 0x7F:
                out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                        hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
