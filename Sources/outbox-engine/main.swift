// outbox-engine: parse arguments, resolve the token, run the engine until SIGINT/SIGTERM.
import Foundation
import OutboxEngine
import OutboxIO

func say(_ text: String, error: Bool = false) {
    let handle = error ? FileHandle.standardError : FileHandle.standardOutput
    try? handle.write(contentsOf: Data((text + "\n").utf8))
}

let environment = ProcessInfo.processInfo.environment
let options: EngineCommandLine
do {
    options = try EngineCommandLine.parse(Array(CommandLine.arguments.dropFirst()), environment: environment)
} catch {
    say("outbox-engine: \(error)\n\n\(EngineCommandLine.usage)", error: true)
    exit(2)
}
if options.help {
    say(EngineCommandLine.usage)
    exit(0)
}

// Block SIGINT/SIGTERM before any thread starts so only the waiter below receives them.
let waitForTermination = Signals.blockTermination()

let engine: EngineServer
let port: UInt16
do {
    let (token, source) = try options.resolveToken(environment: environment)
    switch source {
    case .generated(let path): say("outbox-engine generated a token and stored it (mode 0600) in \(path)")
    case .stored(let path): say("outbox-engine token: \(path)")
    case .file(let path): say("outbox-engine token: \(path)")
    case .environment: say("outbox-engine token: OUTBOX_ENGINE_TOKEN")
    }
    var configuration = options.configuration(token: token)
    // Testing only: hold each new turn in its commit window so a test can observe 409.
    if let ms = environment["OUTBOX_ENGINE_TEST_COMMIT_DELAY_MS"].flatMap(Int.init) {
        configuration.commitDelayForTesting = .milliseconds(ms)
    }
    engine = try EngineServer(configuration)
    port = try engine.start()
} catch {
    say("outbox-engine: cannot start: \(error)", error: true)
    exit(1)
}
say("outbox-engine listening on \(options.host):\(port)")

let signalName = waitForTermination()
say("outbox-engine: \(signalName) received, stopping")
engine.stop()
say("outbox-engine: stopped")
exit(0)
