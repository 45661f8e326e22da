/// A strict RFC 8259 parser over bytes. It rejects invalid UTF-8, trailing bytes, and nesting
/// deeper than 64, and says at which byte it stopped. Pure: safe to fuzz.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public var offset: Int
    public var reason: String
    public var description: String { "\(reason) at byte \(offset)" }
}

public enum JSONParser {
    public static func parse(_ bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
        try bytes.withUnsafeBufferPointer { (buf) throws(JSONParseError) -> JSONValue in
            try parse(buf)
        }
    }

    public static func parse(_ buf: UnsafeBufferPointer<UInt8>) throws(JSONParseError) -> JSONValue {
        var p = Parser(buf: buf)
        p.skipSpace()
        let v = try p.value(depth: 0)
        p.skipSpace()
        if p.i != buf.count { throw p.fail("unexpected bytes after the JSON value") }
        return v
    }

    public static func parseObject(_ bytes: [UInt8]) throws(JSONParseError) -> JSONObject {
        guard case .object(let o) = try parse(bytes) else { throw JSONParseError(offset: 0, reason: "not a JSON object") }
        return o
    }
}

private struct Parser {
    let buf: UnsafeBufferPointer<UInt8>
    var i = 0

    func fail(_ reason: String) -> JSONParseError { JSONParseError(offset: i, reason: reason) }

    mutating func skipSpace() {
        while i < buf.count, buf[i] == 0x20 || buf[i] == 0x0A || buf[i] == 0x0D || buf[i] == 0x09 { i += 1 }
    }

    mutating func expect(_ literal: StaticString, _ v: JSONValue) throws(JSONParseError) -> JSONValue {
        let n = literal.utf8CodeUnitCount
        guard i + n <= buf.count else { throw fail("truncated literal") }
        let lit = literal.utf8Start
        for k in 0..<n where buf[i + k] != lit[k] { throw fail("invalid literal") }
        i += n
        return v
    }

    mutating func value(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth < 64 else { throw fail("nesting deeper than 64") }
        guard i < buf.count else { throw fail("unexpected end of input") }
        switch buf[i] {
        case UInt8(ascii: "{"): return .object(try object(depth: depth))
        case UInt8(ascii: "["):
            i += 1
            var items: [JSONValue] = []
            skipSpace()
            if i < buf.count, buf[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
            while true {
                skipSpace()
                items.append(try value(depth: depth + 1))
                skipSpace()
                guard i < buf.count else { throw fail("unterminated array") }
                if buf[i] == UInt8(ascii: ",") { i += 1; continue }
                if buf[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
                throw fail("expected , or ] in array")
            }
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): return try expect("true", .bool(true))
        case UInt8(ascii: "f"): return try expect("false", .bool(false))
        case UInt8(ascii: "n"): return try expect("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw fail("unexpected byte 0x\(String(buf[i], radix: 16))")
        }
    }

    mutating func object(depth: Int) throws(JSONParseError) -> JSONObject {
        i += 1  // {
        var pairs: [JSONObject.Pair] = []
        skipSpace()
        if i < buf.count, buf[i] == UInt8(ascii: "}") { i += 1; return JSONObject() }
        while true {
            skipSpace()
            guard i < buf.count, buf[i] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
            let key = try string()
            skipSpace()
            guard i < buf.count, buf[i] == UInt8(ascii: ":") else { throw fail("expected : after key") }
            i += 1
            skipSpace()
            let v = try value(depth: depth + 1)
            pairs.append(JSONObject.Pair(key, v))
            skipSpace()
            guard i < buf.count else { throw fail("unterminated object") }
            if buf[i] == UInt8(ascii: ",") { i += 1; continue }
            if buf[i] == UInt8(ascii: "}") { i += 1; break }
            throw fail("expected , or } in object")
        }
        var o = JSONObject()
        o.pairs = pairs
        return o
    }

    mutating func number() throws(JSONParseError) -> JSONValue {
        let start = i
        var isInteger = true
        if buf[i] == UInt8(ascii: "-") { i += 1 }
        guard i < buf.count, isDigit(buf[i]) else { throw fail("invalid number") }
        if buf[i] == UInt8(ascii: "0") { i += 1 } else { while i < buf.count, isDigit(buf[i]) { i += 1 } }
        if i < buf.count, buf[i] == UInt8(ascii: ".") {
            isInteger = false
            i += 1
            guard i < buf.count, isDigit(buf[i]) else { throw fail("invalid fraction") }
            while i < buf.count, isDigit(buf[i]) { i += 1 }
        }
        if i < buf.count, buf[i] == UInt8(ascii: "e") || buf[i] == UInt8(ascii: "E") {
            isInteger = false
            i += 1
            if i < buf.count, buf[i] == UInt8(ascii: "+") || buf[i] == UInt8(ascii: "-") { i += 1 }
            guard i < buf.count, isDigit(buf[i]) else { throw fail("invalid exponent") }
            while i < buf.count, isDigit(buf[i]) { i += 1 }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: buf[start..<i]), as: UTF8.self)
        if isInteger, let v = Int64(text) { return .int(v) }
        // Double("1e999") is +inf, which JSON cannot write back: refuse it here.
        guard let d = Double(text), d.isFinite else { throw JSONParseError(offset: start, reason: "number out of range") }
        return .double(d)
    }

    func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }

