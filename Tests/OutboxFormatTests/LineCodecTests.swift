import Testing
import Foundation
@testable import OutboxFormat

@Suite struct LineCodecTests {
    let fields: JSONObject = ["id": "t1", "text": "hello / world", "n": 3]

    func line(_ seq: Int64 = 1) -> [UInt8] {
        LineCodec.encode(seq: seq, type: "turn", at: "2026-11-30T14:55:59.123Z", fields: fields)
    }

    @Test func encodesAStableJqReadableLine() throws {
        let text = String(decoding: line(), as: UTF8.self)
        #expect(text.hasPrefix(#"{"v":1,"seq":1,"type":"turn","at":"2026-11-30T14:55:59.123Z","id":"t1","text":"hello / world","n":3,"crc":""#))
        #expect(text.hasSuffix("\"}\n"))
        #expect(line() == line())
        let parsed = try JSONParser.parseObject(Array(line().dropLast()))
        #expect(parsed["crc"]?.stringValue?.count == 8)
    }

    @Test func decodesWhatItEncodes() throws {
        let bytes = line(7)
        let entry = try LineCodec.decode(Array(bytes.dropLast())).get()
        #expect(entry.seq == 7 && entry.type == "turn" && entry.fields == fields && entry.length == bytes.count)
    }

    /// Every single-bit flip anywhere in the line is caught.
    @Test func everyBitFlipIsDetected() {
        let bytes = Array(line().dropLast())
        for i in bytes.indices {
            for bit in 0..<8 {
                var copy = bytes
                copy[i] ^= UInt8(1 << bit)
                if case .success = LineCodec.decode(copy) {
                    Issue.record("flip of bit \(bit) at byte \(i) went unnoticed")
                    return
                }
            }
        }
    }

    @Test func checksumFailuresAreTornButBadVersionsAreNot() {
        var truncated = Array(line().dropLast())
        truncated.removeLast(5)
        guard case .failure(let e1) = LineCodec.decode(truncated) else { Issue.record("decoded"); return }
        #expect(e1.isChecksumFailure)

        let future = LineCodec.encode(seq: 1, type: "turn", at: "2026-11-30T14:55:59.123Z", fields: fields)
        var text = String(decoding: future.dropLast(), as: UTF8.self).replacingOccurrences(of: #"{"v":1,"#, with: #"{"v":9,"#)
        // Re-seal the changed line with a valid checksum so only the version is wrong.
        text = reseal(text)
        guard case .failure(let e2) = LineCodec.decode(Array(text.utf8)) else { Issue.record("decoded"); return }
        #expect(e2 == .unsupportedVersion(9))
        #expect(!e2.isChecksumFailure)
    }

    func reseal(_ line: String) -> String {
        let body = String(line.dropLast(LineCodec.suffixLength))
        let crc = CRC32C.checksum(Array(body.utf8))
        return body + #","crc":""# + String(decoding: LineCodec.hex8(crc), as: UTF8.self) + "\"}"
    }
}

@Suite struct LogScannerTests {
    func log(_ n: Int, from: Int64 = 1) -> [UInt8] {
        (0..<n).flatMap { LineCodec.encode(seq: from + Int64($0), type: "x", at: "2026-11-30T00:00:00.000Z", fields: ["i": .int(Int64($0))]) }
    }

    @Test func cleanLog() {
        let s = LogScanner.scan(log(3))
        #expect(s.entries.count == 3 && s.tail == .clean && s.corruption == nil && s.validEnd == Int64(log(3).count))
        #expect(s.entries.map(\.line) == [1, 2, 3])
    }

    @Test func emptyLog() {
        let s = LogScanner.scan([])
        #expect(s.entries.isEmpty && s.tail == .clean && s.corruption == nil && s.validEnd == 0)
    }

    @Test func incompleteLastLineIsATornTail() {
        let good = log(2)
        let s = LogScanner.scan(good + Array(log(3).suffix(from: good.count).dropLast(10)))
        #expect(s.entries.count == 2 && s.corruption == nil)
        #expect(s.tail == .incomplete(offset: Int64(good.count), length: log(3).count - good.count - 10))
    }

    @Test func zeroFilledTailIsTorn() {
        let good = log(2)
        let s = LogScanner.scan(good + [UInt8](repeating: 0, count: 4096))
        #expect(s.entries.count == 2 && s.corruption == nil && s.tail.offset == Int64(good.count))
    }

    @Test func finalLineWithBadChecksumIsTorn() {
        var bytes = log(3)
        bytes[bytes.count - 30] ^= 0x01
        let s = LogScanner.scan(bytes)
        #expect(s.entries.count == 2 && s.corruption == nil)
        if case .badFinalLine(_, _, let line, _) = s.tail { #expect(line == 3) } else { Issue.record("tail \(s.tail)") }
    }

    @Test func damageFollowedByAValidLineIsCorruption() {
        let one = log(1)
        var bytes = log(3)
        bytes[one.count + 20] ^= 0x01  // inside line 2
        let s = LogScanner.scan(bytes)
        #expect(s.entries.count == 1)
        #expect(s.corruption?.line == 2 && s.corruption?.offset == Int64(one.count))
    }

    /// Found by the power-loss simulation: unsynced bytes filled with garbage by a power cut can
    /// hold newlines. Damage that no checksummed line follows is a torn tail, not corruption.
    @Test func garbageWithNewlinesAfterTheLastRecordIsATornTail() {
        let good = log(2)
        let garbage: [UInt8] = Array(log(3).suffix(from: good.count).prefix(60)) + [0x0A, 0x93, 0x00, 0x0A] + Array(repeating: 0x41, count: 100) + [0x0A, 0x07]
        let s = LogScanner.scan(good + garbage)
        #expect(s.entries.count == 2 && s.corruption == nil)
        #expect(s.tail.offset == Int64(good.count))
        if case .badFinalLine(_, let length, let line, _) = s.tail { #expect(length == garbage.count && line == 3) } else { Issue.record("tail \(s.tail)") }
    }

    @Test func garbageFollowedByARecordIsStillCorruption() {
        let good = log(2)
        let s = LogScanner.scan(good + Array("garbage\n\u{0}\n".utf8) + log(1, from: 3))
        #expect(s.corruption?.line == 3 && s.tail == .clean)
    }

    @Test func sequenceGapsAndRepeatsAreCorruption() {
        let gap = log(1) + log(1, from: 3)
        #expect(LogScanner.scan(gap).corruption?.reason.contains("skips ahead") == true)
        let repeatBytes = log(2) + log(1, from: 2)
        #expect(LogScanner.scan(repeatBytes).corruption?.reason.contains("repeats") == true)
    }

    @Test func scanningInPiecesMatchesScanningWhole() {
        let all = log(5)
        let first = LogScanner.scan(Array(all.prefix(Int(LogScanner.scan(log(2)).validEnd))))
        let rest = LogScanner.scan(Array(all[Int(first.validEnd)...]), baseOffset: first.validEnd, baseLine: first.linesRead, lastSeq: first.lastSeq)
        #expect(first.entries + rest.entries == LogScanner.scan(all).entries)
    }
}
