import Foundation
import OutboxFormat
import OutboxStore
import OutboxSync

enum ChatCommand {
    static let spec = CommandSpec(name: "chat", flags: ["--continue", "--new"], options: ["--cid", "--title"],
                                  aliases: ["-c": "--continue"])
    static let command = Command(spec: spec, summary: "interactive chat", help: Usage.chat, run: run)

    static func run(_ ctx: Context) throws -> ExitCode {
        let choice = try ConversationChoice.parse(ctx.args, command: "chat")
        try ctx.requireEngineToken()
        let outbox = try ctx.openUnsealed()
        let screen = ChatScreen(term: ctx.term)
        let session = ChatSession(ctx: ctx, outbox: outbox, screen: screen)
        switch choice {
        case .new(let title): session.newTitle = title
        case .mostRecent, .id: session.conversation = try choice.resolve(outbox, ctx: ctx, firstText: "", attachments: []).0
        }
        return session.run()
    }
}

/// One chat: the input loop on the main thread, a drain on its own thread, and a watcher that
/// turns the log's changes into transcript lines and the status line.
final class ChatSession: @unchecked Sendable {
    let ctx: Context
    let outbox: Outbox
    let screen: ChatScreen
    var conversation: OutboxStore.Conversation?
    var newTitle: String?

    private let lock = NSLock()
    // Guarded by `lock`.
    private var mine: [String] = []                 // turn ids sent in this session, in order
    private var printed: Set<String> = []           // turns whose outcome was printed
    private var since: [String: (TurnState, Int64)] = [:]
    private var engineDown: (error: String, nextAt: String?)?
    private var otherDrain = false
    private var connectionError: String?
    private var staged: [AttachmentSource] = []
    private var running = true

    private var drainStop: DrainStop?
    private var drainDone: DispatchSemaphore?
    private var connection: EngineConnection?

    init(ctx: Context, outbox: Outbox, screen: ChatScreen) {
        self.ctx = ctx; self.outbox = outbox; self.screen = screen
    }

    func run() -> ExitCode {
        let term = ctx.term
        if let c = conversation {
            screen.print(term.styled("continuing \"\(c.title)\" (\(c.id))", .bold))
            for t in outbox.turns.filter({ $0.conversationID == c.id }).suffix(3) {
                screen.print(transcript(t, includeYou: true))
                lock.withLock { _ = printed.insert(t.id) }
            }
        } else {
            screen.print(term.styled("new conversation", .bold) + (screen.interactive ? term.styled(" — type a message; /attach FILE, /retry, /status, /quit", .dim) : ""))
        }
        installSignalHandlers()
        screen.begin()
        startDrain()
        let watcher = Thread { [self] in watchLoop() }
        watcher.start()

        loop: while true {
            switch screen.readLine() {
            case .eof: break loop
            case .line(let raw):
                let line = raw.trimmingCharacters(in: .whitespaces)
                if line.isEmpty { continue }
                if line.hasPrefix("/") && !line.hasPrefix("//") {
                    if !slashCommand(line) { break loop }
                    continue
                }
                send(line.hasPrefix("//") ? String(line.dropFirst()) : line)
            }
        }
        if !screen.interactive { waitForReplies(seconds: 15) }
        lock.withLock { running = false }
        stopDrain()
        refreshView()
        screen.end()
        farewell()
        return .ok
    }

    // MARK: - sending

