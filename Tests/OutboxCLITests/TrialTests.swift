import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// What a new-user trial found: each test fails on the CLI as it was before the fix.
@Suite("new-user trial findings")
struct TrialTests {
    // MARK: 1, 8 — a silent engine: sleep while waiting, say so, Ctrl-C says where the turn is

    @Test func sendToASilentEngineSleepsAndSaysItIsWaiting() throws {
        let box = Sandbox()
        let engine = try SilentEngine()
        var env = box.environment
        env["OUTBOX_ENGINE_TOKEN"] = "t"
        let send = try Background(try binary("outbox"), ["send", "--engine", engine.url, "hello"], env: env)
        Thread.sleep(forTimeInterval: 4.5)
        let cpu = try #require(cpuSeconds(send.process.processIdentifier))
        // Busy-waiting (URLSession on Linux) burned ~3 s of CPU in these 4.5 s; sleeping costs ~0.
        #expect(cpu < 0.5, "send used \(cpu) s of CPU in 4.5 s while the engine said nothing")
        #expect(send.output.text.contains("sending… (the engine has not answered yet"), "\(send.output.text)")
        _ = send.terminate()
    }

    @Test func ctrlCDuringSendSaysTheTurnIsSavedAndExits130() throws {
        let box = Sandbox()
        let engine = try SilentEngine()
        var env = box.environment
        env["OUTBOX_ENGINE_TOKEN"] = "t"
        let send = try Background(try binary("outbox"), ["send", "--engine", engine.url, "hello"], env: env)
        #expect(eventually { FileManager.default.fileExists(atPath: box.log) && engine.accepted > 0 })
        Thread.sleep(forTimeInterval: 0.3)
        kill(send.process.processIdentifier, SIGINT)
        send.process.waitUntilExit()
        #expect(send.process.terminationReason == .exit && send.process.terminationStatus == 130, "\(send.output.text)")
        let id = try #require((try box.outbox(["list", "--json"]).json()["turns"] as? [[String: Any]])?.first?["id"] as? String)
        #expect(eventually(5) { send.output.text.contains("outbox: interrupted; turn \(id) is saved and will be delivered by the next `outbox drain`, send or chat\n") },
                "\(send.output.text)")
    }

    // MARK: 2 — reads of a sealed outbox say they are partial

    @Test func readsOfASealedOutboxSayWhereTheDamageIs() throws {
        let box = Sandbox()
        var ids: [String] = []
        for (i, text) in ["alpha one", "beta two", "gamma three"].enumerated() {
            let r = try box.outbox(["send", "--no-wait"] + (i > 0 ? ["-c"] : []) + [text])
            ids.append(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        var bytes = box.read(box.log)
        let text = String(decoding: bytes, as: UTF8.self)
        let beta = try #require(text.range(of: "beta two"))
        bytes[text.utf8.distance(from: text.utf8.startIndex, to: beta.lowerBound)] = UInt8(ascii: "B")
        // Line 3 of 4 damaged (a damaged last line would be a torn tail, not a seal).
        _ = FileManager.default.createFile(atPath: box.log, contents: Data(bytes))

        let note = "outbox: the outbox is sealed at line 3 ("
        let tail = "); showing what was written before the damage — see `outbox status`\n"
        for args in [["list"], ["log"], ["conversations"], ["show", ids[0]]] {
            let r = try box.outbox(args)
            #expect(r.code == 0 && r.oneErrorLine && r.stderr.hasPrefix(note) && r.stderr.hasSuffix(tail), "\(args): \(r)")
        }
        for args in [["list", "--json"], ["conversations", "--json"], ["show", ids[0], "--json"]] {
            let r = try box.outbox(args)
            #expect(r.code == 0 && r.stderr.isEmpty, "\(args): \(r)")
            let seal = try #require(r.json()["sealed"] as? [String: Any], "\(args): \(r)")
            #expect(seal["line"] as? Int == 3 && seal["path"] as? String == box.log && seal["offset"] is Int && seal["reason"] is String)
        }
        #expect((try box.outbox(["list", "--json"]).json()["turns"] as? [Any])?.count == 1)
        // Healthy: no note, and "sealed": null.
        let fresh = Sandbox()
        _ = try fresh.outbox(["send", "--no-wait", "fine"])
        let ok = try fresh.outbox(["list", "--json"])
        #expect(ok.stderr.isEmpty && ok.json()["sealed"] is NSNull, "\(ok)")
    }

    // MARK: 3 — a torn-tail repair is said

    @Test func cuttingATornLastLineIsSaidOnStderr() throws {
        let box = Sandbox()
        _ = try box.outbox(["send", "--no-wait", "whole"])
        let size = box.read(box.log).count
        let torn = Array(#"{"v":1,"seq":3,"type":"turn","at":"2026"#.utf8)
        let h = try #require(FileHandle(forWritingAtPath: box.log))
        h.seekToEndOfFile(); h.write(Data(torn)); h.closeFile()

        let r = try box.outbox(["send", "--no-wait", "-c", "next"])
        #expect(r.code == 0, "\(r)")
        let line = try #require(r.stderr.split(separator: "\n").first { $0.hasPrefix("outbox: cut a torn last line") }, "\(r)")
        let saved = try #require(line.range(of: "kept in ").map { String(line[$0.upperBound...].prefix { $0 != " " }) })
        #expect(line == "outbox: cut a torn last line (\(torn.count) bytes at offset \(size), never acknowledged) from the log; its bytes are kept in \(saved) — `outbox salvage \(saved)` re-imports a whole record from it")
        #expect(box.read(saved) == torn)
        // Once cut, it is not said again.
        let again = try box.outbox(["send", "--no-wait", "-c", "third"])
        #expect(!again.stderr.contains("torn"), "\(again)")
    }

    // MARK: 4 — refused sends write nothing, exit 2

    @Test func refusedMessagesWriteNothingAndExit2() throws {
        let box = Sandbox()
        _ = try box.outbox(["send", "--no-wait", "the one conversation"])
        let before = box.read(box.log)
        let big = String(repeating: "a", count: 100_000)
        let cases: [([String], String?, String)] = [
            (["send", "--no-wait", "   "], nil, "outbox: nothing to send: the message is only whitespace"),
            (["send", "   "], nil, "outbox: nothing to send: the message is only whitespace"),
            (["send", "-"], "", "outbox: nothing to send: the input on stdin was empty"),
            (["send", "-"], " \n\t\n", "outbox: nothing to send: the message is only whitespace"),
            (["send"] + Array(repeating: big, count: 6), nil, "outbox: message is 600005 bytes; the limit is 524288 bytes"),
            (["send", "-"], String(repeating: "b", count: 524_289) + "\n", "outbox: message is 524289 bytes; the limit is 524288 bytes"),
        ]
        for (args, stdin, expected) in cases {
            let r = try box.outbox(args, stdin: stdin)
            #expect(r.code == 2 && r.oneErrorLine && r.stderr.hasPrefix(expected), "\(args.map { $0.prefix(20) }): \(r)")
        }
        #expect(box.read(box.log) == before, "a refused send wrote to the log")
        // Exactly at the limit is accepted (trailing newlines are not part of the message).
        let atLimit = try box.outbox(["send", "--no-wait", "-"], stdin: String(repeating: "c", count: 524_288) + "\n\n")
        #expect(atLimit.code == 0, "\(atLimit.stderr)")
    }

    // MARK: 5 — short prefixes

    @Test func aShortIdPrefixIsAUsageError() throws {
        let box = Sandbox()
        _ = try box.outbox(["send", "--no-wait", "x"])
        for args in [["show", "578"], ["cancel", "57"], ["log", "--cid", "ab"]] {
            let r = try box.outbox(args)
            #expect(r.code == 2 && r.oneErrorLine && r.stderr.contains("an id prefix needs at least 4 characters"), "\(args): \(r)")
        }
    }

    // MARK: 6, 9 — needs attention: prefixed, concrete; held turns; plurals

    @Test func aRefusedTokenIsPrefixedConcreteAndHoldsTheConversation() throws {
        let box = Sandbox()
        let engine = try EngineProcess(dataDir: box.path + "/engine")
        defer { engine.stop() }
        let r = try box.outbox(["send", "--engine", engine.url, "first"], env: ["OUTBOX_ENGINE_TOKEN": "wrong"])
        #expect(r.code == 1, "\(r)")
        let err = r.stderr.split(separator: "\n").last.map(String.init) ?? ""
        #expect(err.hasPrefix("outbox: turn ") && err.contains("needs attention") && err.contains("check OUTBOX_ENGINE_TOKEN"), "\(r)")
        #expect(!err.contains("fix the cause"), "\(r)")
        let first = try #require((try box.outbox(["list", "--json"]).json()["turns"] as? [[String: Any]])?.first?["id"] as? String)

        let held = try box.outbox(["send", "--no-wait", "-c", "second"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let status = try box.outbox(["status"])
        #expect(status.stdout.contains("turn \(held) is held behind turn \(first) (same conversation, order kept)"), "\(status)")
        #expect(!status.stdout.contains("next try   now"), "\(status)")
        #expect(status.stdout.contains("1 conversation)") && status.stdout.contains("1 turn needs a person"), "\(status)")
        let sj = try box.outbox(["status", "--json"]).json()
        #expect((sj["heldBehind"] as? [String: String]) == [held: first], "\(sj)")
    }

    @Test func peopleReadConnectionRefusedNotErrorCodes() throws {
        let box = Sandbox()
        let down = "http://127.0.0.1:\(closedPort())"
        let r = try box.outbox(["send", "--engine", down, "x"], env: ["OUTBOX_ENGINE_TOKEN": "t"])
        #expect(r.code == 0 && r.stderr.contains("connection refused"), "\(r)")
        let id = try #require((try box.outbox(["list", "--json"]).json()["turns"] as? [[String: Any]])?.first?["id"] as? String)
        for run in [r, try box.outbox(["show", id]), try box.outbox(["log"]), try box.outbox(["list"]),
                    try box.outbox(["drain", "--engine", down], env: ["OUTBOX_ENGINE_TOKEN": "t"])] {
            #expect(!(run.stdout + run.stderr).contains("NSURLErrorDomain"), "\(run)")
        }
    }

    @Test func cancellingTwiceSaysAlreadyCancelled() throws {
        let box = Sandbox()
        let id = try box.outbox(["send", "--no-wait", "x"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try box.outbox(["cancel", id]).code == 0)
        let again = try box.outbox(["cancel", id])
        #expect(again.code == 0 && again.stdout == "turn \(id) is already cancelled; it will not be sent\n" && again.stderr.isEmpty, "\(again)")
    }

    @Test func aSecondWatchRefusesWithoutAnnouncingItself() throws {
        let box = Sandbox()
        let first = try Background(try binary("outbox"), ["drain", "--watch"], env: box.environment)
        #expect(eventually { first.output.text.contains("Ctrl-C stops") }, "\(first.output.text)")
        let second = try box.outbox(["drain", "--watch"])
        #expect(second.code == 0 && second.oneErrorLine && second.stderr.contains("another drain is already delivering"), "\(second)")
        #expect(!second.stdout.contains("draining"), "\(second)")
        #expect(first.terminate() == 0)
    }

    @Test func wordsArePluralizedProperly() throws {
        let box = Sandbox()
        _ = try box.outbox(["send", "--no-wait", "x"])
        let verify = try box.outbox(["verify"])
        #expect(verify.stdout.contains("2 records, 1 conversation, 1 live turn, 0 attachments checked"), "\(verify)")
        let retry = try box.outbox(["retry", "--all"])
        #expect(!retry.stdout.contains("(s)"), "\(retry)")
    }

    // MARK: 7 — a configured engine without its token

    @Test func anEngineWithoutATokenIsRefusedBeforeWriting() throws {
        let box = Sandbox()
        let expected = "outbox: --engine/OUTBOX_ENGINE_URL is set but OUTBOX_ENGINE_TOKEN is empty; export the engine's token (outbox-engine prints where it stored it)\n"
        for (args, env) in [(["send", "--engine", "http://127.0.0.1:9", "hi"], [String: String]()),
                            (["send", "hi"], ["OUTBOX_ENGINE_URL": "http://127.0.0.1:9", "OUTBOX_ENGINE_TOKEN": ""]),
                            (["drain", "--engine", "http://127.0.0.1:9"], [:]),
                            (["chat", "--engine", "http://127.0.0.1:9"], [:])] {
            let r = try box.outbox(args, stdin: "", env: env)
            #expect(r.code == 2 && r.stderr == expected, "\(args): \(r)")
        }
        #expect(!FileManager.default.fileExists(atPath: box.log), "nothing may be written")
    }

    // MARK: 10 — the README's attachment check

    @Test func theReadmeBlobRecipeWorksWithAndWithoutBlobs() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let recipe = try #require(readme.split(separator: "\n").first { $0.contains("sha256sum -c") && $0.contains("all good") }.map(String.init))
        let box = Sandbox()
        func run() throws -> Run {
            try runProcess("/bin/sh", ["-c", recipe + "; pwd"], stdin: nil,
                           env: box.environment.merging(["OUTBOX": box.outboxDir]) { $1 }, timeout: 30)
        }
        // No outbox, then an outbox with no blobs.
        #expect(try run().stdout == "all good\n\(FileManager.default.currentDirectoryPath)\n")
        _ = try box.outbox(["send", "--no-wait", "x"])
        #expect(try run().stdout.hasPrefix("all good\n"))
        // With a blob, then with that blob damaged.
        let file = box.write("a.txt", "attached")
        #expect(try box.outbox(["send", "--no-wait", "-c", "-a", file, "see"]).code == 0)
        let ok = try run()
        #expect(ok.stdout.hasPrefix("all good\n") && !ok.stdout.contains(box.outboxDir + "/blobs"), "\(ok)")
        let blob = try #require(try FileManager.default.contentsOfDirectory(atPath: box.outboxDir + "/blobs").first { $0.count == 64 })
        let path = box.outboxDir + "/blobs/" + blob
        try? FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)
        _ = FileManager.default.createFile(atPath: path, contents: Data("tampered".utf8))
        let bad = try run()
        #expect(!bad.stdout.contains("all good") && bad.stdout.contains(blob), "\(bad)")
    }
}

/// A TCP listener on 127.0.0.1 that accepts every connection and never answers.
final class SilentEngine: @unchecked Sendable {
    let fd: Int32
    let port: UInt16
    private let lock = NSLock()
    private var held: [Int32] = []
    var url: String { "http://127.0.0.1:\(port)" }
    var accepted: Int { lock.withLock { held.count } }

    init() throws {
        let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(s, $0, len) } }
        guard bound == 0, listen(s, 64) == 0 else { close(s); throw TestFailure("cannot listen") }
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(s, $0, &len) } }
        fd = s
        port = UInt16(bigEndian: addr.sin_port)
        let listener = fd
        Thread { [weak self] in
            while true {
                let c = accept(listener, nil, nil)
                if c < 0 { if errno == EINTR { continue }; return }
                guard let self else { close(c); return }
                self.lock.withLock { self.held.append(c) }
            }
        }.start()
    }

    deinit {
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
        for c in held { close(c) }
    }
}

/// user + system CPU seconds of a running process, from /proc.
func cpuSeconds(_ pid: Int32) -> Double? {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return nil }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    // After the command: state is field 3, utime 14 and stime 15 (1-based over the whole line).
    guard fields.count > 12, let u = Double(fields[11]), let s = Double(fields[12]) else { return nil }
    return (u + s) / Double(sysconf(Int32(_SC_CLK_TCK)))
}
