// swift-tools-version:6.0
// outbox: a crash-safe offline outbox for chat turns. No third-party packages, by design.
import PackageDescription

let package = Package(
    name: "outbox",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "outbox", targets: ["outbox"]),
        .executable(name: "outbox-engine", targets: ["outbox-engine"]),
        .library(name: "OutboxStore", targets: ["OutboxStore"]),
        .library(name: "OutboxSync", targets: ["OutboxSync"]),
        .library(name: "OutboxEngine", targets: ["OutboxEngine"]),
    ],
    dependencies: [],
    targets: [
        // The only module that calls Glibc for files and sockets.
        .target(name: "OutboxIO"),
        // Pure: JSON, checksums, records, the log scanner. No I/O.
        .target(name: "OutboxFormat"),
        // The outbox directory: journal, blobs, state fold, seal/reset/salvage, compaction.
        .target(name: "OutboxStore", dependencies: ["OutboxIO", "OutboxFormat"]),
        // Pure: HTTP/1.1 over bytes: request parsing and response encoding (the engine's side),
        // response parsing (the client's side).
        .target(name: "HTTPWire"),
        // Wire types shared by the engine and its clients.
        .target(name: "EngineProtocol"),
        // The reference engine: socket server, routes, durable state, responders.
        .target(name: "OutboxEngine", dependencies: ["HTTPWire", "EngineProtocol", "OutboxStore", "OutboxIO", "OutboxFormat"]),
        // Engine client (and its transports) and the drain.
        .target(name: "OutboxSync", dependencies: ["EngineProtocol", "HTTPWire", "OutboxStore", "OutboxIO", "OutboxFormat"]),
        // `outbox bench`: figures measured in one run against the floor of the same disk.
        .target(name: "OutboxBench", dependencies: ["OutboxStore", "OutboxSync", "OutboxEngine", "EngineProtocol", "OutboxIO", "OutboxFormat"]),
        // Command implementations and rendering; the executable only forwards argv.
        .target(name: "OutboxCLI", dependencies: ["OutboxBench", "OutboxStore", "OutboxSync", "OutboxEngine", "EngineProtocol", "OutboxIO", "OutboxFormat"]),
        .executableTarget(name: "outbox", dependencies: ["OutboxCLI"]),
        .executableTarget(name: "outbox-engine", dependencies: ["OutboxEngine"]),
        // Kill -9 torture of real outbox and outbox-engine processes (docs/RELIABILITY.md).
        .target(name: "OutboxTorture", dependencies: ["EngineProtocol", "OutboxStore"]),
        .executableTarget(name: "outbox-torture", dependencies: ["OutboxTorture"]),
        // A store workload for kill -9 tests: prints each acknowledged request id.
        .executableTarget(name: "outbox-workload", dependencies: ["OutboxStore", "OutboxIO", "OutboxFormat", "OutboxSync"]),

        .testTarget(name: "OutboxFormatTests", dependencies: ["OutboxFormat"]),
        .testTarget(name: "OutboxStoreTests", dependencies: ["OutboxStore", "OutboxIO", "OutboxFormat"]),
        .testTarget(name: "HTTPWireTests", dependencies: ["HTTPWire"]),
        .testTarget(name: "OutboxEngineTests", dependencies: ["OutboxEngine", "EngineProtocol", "HTTPWire", "OutboxIO"]),
        .testTarget(name: "OutboxSyncTests", dependencies: ["OutboxSync", "OutboxStore", "EngineProtocol", "OutboxEngine", "OutboxIO", "HTTPWire"]),
        .testTarget(name: "OutboxCLITests", dependencies: ["OutboxCLI", "OutboxStore"]),
    ]
)