    private func send(_ text: String) {
        let attachments = lock.withLock { let a = staged; staged = []; return a }
        do {
            if conversation == nil {
                let title = newTitle ?? defaultTitle(text, attachments: attachments)
                let (c, _) = try outbox.createConversation(id: newID(), title: title, originSurface: ctx.settings.surface)
                conversation = c
                screen.print(ctx.term.styled("conversation \(c.id) \"\(c.title)\" (origin surface \(c.originSurface))", .dim))
            }
            let r = try outbox.enqueue(TurnDraft(requestID: newID(), conversationID: conversation!.id, text: text,
                                                 attachments: attachments, surface: ctx.settings.surface))
            // Durable now: only then does the line join the transcript and the prompt return.
            lock.withLock {
                mine.append(r.turn.id)
                since[r.turn.id] = (.queued, Render.nowMillis())
            }
            var line = ctx.term.styled("you>", .cyan) + " " + text
            for a in r.turn.attachments { line += " [\(a.name)]" }
            screen.print(line)
            refreshView()
        } catch {
            let e = CLIError.from(error)
            screen.print([ctx.term.styled("you>", .cyan) + " " + text,
                          ctx.term.styled("not sent: \(e.oneLine)", .red) + " (nothing was queued)"])
        }
    }

    /// Returns false to leave.
    private func slashCommand(_ line: String) -> Bool {
        let parts = line.split(separator: " ", maxSplits: 1).map(String.init)
        let arg = parts.count > 1 ? parts[1].trimmingCharacters(in: .whitespaces) : ""
        switch parts[0] {
        case "/quit", "/exit", "/q":
            return false
        case "/attach":
            guard !arg.isEmpty else { screen.print("usage: /attach FILE"); return true }
            do {
                let a = try SendCommand.attachmentSource(arg, ctx: ctx)
                let size = (try? FileManager.default.attributesOfItem(atPath: { if case .file(let p) = a.content { return p }; return arg }())[.size] as? NSNumber)?.int64Value ?? 0
                lock.withLock { staged.append(a) }
                screen.print(ctx.term.styled("attached \(a.name) (\(size) bytes, \(a.type)) to your next message", .dim))
            } catch {
                screen.print(ctx.term.styled(CLIError.from(error).oneLine, .red))
            }
        case "/retry":
            do {
                try outbox.refresh()
                let ids = outbox.turns.filter { $0.state == .failedNeedsAttention || ($0.state == .queued && ($0.nextAttemptAt != nil || $0.attempt > 0)) }.map(\.id)
                if ids.isEmpty {
                    screen.print("nothing to retry")
                } else {
                    try outbox.apply(ids.map { .retry($0) })
                    lock.withLock { for id in ids { printed.remove(id) } }
                    screen.print("retrying \(Render.count(ids.count, "turn")) now")
                    stopDrain()
                    lock.withLock { engineDown = nil }
                    startDrain()
                }
            } catch {
                screen.print(ctx.term.styled("retry failed: \(CLIError.from(error).oneLine)", .red))
            }
        case "/status":
            try? outbox.refresh()
            let turns = outbox.turns
            var counts: [TurnState: Int] = [:]
            for t in turns { counts[t.state, default: 0] += 1 }
            var s = "\(counts[.queued] ?? 0) queued, \(counts[.syncing] ?? 0) sending, "
            s += "\(turns.filter { $0.state == .synced && $0.reply == nil }.count) awaiting a reply, "
            s += "\(counts[.failedNeedsAttention] ?? 0) need attention; engine: "
            s += lock.withLock { () -> String in
                if otherDrain { return "delivered by another running drain" }
                if let e = connectionError { return "cannot start: \(e)" }
                if let d = engineDown { return "unreachable (\(d.error))" + (d.nextAt.map { ", next try \(Render.until($0))" } ?? "") }
                return connection.map { $0.url + ($0.embedded ? " (embedded)" : "") } ?? "?"
            }
            screen.print(s)
        case "/help":
            screen.print("/attach FILE  attach a file to the next message · /retry  retry failed turns now · /status  the queue · /quit  leave · //text  send a line starting with /")
        default:
            screen.print("unknown command \(parts[0]); try /attach FILE, /retry, /status, /quit (start a message with // to send a leading /)")
        }
        return true
    }

    // MARK: - delivery

