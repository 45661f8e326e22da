import OutboxStore

/// The documented exit codes.
public enum ExitCode: Int32, Sendable {
    case ok = 0
    case failure = 1
    case usage = 2
    case sealed = 3
}

/// An error the CLI reports as one line on stderr, with the exit code it implies.
struct CLIError: Error, CustomStringConvertible {
    var code: ExitCode
    var message: String
    var description: String { message }

    static func usage(_ message: String) -> CLIError { CLIError(code: .usage, message: message) }
    static func failure(_ message: String) -> CLIError { CLIError(code: .failure, message: message) }

    /// Any error, as the line and exit code a person gets.
    static func from(_ error: any Error) -> CLIError {
        if let e = error as? CLIError { return e }
        if let e = error as? StoreError {
            switch e {
            case .sealed: return CLIError(code: .sealed, message: e.description)
            default: return CLIError(code: .failure, message: e.description)
            }
        }
        return CLIError(code: .failure, message: String(describing: error))
    }

    /// One line: newlines inside a message become "; ".
    var oneLine: String {
        message.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }.joined(separator: "; ")
    }
}
