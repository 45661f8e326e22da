import Foundation
import Testing
import OutboxFormat
import OutboxIO
@testable import OutboxStore

/// Walks every log under Fixtures/ and checks the outcome Fixtures/README.md promises.
@Suite struct FixtureTests {
    enum Outcome: CustomStringConvertible {
        /// Opens healthy with these turns live.
        case healthy(turns: Int)
        /// A torn tail is cut and kept aside; the store is not sealed.
        case repaired(turns: Int, tornBytes: Int)
        /// Sealed at this line, for a reason containing this text.
        case sealed(line: Int, reason: String)
        /// Not sealed; this turn needs attention with this text in its error.
        case turnNeedsAttention(String, error: String)

        var description: String {
            switch self {
            case .healthy(let n): return "healthy with \(n) turns"
            case .repaired(let n, let b): return "repaired (\(b) torn bytes), \(n) turns"
            case .sealed(let l, let r): return "sealed at line \(l): \(r)"
            case .turnNeedsAttention(let id, let e): return "\(id) needs attention: \(e)"
            }
        }
    }

    static let expected: [String: Outcome] = [
        "valid": .healthy(turns: 3),
        "empty": .healthy(turns: 0),
        "torn-no-newline": .repaired(turns: 3, tornBytes: 50),
        "torn-zero-padded": .repaired(turns: 3, tornBytes: 1030),
        "final-line-bad-checksum": .repaired(turns: 3, tornBytes: 206),
        "all-zero-4k": .repaired(turns: 0, tornBytes: 4096),
        "torn-garbage-newlines": .repaired(turns: 3, tornBytes: 343),
        "garbage-middle": .sealed(line: 4, reason: "checksum"),
        "bitflip-middle": .sealed(line: 2, reason: "checksum mismatch"),
        "bad-checksum-middle": .sealed(line: 2, reason: "checksum mismatch"),
        "duplicate-seq": .sealed(line: 4, reason: "sequence number 3 repeats"),
        "seq-gap": .sealed(line: 4, reason: "sequence number 5 skips ahead"),
        "future-version": .sealed(line: 8, reason: "unsupported format version 2"),
        "invalid-utf8": .sealed(line: 8, reason: "invalid UTF-8"),
        "one-mib-line": .sealed(line: 4, reason: "over the 1048576-byte record limit"),
        "unknown-turn-transition": .sealed(line: 4, reason: "state change for unknown turn t-unknown"),
        "missing-blob": .turnNeedsAttention("t2", error: "is missing"),
        "blob-mismatch": .turnNeedsAttention("t2", error: "does not match its hash"),
    ]

    static var fixturesDirectory: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures").path
    }

    static var names: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: fixturesDirectory)) ?? [])
            .filter { FileManager.default.fileExists(atPath: "\(fixturesDirectory)/\($0)/turns.jsonl") }.sorted()
    }

    @Test func everyFixtureHasAnExpectedOutcome() {
        #expect(Set(Self.names) == Set(Self.expected.keys), "Fixtures/ and this table must list the same logs")
        #expect(Self.names.count >= 18)
    }

    @Test(arguments: FixtureTests.names)
    func fixture(_ name: String) throws {
        let outcome = try #require(Self.expected[name], "no expected outcome for \(name)")
        let dir = TempDir("fixture-\(name)")
        try FileManager.default.copyItem(atPath: "\(Self.fixturesDirectory)/\(name)", toPath: dir.outbox)
        let original = fileBytes(dir.outbox + "/turns.jsonl")
        let o = try Outbox.open(directory: dir.outbox)
        switch outcome {
        case .healthy(let n):
            #expect(o.sealed == nil && o.tailRepairs.isEmpty)
            #expect(o.turns.filter(\.isLive).count == n)
            #expect(try o.verify().healthy)
        case .repaired(let n, let torn):
            #expect(o.sealed == nil, "\(name): a torn tail must not seal")
            #expect(o.turns.filter(\.isLive).count == n)
            let repair = try #require(o.tailRepairs.first)
            #expect(repair.length == torn)
            #expect(fileBytes(repair.savedAs) == Array(original.suffix(torn)), "the torn bytes are kept aside")
            #expect(fileBytes(o.paths.log) == Array(original.prefix(original.count - torn)))
            try o.send("after-repair")
        case .sealed(let line, let reason):
            let seal = try #require(o.sealed, "\(name) should seal")
            #expect(seal.line == line, "\(name): sealed at line \(seal.line ?? -1), expected \(line)")
            #expect(seal.reason.contains(reason), "\(name): reason was \(seal.reason)")
            #expect(seal.offset != nil && seal.path == o.paths.log)
            #expect(throws: StoreError.self) { try o.send("refused") }
            #expect(fileBytes(o.paths.log) == original, "\(name): a sealed log is never modified")
            #expect(try o.verify().healthy == false)
        case .turnNeedsAttention(let id, let error):
            #expect(o.sealed == nil)
            let t = try #require(o.turn(id))
            #expect(t.state == .failedNeedsAttention && t.lastError?.contains(error) == true, "\(name): \(String(describing: t.lastError))")
            #expect(o.turns.filter { $0.state == .queued }.map(\.id) == ["t3"], "other turns go on")
        }
    }
}
