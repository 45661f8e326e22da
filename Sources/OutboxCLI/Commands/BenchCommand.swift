import Foundation
import OutboxBench

enum BenchCommand {
    static let command = Command(spec: CommandSpec(name: "bench", flags: ["--quick", "--json"]),
                                 summary: "measure enqueue, group commit, open and drain against the disk's floor",
                                 help: Usage.bench, run: run)

    static func run(_ ctx: Context) throws -> ExitCode {
        var options = BenchOptions(executable: selfExecutable())
        options.quick = ctx.args.has("--quick")
        options.json = ctx.json
        // Measure the filesystem the outbox lives on: a temporary directory beside it, removed after.
        let beside = parentDirectoryOf(ctx.settings.directory)
        do {
            try FileManager.default.createDirectory(atPath: beside, withIntermediateDirectories: true)
        } catch {
            throw CLIError.failure("cannot create \(beside) to measure in: \(error.localizedDescription)")
        }
        options.directory = beside
        let term = ctx.term
        let report = try Bench.run(options) { step in if !options.json { term.err("bench: \(step)…") } }
        term.out(options.json ? report.json().trimmingCharacters(in: .newlines) : report.table().trimmingCharacters(in: .newlines))
        return .ok
    }

    static func parentDirectoryOf(_ path: String) -> String {
        let url = URL(fileURLWithPath: path)
        return url.deletingLastPathComponent().path
    }

    /// This binary, started again as a worker for the process and memory figures.
    static func selfExecutable() -> String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }
}
