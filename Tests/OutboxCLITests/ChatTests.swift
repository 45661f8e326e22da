import Foundation
import Testing

@Suite("chat in a terminal and through a pipe")
struct ChatTests {
    @Test(.enabled(if: TmuxSession.available, "needs tmux (Debian package tmux)"))
    func chatOnATerminalShowsRepliesAndTheStatusLine() throws {
        let box = Sandbox()
        let env = box.environment.map { "\($0.key)='\($0.value)'" }.sorted().joined(separator: " ")
        let tmux = try TmuxSession(command: "env -i \(env) TERM=xterm \(try binary("outbox")) chat --title 'Terminal test'; echo EXIT=$?; sleep 60")
        defer { tmux.close() }
        _ = try tmux.waitFor("new conversation")
        try tmux.type("hello from a pty")
        var screen = try tmux.waitFor("engine> echo: hello from a pty")
        #expect(screen.contains("you> hello from a pty"), "\(screen)")
        #expect(screen.contains("\"Terminal test\""), "\(screen)")
        try tmux.type("/status")
        screen = try tmux.waitFor("need attention; engine:")
        try tmux.type("/quit")
        screen = try tmux.waitFor("EXIT=0")
        #expect(screen.contains("all turns delivered"), "\(screen)")
        let log = try box.outbox(["log"])
        #expect(log.stdout.contains("you> hello from a pty") && log.stdout.contains("engine> echo: hello from a pty"), "\(log)")
    }

    @Test(.enabled(if: TmuxSession.available, "needs tmux (Debian package tmux)"))
    func chatWithTheEngineDownKeepsTurnsQueuedAndSaysWhen() throws {
        let box = Sandbox()
        let env = box.environment.map { "\($0.key)='\($0.value)'" }.sorted().joined(separator: " ")
        let port = closedPort()
        let tmux = try TmuxSession(command: "env -i \(env) TERM=xterm NO_COLOR=1 OUTBOX_ENGINE_TOKEN=t \(try binary("outbox")) chat --engine http://127.0.0.1:\(port); echo EXIT=$?; sleep 60")
        defer { tmux.close() }
        _ = try tmux.waitFor("new conversation")
        try tmux.type("are you there")
        let screen = try tmux.waitFor("engine unreachable")
        #expect(screen.contains("1 queued") && screen.contains("connection refused") && screen.contains("next attempt"), "\(screen)")
        #expect(!screen.contains("engine>"), "\(screen)")
        // The person keeps typing.
        try tmux.type("still typing")
        _ = try tmux.waitFor("2 queued")
        try tmux.type("/quit")
        let end = try tmux.waitFor("EXIT=0")
        #expect(end.contains("2 turns still queued") && end.contains("outbox drain"), "\(end)")
        let queued = try box.outbox(["list", "--state", "queued", "--json"]).json()["turns"] as? [[String: Any]]
        #expect(queued?.map { $0["text"] as? String } == ["are you there", "still typing"])
    }

    @Test func pipedChatPrintsPlainLines() throws {
        let box = Sandbox()
        let r = try box.outbox(["chat"], stdin: "first\nsecond\n/status\n")
        #expect(r.code == 0, "\(r)")
        #expect(!r.stdout.contains("\u{1B}"), "no escape codes when piped: \(r)")
        for line in ["you> first", "you> second", "engine> echo: first", "engine> echo: second", "all turns delivered"] {
            #expect(r.stdout.contains(line), "\(line): \(r)")
        }
        let c = try box.outbox(["chat", "-c"], stdin: "third\n")
        #expect(c.stdout.contains("continuing \"first\"") && c.stdout.contains("engine> echo: third"), "\(c)")
        let convs = try box.outbox(["conversations", "--json"]).json()["conversations"] as? [[String: Any]]
        #expect(convs?.count == 1 && convs?.first?["turns"] as? Int == 3)
    }
}
