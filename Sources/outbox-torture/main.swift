// outbox-torture: kill -9 torture of real outbox and outbox-engine processes.
//   outbox-torture [--kills N] [--seconds S] [--lanes L] [--dir DIR]
// Exits 0 when nothing was lost, duplicated, reordered or falsely sealed; 1 otherwise; 2 on usage.
import Foundation
import OutboxTorture

let args = Array(CommandLine.arguments.dropFirst())
let here = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0])
    .deletingLastPathComponent()
var options = TortureOptions(outboxExecutable: here.appendingPathComponent("outbox").path,
                             engineExecutable: here.appendingPathComponent("outbox-engine").path)
func usage(_ message: String) -> Never {
    FileHandle.standardError.write(Data("outbox-torture: \(message)\nusage: outbox-torture [--kills N] [--seconds S] [--lanes L] [--dir DIR]\n".utf8))
    exit(2)
}
var i = 0
while i < args.count {
    let flag = args[i]
    guard i + 1 < args.count else { usage(flag == "--help" || flag == "-h" ? "kill -9 torture of outbox and outbox-engine" : "\(flag) needs a value") }
    let value = args[i + 1]
    switch flag {
    case "--kills": guard let n = Int(value), n > 0 else { usage("--kills takes a positive number") }; options.kills = n
    case "--seconds": guard let s = Double(value), s > 0 else { usage("--seconds takes a positive number") }; options.seconds = s; if !args.contains("--kills") { options.kills = .max }
    case "--lanes": guard let n = Int(value), n > 0, n <= 32 else { usage("--lanes takes 1…32") }; options.lanes = n
    case "--dir": options.directory = value
    default: usage("unknown option \(flag)")
    }
    i += 2
}
for exe in [options.outboxExecutable, options.engineExecutable] where !FileManager.default.isExecutableFile(atPath: exe) {
    FileHandle.standardError.write(Data("outbox-torture: \(exe) not found; build the package first (swift build)\n".utf8))
    exit(1)
}
do {
    let result = try Torture(options) { FileHandle.standardError.write(Data(($0 + "\n").utf8)) }.run()
    let kinds = result.killsByKind.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
    FileHandle.standardError.write(Data("torture: kills by kind: \(kinds); \(String(format: "%.1f", result.seconds)) s\n".utf8))
    for id in result.lost.prefix(10) { FileHandle.standardError.write(Data("torture: lost \(id)\n".utf8)) }
    for t in result.duplicated.prefix(10) { FileHandle.standardError.write(Data("torture: duplicated \"\(t)\"\n".utf8)) }
    print(result.line)
    exit(result.passed ? 0 : 1)
} catch {
    FileHandle.standardError.write(Data("outbox-torture: \(error)\n".utf8))
    exit(1)
}
