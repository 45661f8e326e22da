import Foundation
import OutboxFormat
import OutboxStore

enum SendCommand {
    static let spec = CommandSpec(name: "send", flags: ["--continue", "--new", "--no-wait", "--json"],
                                  options: ["--cid", "--title", "--attach"], repeatable: ["--attach"],
                                  aliases: ["-c": "--continue", "-a": "--attach"], maxPositionals: nil, positionalName: "TEXT")
    static let command = Command(spec: spec, summary: "enqueue one turn, deliver it and print the reply", help: Usage.send, run: run)

    static func run(_ ctx: Context) throws -> ExitCode {
        let choice = try ConversationChoice.parse(ctx.args, command: "send")
        if !ctx.args.has("--no-wait") { try ctx.requireEngineToken() }
        let text = try messageText(ctx)
        let attachments = try ctx.args.values("--attach").map { try attachmentSource($0, ctx: ctx) }
        // Every refusal comes before anything is written (no empty conversation is left behind).
        try validate(text, attachments: attachments.count)
        let outbox = try ctx.openUnsealed()
        let (conversation, created) = try choice.resolve(outbox, ctx: ctx, firstText: text, attachments: attachments)
        let result = try outbox.enqueue(TurnDraft(requestID: newID(), conversationID: conversation.id, text: text,
                                                  attachments: attachments, surface: ctx.settings.surface))
        if created { ctx.narrate("new conversation \(conversation.id) \"\(conversation.title)\" (origin surface \(conversation.originSurface))") }

        if ctx.args.has("--no-wait") {
            if ctx.json {
                ctx.printJSON(sendJSON(result.turn, conversation: conversation, created: created, delivery: nil))
            } else {
                ctx.term.out(result.turn.id)
                ctx.narrate("queued: durable in \(ctx.paths.log); `outbox drain` (or the next send or chat) delivers it")
            }
            return .ok
        }
        let outcome = Delivery.deliver(turn: result.turn.id, outbox: outbox, ctx: ctx)
        defer { outcome.connection?.close() }
        let turn = outbox.turn(result.turn.id) ?? result.turn
        if ctx.json {
            ctx.printJSON(sendJSON(turn, conversation: conversation, created: created, delivery: outcome))
            return .ok
        }
        if let reply = turn.reply {
            if reply.status == "answered" {
                ctx.term.out(reply.text ?? "")
            } else {
                ctx.term.err("outbox: the engine could not answer turn \(turn.id): \(reply.error ?? reply.status)")
                return .failure
            }
        } else if turn.state == .failedNeedsAttention {
            ctx.term.err("outbox: " + outcome.sentence(turn: turn))
            return .failure
        } else {
            ctx.narrate(outcome.sentence(turn: turn))
        }
        return .ok
    }

    static func sendJSON(_ t: Turn, conversation c: OutboxStore.Conversation, created: Bool, delivery: Delivery.Outcome?) -> JSONValue {
        var o: JSONObject = [
            "id": .string(t.id), "conversation": .string(t.conversationID), "state": .string(t.state.rawValue),
            "surface": .string(t.surface), "createdAt": .string(t.createdAt), "attempt": .int(Int64(t.attempt)),
            "attachments": .array(t.attachments.map { .object(["sha256": .string($0.sha256), "name": .string($0.name),
                                                                "size": .int($0.size), "type": .string($0.type)]) }),
        ]
        o["newConversation"] = created
            ? .object(["id": .string(c.id), "title": .string(c.title), "originSurface": .string(c.originSurface)]) : .null
        o["lastError"] = .optional(t.lastError)
        o["nextAttemptAt"] = .optional(t.nextAttemptAt)
        if let delivery { o["delivery"] = delivery.json }
        if let r = t.reply {
            o["reply"] = .optional(r.text)
            o["replyStatus"] = .string(r.status)
            if let e = r.error { o["replyError"] = .string(e) }
        }
        return .object(o)
    }

    /// The message limits, checked before anything is written (exit 2, nothing queued).
    static func validate(_ text: String, attachments: Int) throws {
        let size = text.utf8.count
        if size > Outbox.maxTextBytes { throw tooLong(size) }
        if attachments == 0 && text.unicodeScalars.allSatisfy({ $0.properties.isWhitespace }) {
            throw CLIError.usage(text.isEmpty
                ? "nothing to send: give TEXT, `-` to read stdin, or -a FILE (see `outbox help send`)"
                : "nothing to send: the message is only whitespace; give TEXT or -a FILE (nothing was queued)")
        }
    }