    private func startDrain() {
        let stop = DrainStop()
        let done = DispatchSemaphore(value: 0)
        drainStop = stop; drainDone = done
        if connection == nil {
            do { connection = try EngineConnection.open(ctx.settings) } catch {
                lock.withLock { connectionError = CLIError.from(error).oneLine }
                done.signal()
                return
            }
        }
        let drain = Drain(outbox: outbox, client: connection!.client(), options: Drain.Options(),
                          onEvent: { [weak self] e in self?.event(e) })
        let t = Thread { [self] in
            do {
                _ = try drain.watch(stop: stop)
            } catch DrainError.alreadyRunning {
                lock.withLock { otherDrain = true }
            } catch {
                let e = CLIError.from(error)
                screen.print(ctx.term.styled("delivery stopped: \(e.oneLine)", .red))
            }
            done.signal()
        }
        t.start()
    }

    private func stopDrain() {
        drainStop?.request()
        _ = drainDone?.wait(timeout: .now() + 5)
        drainStop = nil; drainDone = nil
    }

    private func event(_ e: DrainEvent) {
        lock.withLock {
            switch e {
            case .engineUnreachable(let error, let next): engineDown = (Delivery.shortEngineError(error), next)
            case .failed(_, let error, let next) where error.contains("engine unreachable"):
                engineDown = (Delivery.shortEngineError(error), next)
            case .engineReachable, .delivered: engineDown = nil
            default: break
            }
        }
        refreshView()
    }

    // MARK: - watching the log

    private func watchLoop() {
        while lock.withLock({ running }) {
            refreshView()
            usleep(150_000)
        }
    }

    /// Prints outcomes that appeared in the log and redraws the status line.
    private func refreshView() {
        try? outbox.refresh()
        let now = Render.nowMillis()
        let ids = lock.withLock { mine }
        var lines: [String] = []
        var phases: [(TurnState, Int64, Turn)] = []
        for id in ids {
            guard let t = outbox.turn(id) else { continue }
            if t.reply != nil || t.state == .failedNeedsAttention || t.state == .cancelled {
                // Several threads refresh the view: the first to claim the outcome prints it.
                if lock.withLock({ printed.insert(id).inserted }) { lines.append(transcript(t, includeYou: false)) }
                continue
            }
            let alreadyPrinted = lock.withLock { printed.contains(id) }
            if alreadyPrinted || !(t.isPending || (t.state == .synced && t.reply == nil)) { continue }
            let start: Int64 = lock.withLock {
                if let s = since[id], s.0 == t.state { return s.1 }
                since[id] = (t.state, now); return now
            }
            phases.append((t.state, start, t))
        }
        if !lines.isEmpty { screen.print(lines) }
        let (live, plain) = statusText(phases, now: now)
        screen.setStatus(live, plain: plain)
    }

    private func statusText(_ phases: [(TurnState, Int64, Turn)], now: Int64) -> (String, String) {
        let (down, other, connErr) = lock.withLock { (engineDown, otherDrain, connectionError) }
        guard !phases.isEmpty else { return ("", "") }
        let dots = String(repeating: ".", count: Int((now / 400) % 4))
        let padded = dots + String(repeating: " ", count: 3 - dots.count)
        func secs(_ start: Int64) -> String { now - start >= 3000 ? " \((now - start) / 1000)s" : "" }
        let queued = phases.filter { $0.0 == .queued }
        if let sending = phases.first(where: { $0.0 == .syncing }) {
            return ("sending" + padded + secs(sending.1) + extra(queued.count - 0), "sending")
        }
        if let thinking = phases.first(where: { $0.0 == .synced }) {
            return ("thinking" + padded + secs(thinking.1) + extra(queued.count), "thinking")
        }
        let n = queued.count
        var why = ""
        if let connErr { why = " · engine cannot start: \(connErr)" }
        else if let down {
            why = " · engine unreachable (\(down.error))"
            let next = down.nextAt ?? queued.compactMap { $0.2.nextAttemptAt }.min()
            if let next { why += " · next attempt " + Render.until(next, now: now) }
        } else if other { why = " · another drain delivers it" }
        else if let next = queued.compactMap({ $0.2.nextAttemptAt }).min(), (Timestamp.parse(next) ?? 0) > now {
            why = " · next attempt " + Render.until(next, now: now)
        }
        let plainWhy = down.map { " · engine unreachable (\($0.error)); your turns are safe and will be sent when it is back" } ?? ""
        return ("\(n) queued" + (down == nil && connErr == nil ? padded : "") + why, "\(n) queued\(plainWhy)")
    }

