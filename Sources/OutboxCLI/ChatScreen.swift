import Foundation
#if canImport(Glibc)
@preconcurrency import Glibc
#endif

/// The chat's terminal. On a terminal (stdin and stdout both TTYs, TERM not dumb): raw-mode
/// input with a small line editor, one live status line above the prompt, and transcript lines
/// printed above both. Otherwise plain lines in and out: no redraw, no escape codes.
final class ChatScreen: @unchecked Sendable {
    let term: Terminal
    let interactive: Bool
    private let lock = NSLock()
    private var input = ""
    private var pendingUTF8: [UInt8] = []
    private var status = ""
    private var lastPlainStatus = ""
    private var saved = termios()
    private var rawMode = false
    let prompt = "› "

    init(term: Terminal) {
        self.term = term
        interactive = term.stdinIsTTY && term.stdoutIsTTY
    }

    // MARK: - drawing

    /// Starts the screen: raw mode, a status line and the prompt.
    func begin() {
        guard interactive else { return }
        lock.withLock {
            if tcgetattr(0, &saved) == 0 {
                var raw = saved
                raw.c_lflag &= ~tcflag_t(ICANON | ECHO | ISIG | IEXTEN)
                raw.c_iflag &= ~tcflag_t(IXON | ICRNL)
                withUnsafeMutableBytes(of: &raw.c_cc) { cc in
                    cc[Int(VMIN)] = 1; cc[Int(VTIME)] = 0
                }
                rawMode = tcsetattr(0, TCSANOW, &raw) == 0   // keep what was typed ahead
            }
            term.outRaw("\n" + promptLine())
        }
    }

    /// Restores the terminal and clears the status line.
    func end() {
        guard interactive else { return }
        lock.withLock {
            term.outRaw("\r\u{1B}[1A\u{1B}[J")
            restoreLocked()
        }
    }

    /// Puts the terminal back (also from a signal handler's queue).
    func restore() { lock.withLock { restoreLocked() } }

    private func restoreLocked() {
        if rawMode { tcsetattr(0, TCSAFLUSH, &saved); rawMode = false }
    }

    private func promptLine() -> String {
        let width = max(10, term.columns - 1)
        let room = width - prompt.count
        let shown = input.count > room ? "…" + String(input.suffix(room - 1)) : input
        return term.styled(prompt, .bold) + shown
    }

    private func statusLine() -> String {
        term.styled(Render.clip(status, max(10, term.columns - 1)), .dim)
    }

    /// Prints transcript lines above the status line (or as plain lines).
    func print(_ lines: [String]) {
        lock.withLock {
            if interactive {
                term.outRaw("\r\u{1B}[1A\u{1B}[J" + lines.joined(separator: "\n") + "\n" + statusLine() + "\n" + promptLine())
            } else {
                for l in lines { term.out(l) }
            }
        }
    }

    func print(_ line: String) { print([line]) }

    /// Sets the live status. On a terminal it is redrawn in place; piped, a changed status is
    /// printed once as a plain line (`plain` is the version without animation).
    func setStatus(_ text: String, plain: String) {
        lock.withLock {
            if interactive {
                guard text != status else { return }
                status = text
                term.outRaw("\r\u{1B}[1A\r\u{1B}[2K" + statusLine() + "\n\r\u{1B}[2K" + promptLine())
            } else if plain != lastPlainStatus {
                lastPlainStatus = plain
                if !plain.isEmpty { term.out("… " + plain) }
            }
        }
    }

    private func redrawPromptLocked() {
        term.outRaw("\r\u{1B}[2K" + promptLine())
    }

    // MARK: - input

    enum Input { case line(String), eof }

    /// The next line the person submits. Piped: the next line of stdin.
    func readLine() -> Input {
        guard interactive else {
            guard let l = Swift.readLine(strippingNewline: true) else { return .eof }
            return .line(l)
        }
        while true {
            var byte: UInt8 = 0
            let n = Glibc.read(0, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return .eof }
            switch byte {
            case 0x0D, 0x0A:
                let line: String = lock.withLock {
                    let l = input
                    input = ""; pendingUTF8 = []
                    // The line stays on the prompt until the caller has made it durable and
                    // prints it as transcript: only then does the prompt come back empty.
                    return l
                }
                return .line(line)
            case 0x03:  // Ctrl-C: clears the line, or leaves on an empty one
                let empty: Bool = lock.withLock {
                    if input.isEmpty { return true }
                    input = ""; redrawPromptLocked(); return false
                }
                if empty { return .eof }
            case 0x04:  // Ctrl-D on an empty line
                if lock.withLock({ input.isEmpty }) { return .eof }
            case 0x7F, 0x08:
                lock.withLock { if !input.isEmpty { input.removeLast() }; redrawPromptLocked() }
            case 0x15:  // Ctrl-U
                lock.withLock { input = ""; redrawPromptLocked() }
            case 0x17:  // Ctrl-W: delete the last word
                lock.withLock {
                    while input.last == " " { input.removeLast() }
                    while let c = input.last, c != " " { input.removeLast() }
                    redrawPromptLocked()
                }
            case 0x0C:  // Ctrl-L
                lock.withLock { term.outRaw("\u{1B}[H\u{1B}[2J" + statusLine() + "\n" + promptLine()) }
            case 0x1B:
                skipEscapeSequence()
            case 0x09:
                lock.withLock { input.append(" "); redrawPromptLocked() }
            case 0x00..<0x20:
                continue
            default:
                lock.withLock {
                    pendingUTF8.append(byte)
                    if let s = String(validating: pendingUTF8, as: UTF8.self) {
                        input += s; pendingUTF8 = []
                        redrawPromptLocked()
                    } else if pendingUTF8.count >= 4 {
                        pendingUTF8 = []
                    }
                }
            }
        }
    }

    /// Arrow keys and the like arrive as ESC [ … final-byte; they are ignored.
    private func skipEscapeSequence() {
        var b: UInt8 = 0
        guard Glibc.read(0, &b, 1) == 1 else { return }
        guard b == UInt8(ascii: "[") || b == UInt8(ascii: "O") else { return }
        while Glibc.read(0, &b, 1) == 1 {
            if b >= 0x40 && b <= 0x7E { return }
        }
    }
}
