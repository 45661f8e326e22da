// INTERIM: stands in for OutboxFormat's JSONValue/LogEntry/SHA256 and OutboxStore's Journal
// until they land on main. Deleted at the merge; nothing here is meant to survive.
import Foundation
import OutboxIO

enum JSONValue: Sendable, Equatable {
    case null, bool(Bool), int(Int64), double(Double), string(String), array([JSONValue]), object(JSONObject)
}

struct JSONObject: @unchecked Sendable, Equatable {
    var pairs: [(String, JSONValue)]
    init(_ pairs: [(String, JSONValue)]) { self.pairs = pairs }
    subscript(key: String) -> JSONValue? { pairs.first { $0.0 == key }?.1 }
    static func == (a: JSONObject, b: JSONObject) -> Bool {
        a.pairs.count == b.pairs.count && zip(a.pairs, b.pairs).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
    }
}

struct LogEntry: Sendable {
    var version: Int
    var seq: Int64
    var type: String
    var at: String
    var fields: JSONObject
    var offset: Int64
    var line: Int
}

final class Journal: @unchecked Sendable {
    private let path: String
    private let fs: any FileSystem
    private let fd: FileDescriptor
    private let lock = NSLock()
    private var seq: Int64

    private init(path: String, fs: any FileSystem, fd: FileDescriptor, seq: Int64) {
        self.path = path; self.fs = fs; self.fd = fd; self.seq = seq
    }

    static func open(path: String, fileSystem: any FileSystem = PosixFileSystem()) throws -> (Journal, [LogEntry]) {
        let dir = parentDirectory(of: path)
        if !fileSystem.exists(dir) { try fileSystem.makeDirectory(dir, mode: 0o700) }
        let fd = try fileSystem.open(path, [.read, .write, .create, .append], mode: 0o600)
        let bytes = try fileSystem.readFile(path)
        var entries: [LogEntry] = []
        var offset: Int64 = 0
        for (i, line) in bytes.split(separator: 10, omittingEmptySubsequences: false).enumerated() {
            defer { offset += Int64(line.count + 1) }
            guard !line.isEmpty,
                  let obj = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] else { continue }
            let fields = (obj["fields"] as? [String: Any]).map(fromAny) ?? JSONObject([])
            entries.append(LogEntry(version: 1, seq: (obj["seq"] as? NSNumber)?.int64Value ?? 0,
                                    type: obj["type"] as? String ?? "", at: obj["at"] as? String ?? "",
                                    fields: fields, offset: offset, line: i + 1))
        }
        try fileSystem.syncDirectory(dir)
        return (Journal(path: path, fs: fileSystem, fd: fd, seq: entries.last?.seq ?? 0), entries)
    }

    func append(_ records: [(type: String, fields: JSONObject)]) throws -> [LogEntry] {
        lock.lock(); defer { lock.unlock() }
        var out: [LogEntry] = []
        var bytes: [UInt8] = []
        let at = ISO8601DateFormatter().string(from: Date())
        for r in records {
            seq += 1
            let obj: [String: Any] = ["v": 1, "seq": seq, "type": r.type, "at": at, "fields": toAny(.object(r.fields))]
            bytes += Array(try JSONSerialization.data(withJSONObject: obj, options: [.sortedKeys])) + [10]
            out.append(LogEntry(version: 1, seq: seq, type: r.type, at: at, fields: r.fields, offset: 0, line: 0))
        }
        do { try fs.writeAll(fd, bytes) } catch { throw error.error }
        try fs.fdatasync(fd)
        return out
    }
}

private func toAny(_ v: JSONValue) -> Any {
    switch v {
    case .null: return NSNull()
    case .bool(let b): return b
    case .int(let i): return i
    case .double(let d): return d
    case .string(let s): return s
    case .array(let a): return a.map(toAny)
    case .object(let o): return Dictionary(o.pairs.map { ($0.0, toAny($0.1)) }, uniquingKeysWith: { a, _ in a })
    }
}

private func fromAny(_ d: [String: Any]) -> JSONObject {
    JSONObject(d.keys.sorted().map { ($0, value(d[$0]!)) })
}

private func value(_ a: Any) -> JSONValue {
    switch a {
    case is NSNull: return .null
    case let s as String: return .string(s)
    case let n as NSNumber:
        if String(cString: n.objCType) == "d" { return .double(n.doubleValue) }
        return .int(n.int64Value)
    case let arr as [Any]: return .array(arr.map(value))
    case let d as [String: Any]: return .object(fromAny(d))
    default: return .null
    }
}

enum SHA256 {
    private static let k: [UInt32] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2]

    static func hash(_ input: [UInt8]) -> [UInt8] {
        var h: [UInt32] = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]
        var msg = input
        let bitLen = UInt64(input.count) * 8
        msg.append(0x80)
        while msg.count % 64 != 56 { msg.append(0) }
        for i in (0..<8).reversed() { msg.append(UInt8((bitLen >> (UInt64(i) * 8)) & 0xff)) }
        var w = [UInt32](repeating: 0, count: 64)
        for chunk in stride(from: 0, to: msg.count, by: 64) {
            for i in 0..<16 {
                let b = chunk + i * 4
                w[i] = UInt32(msg[b]) << 24 | UInt32(msg[b + 1]) << 16 | UInt32(msg[b + 2]) << 8 | UInt32(msg[b + 3])
            }
            for i in 16..<64 {
                let s0 = w[i - 15].rotr(7) ^ w[i - 15].rotr(18) ^ (w[i - 15] >> 3)
                let s1 = w[i - 2].rotr(17) ^ w[i - 2].rotr(19) ^ (w[i - 2] >> 10)
                w[i] = w[i - 16] &+ s0 &+ w[i - 7] &+ s1
            }
            var (a, b, c, d, e, f, g, hh) = (h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7])
            for i in 0..<64 {
                let s1 = e.rotr(6) ^ e.rotr(11) ^ e.rotr(25)
                let ch = (e & f) ^ (~e & g)
                let t1 = hh &+ s1 &+ ch &+ k[i] &+ w[i]
                let s0 = a.rotr(2) ^ a.rotr(13) ^ a.rotr(22)
                let maj = (a & b) ^ (a & c) ^ (b & c)
                let t2 = s0 &+ maj
                hh = g; g = f; f = e; e = d &+ t1; d = c; c = b; b = a; a = t1 &+ t2
            }
            h[0] &+= a; h[1] &+= b; h[2] &+= c; h[3] &+= d; h[4] &+= e; h[5] &+= f; h[6] &+= g; h[7] &+= hh
        }
        return h.flatMap { v in (0..<4).map { UInt8((v >> (24 - $0 * 8)) & 0xff) } }
    }

    static func hex(_ input: [UInt8]) -> String {
        hash(input).map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }
}

private extension UInt32 {
    func rotr(_ n: UInt32) -> UInt32 { (self >> n) | (self << (32 - n)) }
}
