#if canImport(Glibc)
@preconcurrency import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where the CLI writes, and what it may do there: colour and redraws only on a terminal that
/// is not `TERM=dumb`, and colour never when `NO_COLOR` is set (https://no-color.org).
public final class Terminal: @unchecked Sendable {
    public let stdoutIsTTY: Bool
    public let stderrIsTTY: Bool
    public let stdinIsTTY: Bool
    /// Colour on stdout/stderr is allowed.
    public let color: Bool
    private var brokenPipe = false

    public init(environment: [String: String]) {
        let dumb = environment["TERM"] == "dumb"
        stdoutIsTTY = !dumb && isatty(1) == 1
        stderrIsTTY = !dumb && isatty(2) == 1
        stdinIsTTY = isatty(0) == 1
        let noColor = environment["NO_COLOR"].map { !$0.isEmpty } ?? false
        color = stdoutIsTTY && !noColor
    }

    /// Terminal width; a pty may report 0 columns, so fall back to 80.
    public var columns: Int {
        var ws = winsize()
        if ioctl(1, UInt(TIOCGWINSZ), &ws) == 0, ws.ws_col > 0 { return Int(ws.ws_col) }
        if ioctl(2, UInt(TIOCGWINSZ), &ws) == 0, ws.ws_col > 0 { return Int(ws.ws_col) }
        return 80
    }

    /// A line on stdout.
    public func out(_ line: String) { write(1, line + "\n") }
    /// A line on stderr.
    public func err(_ line: String) { write(2, line + "\n") }
    public func outRaw(_ text: String) { write(1, text) }
    public func errRaw(_ text: String) { write(2, text) }

    /// Writes every byte, retrying short writes and EINTR. A closed pipe (`outbox list | head`)
    /// stops output quietly: the reader has what it wanted.
    public func write(_ fd: Int32, _ text: String) {
        if brokenPipe && fd == 1 { return }
        var bytes = Array(text.utf8)
        var done = 0
        let total = bytes.count
        bytes.withUnsafeMutableBytes { buf in
            while done < total {
                let n = Glibc.write(fd, buf.baseAddress! + done, total - done)
                if n < 0 {
                    if errno == EINTR { continue }
                    if errno == EPIPE && fd == 1 { brokenPipe = true }
                    return
                }
                done += n
            }
        }
    }

    // MARK: - styling

    public enum Style: String { case bold = "1", dim = "2", red = "31", green = "32", yellow = "33", cyan = "36" }

    /// `text` in a style when colour is allowed, else as is.
    public func styled(_ text: String, _ style: Style) -> String {
        color ? "\u{1B}[\(style.rawValue)m\(text)\u{1B}[0m" : text
    }
}

/// Ignores SIGPIPE so a closed pipe is an EPIPE we handle, not a silent death.
func ignoreSIGPIPE() {
    signal(SIGPIPE, SIG_IGN)
}

/// Reads stdin to its end, keeping at most `limit` bytes of it (plus a line ending or two):
/// an oversized message is measured, not held. `size` is the length without the trailing line
/// endings, as the message would be sent.
func readStandardInput(keepingAtMost limit: Int) -> (bytes: [UInt8], total: Int, size: Int) {
    var kept: [UInt8] = []
    var total = 0
    var trailingNewlines = 0
    var buf = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = buf.withUnsafeMutableBytes { read(0, $0.baseAddress, 65536) }
        if n < 0 { if errno == EINTR { continue }; break }
        if n == 0 { break }
        total += n
        if kept.count <= limit + 2 { kept.append(contentsOf: buf[0..<min(n, limit + 3 - kept.count)]) }
        var run = 0
        while run < n, buf[n - 1 - run] == 10 || buf[n - 1 - run] == 13 { run += 1 }
        trailingNewlines = run == n ? trailingNewlines + n : run
    }
    return (kept, total, total - trailingNewlines)
}
