import Foundation
import Testing

@Suite("demo")
struct DemoTests {
    @Test func demoRunsTheWholeTourInSecondsWithoutInput() throws {
        let box = Sandbox()
        let started = Date()
        let r = try box.outbox(["demo"], timeout: 60)
        let seconds = Date().timeIntervalSince(started)
        #expect(r.code == 0, "\(r)")
        #expect(seconds < 30, "took \(seconds) s")
        for text in ["1. The engine is down", "queued and safe", "delivered 1", "engine> echo: hello while offline",
                     "killed the drain", "found on the engine by a status check", "no duplicate",
                     "sealed     YES", "the outbox is sealed and refuses writes", "the old log is kept at",
                     "imported; the engine's idempotency", "healthy", "Done in"] {
            #expect(r.stdout.contains(text) || r.stderr.contains(text), "missing \"\(text)\":\n\(r)")
        }
        #expect(!r.stdout.contains("DUPLICATES"))
        #expect(!r.stdout.contains("\u{1B}"), "no escape codes when piped")
        #expect(!FileManager.default.fileExists(atPath: box.outboxDir), "the person's own outbox is not touched")
    }
}
