/// RFC 3339 UTC timestamps with milliseconds ("2026-11-30T14:55:59.123Z"), computed without
/// Foundation so records format and parse identically everywhere.
public enum Timestamp {
    /// Milliseconds since 1970 → "YYYY-MM-DDTHH:MM:SS.mmmZ". Written digit by digit into one
    /// buffer: it runs several times per enqueue.
    public static func format(millis: Int64) -> String {
        let (days, msOfDay) = floorDivMod(millis, 86_400_000)
        let (y, m, d) = civil(fromDays: days)
        let h = msOfDay / 3_600_000, mi = (msOfDay / 60_000) % 60, s = (msOfDay / 1000) % 60, ms = msOfDay % 1000
        guard (0...9999).contains(y) else {
            return "\(y)-\(pad(m, 2))-\(pad(d, 2))T\(pad(h, 2)):\(pad(mi, 2)):\(pad(s, 2)).\(pad(ms, 3))Z"
        }
        return String(unsafeUninitializedCapacity: 24) { buf in
            func put(_ v: Int64, _ width: Int, at i: Int) {
                var v = v
                for k in stride(from: i + width - 1, through: i, by: -1) { buf[k] = UInt8(48 + v % 10); v /= 10 }
            }
            put(y, 4, at: 0); buf[4] = 0x2D; put(m, 2, at: 5); buf[7] = 0x2D; put(d, 2, at: 8)
            buf[10] = 0x54; put(h, 2, at: 11); buf[13] = 0x3A; put(mi, 2, at: 14); buf[16] = 0x3A; put(s, 2, at: 17)
            buf[19] = 0x2E; put(ms, 3, at: 20); buf[23] = 0x5A
            return 24
        }
    }

    /// Parses RFC 3339 (`Z` or ±HH:MM offset, optional fraction) → milliseconds since 1970.
    public static func parse(_ s: String) -> Int64? {
        let b = Array(s.utf8)
        guard b.count >= 20 else { return nil }
        func num(_ from: Int, _ len: Int) -> Int64? {
            guard from + len <= b.count else { return nil }
            var v: Int64 = 0
            for k in from..<(from + len) {
                guard b[k] >= 0x30 && b[k] <= 0x39 else { return nil }
                v = v * 10 + Int64(b[k] - 0x30)
            }
            return v
        }
        guard let y = num(0, 4), b[4] == 0x2D, let mo = num(5, 2), b[7] == 0x2D, let d = num(8, 2),
              b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: "t"),
              let h = num(11, 2), b[13] == 0x3A, let mi = num(14, 2), b[16] == 0x3A, let se = num(17, 2),
              (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, se < 61 else { return nil }
        var i = 19
        var ms: Int64 = 0
        if i < b.count, b[i] == UInt8(ascii: ".") {
            i += 1
            var digits = 0
            while i < b.count, b[i] >= 0x30 && b[i] <= 0x39 {
                if digits < 3 { ms = ms * 10 + Int64(b[i] - 0x30) }
                digits += 1; i += 1
            }
            guard digits > 0 else { return nil }
            for _ in digits..<3 where digits < 3 { ms *= 10 }
        }
        guard i < b.count else { return nil }
        var offsetMinutes: Int64 = 0
        if b[i] == UInt8(ascii: "Z") || b[i] == UInt8(ascii: "z") {
            i += 1
        } else if b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") {
            guard let oh = num(i + 1, 2), b.count > i + 3, b[i + 3] == 0x3A, let om = num(i + 4, 2) else { return nil }
            offsetMinutes = (oh * 60 + om) * (b[i] == UInt8(ascii: "-") ? -1 : 1)
            i += 6
        } else { return nil }
        guard i == b.count else { return nil }
        let days = daysFromCivil(y, mo, d)
        return ((days * 86_400 + h * 3600 + mi * 60 + se) - offsetMinutes * 60) * 1000 + ms
    }

    private static func pad(_ v: Int64, _ width: Int) -> String {
        let s = String(v)
        return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }

    private static func floorDivMod(_ a: Int64, _ b: Int64) -> (Int64, Int64) {
        var q = a / b, r = a % b
        if r < 0 { q -= 1; r += b }
        return (q, r)
    }

    // Howard Hinnant's civil-calendar algorithms.
    static func daysFromCivil(_ y0: Int64, _ m: Int64, _ d: Int64) -> Int64 {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civil(fromDays z0: Int64) -> (Int64, Int64, Int64) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp + (mp < 10 ? 3 : -9)
        return (m <= 2 ? y + 1 : y, m, d)
    }
}