    mutating func string() throws(JSONParseError) -> String {
        i += 1  // opening quote
        let start = i
        // Fast path: no escapes.
        while i < buf.count {
            let b = buf[i]
            if b == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: buf[start..<i])
                guard let s = UTF8Validation.string(slice) else {
                    throw JSONParseError(offset: start, reason: "invalid UTF-8 in string")
                }
                i += 1
                return s
            }
            if b == UInt8(ascii: "\\") { break }
            if b < 0x20 { throw fail("unescaped control character in string") }
            i += 1
        }
        // Slow path with escapes.
        var bytes = Array(UnsafeBufferPointer(rebasing: buf[start..<i]))
        while i < buf.count {
            let b = buf[i]
            if b == UInt8(ascii: "\"") {
                guard let s = bytes.withUnsafeBufferPointer({ UTF8Validation.string($0) }) else {
                    throw JSONParseError(offset: start, reason: "invalid UTF-8 in string")
                }
                i += 1
                return s
            }
            if b < 0x20 { throw fail("unescaped control character in string") }
            if b != UInt8(ascii: "\\") { bytes.append(b); i += 1; continue }
            i += 1
            guard i < buf.count else { break }
            let e = buf[i]
            i += 1
            switch e {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): bytes.append(e)
            case UInt8(ascii: "b"): bytes.append(0x08)
            case UInt8(ascii: "f"): bytes.append(0x0C)
            case UInt8(ascii: "n"): bytes.append(0x0A)
            case UInt8(ascii: "r"): bytes.append(0x0D)
            case UInt8(ascii: "t"): bytes.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if scalar >= 0xD800 && scalar < 0xDC00 {
                    guard i + 1 < buf.count, buf[i] == UInt8(ascii: "\\"), buf[i + 1] == UInt8(ascii: "u") else {
                        throw fail("unpaired surrogate")
                    }
                    i += 2
                    let low = try hex4()
                    guard low >= 0xDC00 && low < 0xE000 else { throw fail("invalid low surrogate") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if scalar >= 0xDC00 && scalar < 0xE000 {
                    throw fail("unpaired surrogate")
                }
                guard let u = Unicode.Scalar(scalar) else { throw fail("invalid unicode escape") }
                bytes.append(contentsOf: Array(String(Character(u)).utf8))
            default: throw fail("invalid escape")
            }
        }
        throw fail("unterminated string")
    }

    mutating func hex4() throws(JSONParseError) -> UInt32 {
        guard i + 4 <= buf.count else { throw fail("truncated \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = buf[i]
            let d: UInt32
            switch c {
            case 0x30...0x39: d = UInt32(c - 0x30)
            case 0x41...0x46: d = UInt32(c - 0x41 + 10)
            case 0x61...0x66: d = UInt32(c - 0x61 + 10)
            default: throw fail("invalid hex digit in \\u escape")
            }
            v = v << 4 | d
            i += 1
        }
        return v
    }
}