    static func tooLong(_ size: Int) -> CLIError {
        CLIError.usage("message is \(size) bytes; the limit is \(Outbox.maxTextBytes) bytes — send long documents as attachments with -a FILE (nothing was queued)")
    }

    /// TEXT words joined by spaces; `-`, or no TEXT with piped stdin, reads stdin.
    static func messageText(_ ctx: Context) throws -> String {
        let words = ctx.args.positionals
        if words == ["-"] || (words.isEmpty && !ctx.term.stdinIsTTY && ctx.args.values("--attach").isEmpty) {
            let input = readStandardInput(keepingAtMost: Outbox.maxTextBytes)
            if input.size > Outbox.maxTextBytes { throw tooLong(input.size) }
            if input.total == 0 {
                throw CLIError.usage("nothing to send: the input on stdin was empty (give TEXT, pipe a message, or -a FILE)")
            }
            guard let s = String(validating: input.bytes, as: UTF8.self) else {
                throw CLIError.failure("stdin is not UTF-8 text; send binary data as an attachment with -a FILE (nothing was queued)")
            }
            var t = s
            while t.hasSuffix("\n") || t.hasSuffix("\r") { t.removeLast() }
            return t
        }
        if words.contains("-") { throw CLIError.usage("`-` (read stdin) must be the only TEXT argument") }
        return words.joined(separator: " ")
    }

    static func attachmentSource(_ path: String, ctx: Context) throws -> AttachmentSource {
        let p = expandTilde(path, home: ctx.settings.environment["HOME"] ?? NSHomeDirectory())
        var isDir: ObjCBool = false
        guard FileManager.default.fileExists(atPath: p, isDirectory: &isDir) else {
            throw CLIError.failure("attachment \(path) does not exist (nothing was queued)")
        }
        if isDir.boolValue { throw CLIError.failure("attachment \(path) is a directory; attach files (nothing was queued)") }
        guard FileManager.default.isReadableFile(atPath: p) else {
            throw CLIError.failure("attachment \(path) cannot be read (permission denied; nothing was queued)")
        }
        return AttachmentSource(file: p)
    }
}

/// A fresh client-minted id.
func newID() -> String { UUID().uuidString.lowercased() }

/// Which conversation a send or chat goes to: `-c`, `--cid ID`, or a new one (the default).
enum ConversationChoice {
    case new(title: String?)
    case mostRecent
    case id(String)

    static func parse(_ a: ParsedArgs, command: String) throws -> ConversationChoice {
        let picked = [a.has("--continue"), a.value("--cid") != nil, a.has("--new")].filter { $0 }.count
        if picked > 1 { throw CLIError.usage("choose one of -c, --cid ID and --new (see `outbox help \(command)`)") }
        if let title = a.value("--title"), a.has("--continue") || a.value("--cid") != nil {
            throw CLIError.usage("--title \"\(title)\" names a new conversation; it cannot be used with -c or --cid")
        }
        if a.has("--continue") { return .mostRecent }
        if let id = a.value("--cid") { return .id(id) }
        return .new(title: a.value("--title"))
    }

    /// The conversation, created (durably) if new.
    func resolve(_ outbox: Outbox, ctx: Context, firstText: String, attachments: [AttachmentSource]) throws -> (OutboxStore.Conversation, Bool) {
        switch self {
        case .mostRecent:
            guard let c = mostRecentConversation(outbox) else {
                throw CLIError.failure("-c continues the most recent conversation, but there is none yet; leave out -c to start one")
            }
            return (c, false)
        case .id(let id):
            return (try ctx.resolveConversation(id, in: outbox), false)
        case .new(let title):
            let t = title ?? defaultTitle(firstText, attachments: attachments)
            let (c, created) = try outbox.createConversation(id: newID(), title: t, originSurface: ctx.settings.surface)
            return (c, created)
        }
    }
}

/// The first words of the first line (at most 8 words, 60 characters).
func defaultTitle(_ text: String, attachments: [AttachmentSource] = []) -> String {
    let firstLine = text.split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
    let words = firstLine.split(whereSeparator: { $0 == " " || $0 == "\t" }).prefix(8).joined(separator: " ")
    if !words.isEmpty { return Render.clip(words, 60) }
    if let a = attachments.first { return a.name }
    return "untitled"
}
