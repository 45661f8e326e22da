import Foundation
import Testing

@Suite("retry, cancel, gc")
struct MaintenanceTests {
    @Test func cancelOnlyWhatWasNeverSentAndRetryTheRest() throws {
        let box = Sandbox()
        let down = "http://127.0.0.1:\(closedPort())"
        let tried = try box.outbox(["send", "--json", "--engine", down, "tried once"], env: ["OUTBOX_ENGINE_TOKEN": "t"]).json()["id"] as? String ?? "?"
        // Enqueued after that attempt, and never sent.
        let file = box.write("photo.png", "not really a png")
        let fresh = try box.outbox(["send", "--no-wait", "-a", file, "never sent"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let sha = try #require(((try box.outbox(["show", fresh, "--json"]).json()["turn"] as? [String: Any])?["attachments"] as? [[String: Any]])?.first?["sha256"] as? String)
        #expect(FileManager.default.fileExists(atPath: box.outboxDir + "/blobs/" + sha))

        let c = try box.outbox(["cancel", fresh])
        #expect(c.code == 0 && c.stdout.contains("cancelled \(fresh)"), "\(c)")
        #expect(!FileManager.default.fileExists(atPath: box.outboxDir + "/blobs/" + sha), "its attachment is no longer needed")
        let again = try box.outbox(["cancel", fresh])
        #expect(again.code == 0 && again.stdout == "turn \(fresh) is already cancelled; it will not be sent\n", "\(again)")
        let notCancellable = try box.outbox(["cancel", tried])
        #expect(notCancellable.code == 1 && notCancellable.stderr.contains("may have reached the engine") && notCancellable.oneErrorLine, "\(notCancellable)")

        let retryCancelled = try box.outbox(["retry", fresh])
        #expect(retryCancelled.code == 1 && retryCancelled.stderr.contains("cancelled"), "\(retryCancelled)")
        let retry = try box.outbox(["retry", tried])
        #expect(retry.code == 0 && retry.stdout.contains("retry \(tried)"), "\(retry)")
        let t = try #require(try box.outbox(["show", tried, "--json"]).json()["turn"] as? [String: Any])
        #expect(t["attempt"] as? Int == 0 && t["lastError"] is NSNull && t["state"] as? String == "queued")
        let none = try box.outbox(["retry", "--all"])
        #expect(none.code == 0 && none.stdout.contains("nothing to retry"), "\(none)")
        let unknown = try box.outbox(["retry", "ffffffff-0000"])
        #expect(unknown.code == 1 && unknown.stderr.contains("no turn"), "\(unknown)")
    }

    @Test func gcSweepsAndCompacts() throws {
        let box = Sandbox()
        for i in 0..<5 { _ = try box.outbox(["send", i == 0 ? "--new" : "-c", "turn \(i)"]) }
        let sizeBefore = box.read(box.log).count
        // A stray blob nobody names.
        let stray = box.outboxDir + "/blobs/" + String(repeating: "ab", count: 32)
        try FileManager.default.createDirectory(atPath: box.outboxDir + "/blobs", withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: stray, contents: Data("orphan".utf8))
        let v = try box.outbox(["verify", "--json"]).json()
        #expect((v["orphanBlobs"] as? [String])?.count == 1)
        let gc = try box.outbox(["gc"])
        #expect(gc.code == 0 && gc.stdout.contains("deleted 1 unreferenced attachment and") && gc.stdout.contains("compacted the log"), "\(gc)")
        #expect(!FileManager.default.fileExists(atPath: stray))
        #expect(box.read(box.log).count < sizeBefore)
        let log = try box.outbox(["log"])
        for i in 0..<5 { #expect(log.stdout.contains("engine> echo: turn \(i)"), "\(log)") }
    }
}