    private func extra(_ queued: Int) -> String { queued > 0 ? " · \(queued) queued" : "" }

    private func transcript(_ t: Turn, includeYou: Bool) -> String {
        let term = ctx.term
        var out: [String] = []
        if includeYou { out.append(term.styled("you>", .cyan) + " " + t.text) }
        if let r = t.reply {
            out.append(r.status == "answered" ? term.styled("engine>", .green) + " " + (r.text ?? "")
                       : term.styled("engine> (\(r.status): \(r.error ?? "no reply"))", .yellow))
        } else if t.state == .failedNeedsAttention {
            out.append(term.styled("! needs attention: \(t.lastError.map(Delivery.peopleWords) ?? "unknown") — /retry once fixed", .yellow))
        } else if t.state == .cancelled {
            out.append(term.styled("(cancelled)", .dim))
        } else if includeYou && t.isPending {
            out.append(term.styled("(queued)", .dim))
        }
        return out.joined(separator: "\n")
    }

    // MARK: - leaving

    private func waitForReplies(seconds: Int) {
        let deadline = Render.nowMillis() + Int64(seconds) * 1000
        while Render.nowMillis() < deadline {
            refreshView()
            let (ids, down, other) = lock.withLock { (mine, engineDown, connectionError) }
            if down != nil || other != nil { return }
            let open = ids.compactMap { outbox.turn($0) }.filter { $0.isPending || ($0.state == .synced && $0.reply == nil) }
            if open.isEmpty { return }
            if open.allSatisfy({ $0.state == .queued && $0.lastError != nil }) { return }
            usleep(100_000)
        }
    }

    private func farewell() {
        try? outbox.refresh()
        let pending = outbox.turns.filter(\.isPending)
        let waiting = outbox.turns.filter { $0.state == .synced && $0.reply == nil }
        let attention = outbox.turns.filter { $0.state == .failedNeedsAttention }
        let term = ctx.term
        if pending.isEmpty && waiting.isEmpty && attention.isEmpty {
            term.out("all turns delivered")
            return
        }
        if !pending.isEmpty {
            term.out("\(Render.count(pending.count, "turn")) still queued, safe in \(ctx.paths.log); they will be sent by `outbox drain` (or a running `outbox drain --watch`), or the next `outbox send` or `outbox chat`")
        }
        if !waiting.isEmpty { term.out("\(Render.count(waiting.count, "turn")) delivered and awaiting \(Render.verb(waiting.count, "a reply", "replies")); `outbox drain` records \(Render.verb(waiting.count, "it", "them")) and `outbox log` shows it") }
        if !attention.isEmpty { term.out("\(Render.count(attention.count, "turn")) \(Render.verb(attention.count, "needs", "need")) attention: `outbox list --state needs-attention`, then `outbox retry ID`") }
    }

    private var signalSources: [DispatchSourceSignal] = []

    /// SIGTERM/SIGHUP/SIGINT: put the terminal back and leave; every line typed is already durable.
    private func installSignalHandlers() {
        for s in [SIGTERM, SIGHUP, SIGINT] {
            signal(s, SIG_IGN)
            let src = DispatchSource.makeSignalSource(signal: s, queue: .global())
            src.setEventHandler { [screen, ctx] in
                screen.end()
                ctx.term.err("outbox: chat stopped by a signal; every line you sent is saved in the outbox")
                exit(1)
            }
            src.resume()
            signalSources.append(src)
        }
    }
}
