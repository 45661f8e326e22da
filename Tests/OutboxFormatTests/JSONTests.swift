import Testing
@testable import OutboxFormat

@Suite struct JSONTests {
    @Test func writesKeysInOrderWithoutEscapingSlashes() {
        let o: JSONObject = ["b": "a/b", "a": 1, "z": .array([true, nil, .double(1.5)])]
        let text = String(decoding: JSONWriter.encode(.object(o)), as: UTF8.self)
        #expect(text == #"{"b":"a/b","a":1,"z":[true,null,1.5]}"#)
    }

    @Test func escapesControlCharactersAndKeepsUnicodeRaw() throws {
        let s = "line\nquote\" back\\ tab\t bell\u{07} 한글 🙂"
        let bytes = JSONWriter.encode(.string(s))
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text == #""line\nquote\" back\\ tab\t bell\u0007 한글 🙂""#)
        #expect(try JSONParser.parse(bytes) == .string(s))
    }

    @Test func roundTripsNestedValues() throws {
        let v: JSONValue = .object(["a": .array([.int(-3), .int(Int64.max), .string(""), .object([:])]), "b": .null])
        #expect(try JSONParser.parse(JSONWriter.encode(v)) == v)
    }

    @Test(arguments: [
        "", "{", "{\"a\":}", "[1,]", "01", "1.", "-", "\"\\x\"", "\"a", "{\"a\":1}x", "nul", "[\"\\ud800\"]",
        "\"\u{01}\"", "{1:2}", "[1 2]",
        "71e7111", "-1e400",  // found by fuzz-log: overflow to infinity cannot round-trip
    ])
    func rejectsMalformedJSON(_ text: String) {
        #expect(throws: JSONParseError.self) { try JSONParser.parse(Array(text.utf8)) }
    }

    @Test func rejectsInvalidUTF8() {
        let bytes: [UInt8] = [0x22, 0xC3, 0x28, 0x22]  // "\xC3(" — a broken two-byte sequence
        #expect(throws: JSONParseError.self) { try JSONParser.parse(bytes) }
    }

    @Test func decodesEscapesAndSurrogatePairs() throws {
        #expect(try JSONParser.parse(Array(#""a\/b\u00e9\ud83d\ude42""#.utf8)) == .string("a/bé🙂"))
    }

    @Test func refusesDeepNesting() {
        let deep = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        #expect(throws: JSONParseError.self) { try JSONParser.parse(Array(deep.utf8)) }
    }
}

@Suite struct DigestTests {
    @Test func sha256KnownVectors() {
        #expect(SHA256.hex([UInt8]()) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hex(Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hex(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(SHA256.hex([UInt8](repeating: 0x61, count: 1_000_000))
                == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test func sha256StreamingMatchesOneShot() {
        let bytes = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        var s = SHA256()
        var i = 0
        for chunk in [1, 63, 64, 65, 127, 1000, 5000] where i < bytes.count {
            s.update(Array(bytes[i..<min(bytes.count, i + chunk)])); i += chunk
        }
        s.update(Array(bytes[min(i, bytes.count)...]))
        #expect(Hex.encode(s.finalize()) == SHA256.hex(bytes))
    }

    @Test func crc32cKnownVector() {
        // RFC 3720 B.4: 32 bytes of zeros → 0x8a9136aa; "123456789" → 0xe3069283.
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
    }
}

@Suite struct TimestampTests {
    @Test func formatsAndParsesRFC3339() {
        #expect(Timestamp.format(millis: 0) == "1970-01-01T00:00:00.000Z")
        #expect(Timestamp.format(millis: 1_795_013_759_123) == "2026-11-18T14:55:59.123Z")
        #expect(Timestamp.parse("2026-11-18T14:55:59.123Z") == 1_795_013_759_123)
        #expect(Timestamp.parse("2026-11-18T15:55:59.123+01:00") == 1_795_013_759_123)
        #expect(Timestamp.parse("2026-11-18T14:55:59Z") == 1_795_013_759_000)
        #expect(Timestamp.parse("2024-02-29T00:00:00.5Z") == Timestamp.parse("2024-02-29T00:00:00.500Z"))
        #expect(Timestamp.parse("2026-13-01T00:00:00Z") == nil)
        #expect(Timestamp.parse("yesterday") == nil)
        for ms: Int64 in [-86_400_001, 951_782_400_000, 4_102_444_799_999] {
            #expect(Timestamp.parse(Timestamp.format(millis: ms)) == ms)
        }
    }
}

@Suite struct UTF8ValidationTests {
    /// Our validator agrees with the standard library on every 1–3 byte sequence, and on the
    /// classic edge cases of 4-byte ones.
    @Test func agreesWithTheStandardLibrary() {
        func both(_ bytes: [UInt8]) {
            let ours = bytes.withUnsafeBufferPointer { UTF8Validation.isValid($0) }
            let std = String(validating: bytes, as: UTF8.self) != nil
            #expect(ours == std, "\(bytes.map { String($0, radix: 16) })")
        }
        for a in 0...255 { both([UInt8(a)]) }
        for a in 0x80...0xFF { for b in 0...255 { both([UInt8(a), UInt8(b)]) } }
        for a in 0xE0...0xEF { for b in stride(from: 0x70, through: 0xC8, by: 1) { for c in [0x30, 0x80, 0xBF, 0xC0] { both([UInt8(a), UInt8(b), UInt8(c)]) } } }
        for seq: [UInt8] in [[0xF0, 0x90, 0x80, 0x80], [0xF0, 0x8F, 0xBF, 0xBF], [0xF4, 0x8F, 0xBF, 0xBF], [0xF4, 0x90, 0x80, 0x80],
                             [0xF5, 0x80, 0x80, 0x80], [0xF0, 0x9F, 0x99, 0x82], [0xF0, 0x9F, 0x99], [0xED, 0xA0, 0x80], [0xC0, 0xAF]] {
            both(seq)
        }
    }
}
