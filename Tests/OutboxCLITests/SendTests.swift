import Foundation
import Testing

@Suite("send, and reading the queue back")
struct SendTests {
    @Test func pipedSendGetsTheEmbeddedEnginesReply() throws {
        let box = Sandbox()
        let r = try box.outbox(["send", "-"], stdin: "hi\n")
        #expect(r.code == 0, "\(r)")
        #expect(r.stdout == "echo: hi\n", "stdout is the reply and nothing else: \(r)")
        #expect(r.stderr.contains("new conversation") && r.stderr.contains("origin surface cli"), "\(r)")
        // The embedded engine keeps its data in a directory of its own, with its token there, not in the log.
        let engineDir = box.path + "/xdg/outbox-engine"
        #expect(FileManager.default.fileExists(atPath: engineDir + "/token"))
        let token = String(decoding: box.read(engineDir + "/token"), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(!token.isEmpty && !String(decoding: box.read(box.log), as: UTF8.self).contains(token), "the token is never in the log")
        // No text on stdin and no TEXT: piped stdin is the message.
        let r2 = try box.outbox(["send", "-c"], stdin: "second line\n")
        #expect(r2.code == 0 && r2.stdout == "echo: second line\n", "\(r2)")
    }

    @Test func sendJSONCarriesIdConversationStateAndReply() throws {
        let box = Sandbox()
        let r = try box.outbox(["send", "--json", "--title", "Greetings", "hello", "world"])
        #expect(r.code == 0, "\(r)")
        #expect(r.stderr.isEmpty, "--json keeps narration off: \(r)")
        let o = r.json()
        #expect((o["id"] as? String)?.count == 36)
        #expect(o["state"] as? String == "synced")
        #expect(o["reply"] as? String == "echo: hello world")
        let conv = try #require(o["newConversation"] as? [String: Any])
        #expect(conv["title"] as? String == "Greetings" && conv["originSurface"] as? String == "cli")
        #expect(o["conversation"] as? String == conv["id"] as? String)

        // -c continues it; --surface is recorded on the turn.
        let r2 = try box.outbox(["send", "--json", "-c", "--surface", "phone", "again"])
        let o2 = r2.json()
        #expect(o2["conversation"] as? String == conv["id"] as? String, "\(r2)")
        #expect(o2["newConversation"] is NSNull && o2["surface"] as? String == "phone")
    }

    @Test func noWaitReturnsOnceDurableAndEveryJSONReadsBack() throws {
        let box = Sandbox()
        let file = box.write("notes.txt", "attached bytes\n")
        let r = try box.outbox(["send", "--no-wait", "-a", file, "first", "message"])
        #expect(r.code == 0, "\(r)")
        let id = r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(id.count == 36, "stdout is the turn id: \(r)")
        // Durable: the line is in the file when the command returns.
        #expect(String(decoding: box.read(box.log), as: UTF8.self).contains("\"id\":\"\(id)\""))

        let list = try box.outbox(["list", "--json"]).json()
        let turns = try #require(list["turns"] as? [[String: Any]])
        #expect(turns.count == 1 && turns[0]["id"] as? String == id && turns[0]["state"] as? String == "queued")
        let queued = try box.outbox(["list", "--state", "queued", "--json"]).json()["turns"] as? [Any]
        #expect(queued?.count == 1)
        let synced = try box.outbox(["list", "--state", "synced", "--json"]).json()["turns"] as? [Any]
        #expect(synced?.count == 0)

        let show = try box.outbox(["show", String(id.prefix(8)), "--json"]).json()
        let turn = try #require(show["turn"] as? [String: Any])
        #expect(turn["text"] as? String == "first message")
        let att = try #require((turn["attachments"] as? [[String: Any]])?.first)
        let sha = try #require(att["sha256"] as? String)
        // The blob is the file's bytes under their SHA-256 (what `sha256sum` prints).
        let sum = try runProcess("/usr/bin/sha256sum", [file], stdin: nil, env: box.environment, timeout: 10)
        #expect(sum.stdout.hasPrefix(sha))
        #expect(box.read(box.outboxDir + "/blobs/" + sha) == Array("attached bytes\n".utf8))
        let history = try #require(show["history"] as? [[String: Any]])
        #expect(history.count == 1 && history[0]["type"] as? String == "turn" && history[0]["line"] as? Int == 2)

        let convs = try box.outbox(["conversations", "--json"]).json()
        let c = try #require((convs["conversations"] as? [[String: Any]])?.first)
        #expect(c["title"] as? String == "first message" && c["originSurface"] as? String == "cli" && c["turns"] as? Int == 1)
        #expect(c["state"] as? String == "pending")

        let status = try box.outbox(["status", "--json"]).json()
        #expect((status["counts"] as? [String: Int])?["queued"] == 1)
        #expect(status["sealed"] is NSNull)
        #expect((status["oldestQueued"] as? [String: Any])?["id"] as? String == id)
        #expect(status["nextAttemptAt"] as? String == "now")
        #expect((status["engine"] as? [String: Any])?["embedded"] as? Bool == true)

        let verify = try box.outbox(["verify", "--json"])
        #expect(verify.code == 0 && verify.json()["healthy"] as? Bool == true, "\(verify)")

        // Piped output is plain: no escape codes anywhere.
        for args in [["status"], ["list"], ["log"], ["conversations"], ["show", id]] {
            let out = try box.outbox(args)
            #expect(out.code == 0 && !out.stdout.contains("\u{1B}"), "\(args): \(out)")
        }

        // Then a drain delivers it, and the log renders the reply.
        let d = try box.outbox(["drain"])
        #expect(d.code == 0 && d.stdout.contains("delivered 1"), "\(d)")
        let log = try box.outbox(["log"])
        #expect(log.stdout.contains("you> first message [notes.txt]") && log.stdout.contains("engine> echo: first message"), "\(log)")
    }

    @Test func badInputIsRefusedAndNothingIsLost() throws {
        let box = Sandbox()
        let bad = try box.outbox(["send", "-"], stdinBytes: [0x68, 0xFF, 0xFE, 0x0A])
        #expect(bad.code == 1 && bad.stderr.contains("not UTF-8") && bad.oneErrorLine, "\(bad)")
        let missing = try box.outbox(["send", "--no-wait", "-a", box.path + "/nope.png", "look"])
        #expect(missing.code == 1 && missing.stderr.contains("does not exist") && missing.oneErrorLine, "\(missing)")
        let unknown = try box.outbox(["send", "--no-wait", "--cid", "no-such-conversation", "hi"])
        #expect(unknown.code == 1 && unknown.stderr.contains("no conversation no-such-conversation"), "\(unknown)")
        let noRecent = try box.outbox(["send", "--no-wait", "-c", "hi"])
        #expect(noRecent.code == 1 && noRecent.stderr.contains("there is none yet"), "\(noRecent)")
        let huge = try box.outbox(["send", "--no-wait", "-"], stdin: String(repeating: "x", count: 600_000))
        #expect(huge.code == 2 && huge.stderr.contains("limit") && huge.oneErrorLine, "\(huge)")
        let list = try box.outbox(["list", "--json"]).json()
        #expect((list["turns"] as? [Any])?.isEmpty == true, "none of it was queued")
    }

    @Test func reportsWhenThereIsNothingYet() throws {
        let box = Sandbox()
        let s = try box.outbox(["status"])
        #expect(s.code == 0 && s.stdout.contains("nothing sent from here yet"), "\(s)")
        #expect(try box.outbox(["list"]).stdout == "no turns\n")
        #expect(try box.outbox(["conversations"]).stdout == "no conversations yet\n")
        #expect(try box.outbox(["log"]).stdout == "no conversations yet\n")
        let v = try box.outbox(["verify", "--json"])
        #expect(v.code == 0 && v.json()["exists"] as? Bool == false)
        let show = try box.outbox(["show", "abcd"])
        #expect(show.code == 1 && show.oneErrorLine, "\(show)")
        #expect(!FileManager.default.fileExists(atPath: box.log), "reading created nothing")
    }
}
