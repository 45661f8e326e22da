// A store workload for crash tests: runs operations against one outbox and prints a line to
// stdout after each one is acknowledged (returned), so a parent that kill -9s it knows exactly
// what was promised. Not installed for people; tests and the torture command drive it.
@preconcurrency import Foundation
#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import OutboxFormat
import OutboxIO
import OutboxStore
import OutboxSync

setvbuf(stdout, nil, _IOLBF, 0)

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("outbox-workload: \(message)\n".utf8))
    exit(1)
}

var args = Array(CommandLine.arguments.dropFirst())
guard let command = args.first else { fail("usage: outbox-workload enqueue|append-raw --dir DIR [--count N] [--attach] [--tag T]") }
args.removeFirst()
var dir = ""
var count = 1_000_000
var attach = false
var tag = "w\(getpid())"
// drain options
var engineURL = ""
var token = ""
var watch = false
var batch = 64
var retentionMillis: Int64 = 24 * 3_600_000
var i = 0
while i < args.count {
    switch args[i] {
    case "--url": engineURL = args[i + 1]; i += 2
    case "--token": token = args[i + 1]; i += 2
    case "--watch": watch = true; i += 1
    case "--batch": batch = Int(args[i + 1]) ?? batch; i += 2
    case "--retention-ms": retentionMillis = Int64(args[i + 1]) ?? retentionMillis; i += 2
    case "--dir": dir = args[i + 1]; i += 2
    case "--count": count = Int(args[i + 1]) ?? count; i += 2
    case "--attach": attach = true; i += 1
    case "--tag": tag = args[i + 1]; i += 2
    default: fail("unknown argument \(args[i])")
    }
}
guard !dir.isEmpty else { fail("--dir is required") }

do {
    switch command {
    case "enqueue":
        // Enqueue loop: one conversation per process, turns numbered; every third with an attachment.
        let outbox = try Outbox.open(directory: dir)
        let conversation = "c-\(tag)"
        try outbox.createConversation(id: conversation, title: "workload \(tag)", originSurface: "cli")
        for n in 0..<count {
            let id = "\(tag)-\(n)"
            var attachments: [AttachmentSource] = []
            if attach && n % 3 == 0 {
                // Some attachments are shared between processes (same bytes), some unique.
                let bytes = n % 2 == 0 ? Array("shared attachment bytes".utf8) : Array("unique \(id) ".utf8) + [UInt8](repeating: UInt8(n % 251), count: 3000)
                attachments.append(AttachmentSource(bytes: bytes, name: "a\(n).bin"))
            }
            let r = try outbox.enqueue(TurnDraft(requestID: id, conversationID: conversation, text: "message \(n) from \(tag)",
                                                 attachments: attachments, surface: "cli"))
            print("acked \(r.turn.id) \(r.turn.attachments.map(\.sha256).joined(separator: ","))")
        }
    case "cycle":
        // Enqueue, mark synced, retire: exercises retire's unlink and compaction under kills.
        var options = Outbox.Options()
        options.autoCompactBytes = 64 * 1024
        let outbox = try Outbox.open(directory: dir, options: options)
        let conversation = "c-\(tag)"
        try outbox.createConversation(id: conversation, title: "cycle \(tag)", originSurface: "cli")
        for n in 0..<count {
            let id = "\(tag)-\(n)"
            let bytes = Array("cycle \(id)".utf8)
            _ = try outbox.enqueue(TurnDraft(requestID: id, conversationID: conversation, text: "cycle \(n)",
                                             attachments: [AttachmentSource(bytes: bytes, name: "c.txt")], surface: "cli"))
            print("acked \(id)")
            try outbox.apply([.syncing(id), .synced(id, EngineAnswer(httpStatus: 201, status: "received", replayed: false))])
            print("synced \(id)")
            if n % 2 == 0 { try outbox.retire([id]); print("retired \(id)") }
        }
    // ---- drain (issue 4's kill -9 and signal tests) ------------------------------------------
    // Runs the drain once (or in watch mode until SIGINT/SIGTERM) and prints one line per event:
    // "delivered ID HOW", "failed ID", "attention ID", "reply ID"; then "done" with the counts.
    case "drain":
        let outbox = try Outbox.open(directory: dir)
        var options = Drain.Options()
        options.batchSize = batch
        options.retentionMillis = retentionMillis
        options.retry = RetryPolicy(baseMillis: 5, capMillis: 50, jitter: 0.2, attemptLimit: 1_000)
        let drain = Drain(outbox: outbox, client: EngineClient(baseURL: engineURL, token: token, timeout: 5), options: options,
                          onEvent: { event in
            switch event {
            case .delivered(let id, let how): print("delivered \(id) \(how)")
            case .failed(let id, _, _): print("failed \(id)")
            case .needsAttention(let id, let e): print("attention \(id) \(e)")
            case .reply(let id, _, _, _): print("reply \(id)")
            default: break
            }
        })
        let report: DrainReport
        if watch {
            let stop = DrainStop.onSignals()
            print("watching")
            report = try drain.watch(stop: stop)
        } else {
            report = try drain.runOnce()
        }
        print("done delivered=\(report.delivered.count) found=\(report.foundByStatusCheck.count) replayed=\(report.replayed.count) requeued=\(report.requeuedAtStart.count) pending=\(report.pending) stopped=\(report.stopped)")
    // ---- end drain ----------------------------------------------------------------------------
    default:
        fail("unknown command \(command)")
    }
} catch {
    fail("\(error)")
}
