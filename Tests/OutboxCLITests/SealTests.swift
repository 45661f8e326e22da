import Foundation
import Testing

@Suite("a damaged log: sealed, reset, salvage")
struct SealTests {
    /// Three queued turns, then one byte of the first turn's line (line 2 of 4) changed.
    func damagedOutbox() throws -> (Sandbox, [String], [UInt8]) {
        let box = Sandbox()
        var ids: [String] = []
        for (i, text) in ["alpha one", "beta two", "gamma three"].enumerated() {
            let r = try box.outbox(["send", "--no-wait"] + (i > 0 ? ["-c"] : []) + [text])
            #expect(r.code == 0, "\(r)")
            ids.append(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        var bytes = box.read(box.log)
        let lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false)
        #expect(lines.count == 5)  // 4 lines and the empty string after the last newline
        let line2Start = lines[0].count + 1
        let at = bytes[line2Start...].firstIndex(of: UInt8(ascii: "a"))!  // inside "alpha one"
        #expect(at < line2Start + lines[1].count)
        bytes[at] = UInt8(ascii: "A")
        _ = FileManager.default.createFile(atPath: box.log, contents: Data(bytes))
        return (box, ids, bytes)
    }

    @Test func writesExit3AndLeaveTheFileUntouched() throws {
        let (box, _, damaged) = try damagedOutbox()
        let writes: [[String]] = [["send", "--no-wait", "more"], ["send", "--no-wait", "-c", "more"], ["retry", "--all"],
                                  ["gc"], ["drain"], ["chat"], ["salvage", box.log + ".nope"]]
        for args in writes {
            let r = try box.outbox(args, stdin: "")
            if args[0] == "salvage" { #expect(r.code == 1, "\(r)"); continue }  // no such file: checked before opening
            #expect(r.code == 3, "\(args): \(r)")
            #expect(r.oneErrorLine && r.stderr.contains("sealed") && r.stderr.contains("line 2") && r.stderr.contains("outbox reset"), "\(args): \(r)")
            #expect(box.read(box.log) == damaged, "\(args) changed the damaged log")
        }
        let cancel = try box.outbox(["cancel", "whatever"])
        #expect(cancel.code == 3, "\(cancel)")

        // Reads still work, and say where and why.
        let status = try box.outbox(["status"])
        #expect(status.code == 0 && status.stdout.contains("sealed     YES") && status.stdout.contains("line 2"), "\(status)")
        let sj = try box.outbox(["status", "--json"]).json()
        let seal = try #require(sj["sealed"] as? [String: Any])
        #expect(seal["line"] as? Int == 2 && (seal["offset"] as? Int ?? 0) > 0 && seal["path"] as? String == box.log)
        #expect((seal["reason"] as? String)?.contains("checksum") == true, "\(seal)")
        let verify = try box.outbox(["verify"])
        #expect(verify.code == 3 && verify.stderr.contains("sealed"), "\(verify)")
        let vj = try box.outbox(["verify", "--json"])
        #expect(vj.code == 3 && vj.json()["healthy"] as? Bool == false && vj.json()["sealed"] is [String: Any], "\(vj)")
        let list = try box.outbox(["list", "--json"])
        #expect(list.code == 0 && (list.json()["turns"] as? [Any])?.isEmpty == true, "what decoded before the damage: \(list)")
        #expect(box.read(box.log) == damaged)
    }

    @Test func resetKeepsTheDamagedFileAndSalvageReimports() throws {
        let (box, ids, damaged) = try damagedOutbox()
        let reset = try box.outbox(["reset"])   // stdin is not a terminal: no question
        #expect(reset.code == 0, "\(reset)")
        let salvageLine = try #require(reset.stdout.split(separator: "\n").first { $0.hasPrefix("to re-import its unsent turns: outbox salvage ") })
        let aside = String(salvageLine.dropFirst("to re-import its unsent turns: outbox salvage ".count))
        #expect(aside.hasPrefix(box.outboxDir + "/turns.damaged-") && aside.hasSuffix("/turns.jsonl"))
        #expect(box.read(aside) == damaged, "the damaged log is kept byte for byte")
        #expect(box.read(box.log).isEmpty, "a fresh, empty log")
        #expect(try box.outbox(["verify"]).code == 0)

        let salvage = try box.outbox(["salvage", aside])
        #expect(salvage.code == 0, "\(salvage)")
        #expect(salvage.stdout.contains("2 turns imported") && salvage.stdout.contains("unreadable (line 2)"), "\(salvage)")
        let turns = try #require(try box.outbox(["list", "--json"]).json()["turns"] as? [[String: Any]])
        #expect(turns.map { $0["id"] as? String } == [ids[1], ids[2]], "request ids are kept")
        #expect(turns.allSatisfy { $0["state"] as? String == "queued" })
        // Salvaging again imports nothing twice.
        let again = try box.outbox(["salvage", aside])
        #expect(again.code == 0 && again.stdout.contains("0 turns imported") && again.stdout.contains("2 turns already in this outbox"), "\(again)")
        // And the re-imported turns deliver.
        let send = try box.outbox(["drain"])
        #expect(send.code == 0 && send.stdout.contains("delivered 2"), "\(send)")
    }

    @Test func resetRefusesAHealthyOutboxUnlessForced() throws {
        let box = Sandbox()
        #expect(try box.outbox(["reset", "--yes"]).code == 1)   // nothing there at all
        _ = try box.outbox(["send", "--no-wait", "keep me"])
        let before = box.read(box.log)
        let r = try box.outbox(["reset", "--yes"])
        #expect(r.code == 1 && r.stderr.contains("healthy") && r.stderr.contains("--force") && r.oneErrorLine, "\(r)")
        #expect(box.read(box.log) == before)
        let forced = try box.outbox(["reset", "--yes", "--force"])
        #expect(forced.code == 0 && !forced.stdout.contains("was sealed"), "\(forced)")
        #expect(box.read(box.log).isEmpty)
    }
}

@Suite("settings, torn tails and questions on a terminal")
struct SettingsTests {
    @Test func dirFlagWinsOverEnvironmentWhichWinsOverDefault() throws {
        let box = Sandbox()
        let envDir = box.path + "/from-env", flagDir = box.path + "/from-flag"
        _ = try box.outbox(["send", "--no-wait", "a"], env: ["OUTBOX_DIR": envDir])
        _ = try box.outbox(["--dir", flagDir, "send", "--no-wait", "b"], env: ["OUTBOX_DIR": envDir])
        _ = try box.outbox(["send", "--no-wait", "c"])
        for (dir, text) in [(envDir, "a"), (flagDir, "b"), (box.outboxDir, "c")] {
            let turns = try box.outbox(["list", "--json", "--dir", dir]).json()["turns"] as? [[String: Any]]
            #expect(turns?.map { $0["text"] as? String } == [text], "\(dir)")
        }
        let s = try box.outbox(["status", "--json"], env: ["OUTBOX_DIR": envDir, "OUTBOX_SURFACE": "web"]).json()
        #expect(s["directory"] as? String == envDir && s["surface"] as? String == "web")
    }

    @Test func statusReportsATornTailAndItsRepair() throws {
        let box = Sandbox()
        _ = try box.outbox(["send", "--no-wait", "whole"])
        let handle = try #require(FileHandle(forWritingAtPath: box.log))
        handle.seekToEndOfFile()
        handle.write(Data("{\"v\":1,\"seq\":3,\"type\":\"tu".utf8))   // a write that never finished
        try handle.close()
        let before = try box.outbox(["status"])
        #expect(before.code == 0 && before.stdout.contains("an unfinished last line"), "\(before)")
        #expect(try box.outbox(["verify"]).code == 1, "an unrepaired tail is a problem, not a seal")
        #expect(try box.outbox(["send", "--no-wait", "-c", "after"]).code == 0)
        let after = try box.outbox(["status", "--json"]).json()
        let repairs = try #require(after["tornTailRepairs"] as? [[String: Any]])
        #expect(repairs.count == 1 && repairs[0]["bytes"] as? Int == 25, "\(repairs)")
        #expect((after["counts"] as? [String: Int])?["queued"] == 2)
        #expect(try box.outbox(["verify"]).code == 0)
    }

    @Test(.enabled(if: TmuxSession.available, "needs tmux (Debian package tmux)"))
    func resetAsksOnATerminal() throws {
        let box = Sandbox()
        _ = try box.outbox(["send", "--no-wait", "keep"])
        let env = box.environment.map { "\($0.key)='\($0.value)'" }.sorted().joined(separator: " ")
        let exe = try binary("outbox")
        let tmux = try TmuxSession(command: "env -i \(env) TERM=xterm \(exe) reset --force; echo EXIT=$?; env -i \(env) TERM=xterm \(exe) reset --force; echo EXIT=$?; sleep 60")
        defer { tmux.close() }
        _ = try tmux.waitFor("[y/N]")
        try tmux.type("n")
        var screen = try tmux.waitFor("EXIT=1")
        #expect(screen.contains("nothing changed"), "\(screen)")
        #expect(try box.outbox(["list", "--json"]).json()["turns"] as? [Any] != nil)
        try tmux.type("y")
        screen = try tmux.waitFor("EXIT=0")
        #expect(screen.contains("started a fresh log"), "\(screen)")
        #expect(box.read(box.log).isEmpty)
    }
}
