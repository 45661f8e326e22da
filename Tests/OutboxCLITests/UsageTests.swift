import Foundation
import Testing

@Suite("usage, help and exit code 2")
struct UsageTests {
    @Test func versionAndHelp() throws {
        let box = Sandbox()
        let v = try box.outbox(["--version"])
        #expect(v.code == 0 && v.stdout.hasPrefix("outbox "), "\(v)")
        let h = try box.outbox(["--help"])
        #expect(h.code == 0 && h.stdout.contains("usage: outbox") && h.stdout.contains("Exit codes"), "\(h)")
        for cmd in ["chat", "send", "status", "list", "show", "log", "conversations", "retry", "cancel", "drain",
                    "verify", "gc", "reset", "salvage", "demo", "help", "completion"] {
            let r = try box.outbox(["help", cmd])
            #expect(r.code == 0 && r.stdout.contains("usage: outbox \(cmd)"), "help \(cmd): \(r)")
            let r2 = try box.outbox([cmd, "--help"])
            #expect(r2.code == 0 && r2.stdout == r.stdout, "\(cmd) --help: \(r2)")
        }
        // Help touches nothing.
        #expect(!FileManager.default.fileExists(atPath: box.outboxDir))
    }

    @Test(arguments: [
        ([], "usage: outbox"),
        (["bogus"], "unknown command \"bogus\""),
        (["sned", "hi"], "did you mean `outbox send`"),
        (["list", "--jsn"], "did you mean --json"),
        (["list", "--state", "lost"], "--state lost is not a state"),
        (["list", "extra"], "takes no arguments"),
        (["show"], "which turn?"),
        (["cancel"], "which turn?"),
        (["retry"], "give one or more ids, or --all"),
        (["retry", "abc", "--all"], "not both"),
        (["send", "-c", "--new", "hi"], "choose one of -c, --cid ID and --new"),
        (["send", "-c", "--title", "x", "hi"], "--title"),
        (["send", "--title"], "--title needs a value"),
        (["send", "--title", "a", "--title", "b", "hi"], "given twice"),
        (["--dir"], "--dir needs a value"),
        (["status", "--engine", "ftp://x"], "not an http(s) URL"),
        (["status", "--surface", "Bad Surface"], "surface \"Bad Surface\""),
        (["completion", "fish"], "no completion for \"fish\""),
        (["help", "nope"], "no command \"nope\""),
        (["salvage"], "which log?"),
        (["drain", "--wach"], "did you mean --watch"),
    ])
    func usageErrorsExit2WithOneLine(args: [String], expected: String) throws {
        let box = Sandbox()
        let r = try box.outbox(args)
        #expect(r.code == 2, "\(args): \(r)")
        #expect(r.stderr.contains(expected), "\(args): \(r)")
        if !args.isEmpty { #expect(r.oneErrorLine && r.stderr.hasPrefix("outbox: "), "\(args): \(r)") }
        #expect(r.stdout.isEmpty, "\(args): \(r)")
        #expect(!FileManager.default.fileExists(atPath: box.log), "a usage error wrote nothing")
    }

    @Test func nothingToSendIsAUsageError() throws {
        let box = Sandbox()
        let r = try box.outbox(["send", "-"], stdin: "")
        #expect(r.code == 2 && r.stderr.contains("nothing to send") && r.oneErrorLine, "\(r)")
    }

    @Test func completionScripts() throws {
        let box = Sandbox()
        let bash = try box.outbox(["completion", "bash"])
        #expect(bash.code == 0 && bash.stdout.contains("complete -F _outbox outbox"), "\(bash)")
        for word in ["--no-wait", "--watch", "--state", "needs-attention", "salvage"] { #expect(bash.stdout.contains(word), "\(word)") }
        // The script is valid bash.
        let script = box.write("outbox.bash", bash.stdout)
        let check = try runProcess("/bin/bash", ["-n", script], stdin: nil, env: box.environment, timeout: 10)
        #expect(check.code == 0, "\(check)")
        // And it completes: `outbox li<TAB>` offers list.
        let probe = box.write("probe.bash", "source \(script)\nCOMP_WORDS=(outbox li); COMP_CWORD=1; _outbox; echo \"${COMPREPLY[@]}\"\nCOMP_WORDS=(outbox list --st); COMP_CWORD=2; _outbox; echo \"${COMPREPLY[@]}\"\n")
        let out = try runProcess("/bin/bash", [probe], stdin: nil, env: box.environment, timeout: 10)
        #expect(out.stdout == "list\n--state\n", "\(out)")
        let zsh = try box.outbox(["completion", "zsh"])
        #expect(zsh.code == 0 && zsh.stdout.hasPrefix("#compdef outbox") && zsh.stdout.contains("--no-wait"), "\(zsh)")
    }
}

@Suite("docs/CLI.md matches the binary")
struct DocsTests {
    @Test func everyHelpTextAppearsVerbatimInTheCLIReference() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let doc = try String(contentsOf: root.appendingPathComponent("docs/CLI.md"), encoding: .utf8)
        let box = Sandbox()
        let overview = try box.outbox(["--help"]).stdout
        #expect(doc.contains(overview), "docs/CLI.md lacks the current `outbox --help`")
        for cmd in ["chat", "send", "status", "list", "show", "log", "conversations", "retry", "cancel", "drain",
                    "verify", "gc", "reset", "salvage", "demo", "help", "completion"] {
            let help = try box.outbox(["help", cmd]).stdout
            #expect(doc.contains("### outbox \(cmd)\n\n```\n" + help + "```"), "docs/CLI.md lacks the current `outbox help \(cmd)`")
        }
    }
}
