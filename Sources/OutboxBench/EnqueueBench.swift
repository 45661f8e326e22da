import Foundation
import OutboxFormat
import OutboxStore

/// Durable, acknowledged enqueue latency: what a person waits for between Enter and the prompt.
struct EnqueueBench {
    let directory: String
    let iterations: Int
    let attachmentIterations: Int

    struct Result {
        var text: Samples
        var attachment: Samples
        var recordBytes: Int
    }

    /// A text of the length that makes a ~300-byte `turn` record.
    static let text = String(repeating: "lorem ipsum ", count: 9)

    func run() throws -> Result {
        let outbox = try Outbox.open(directory: directory + "/enqueue")
        try outbox.createConversation(id: "bench", title: "bench", originSurface: "cli")
        var text = Samples()
        for i in 0..<iterations {
            let draft = TurnDraft(requestID: "t\(i)", conversationID: "bench", text: Self.text, surface: "cli")
            let t0 = nowNanos()
            try outbox.enqueue(draft)
            text.add(nanos: nowNanos() - t0)
        }
        let recordBytes = try outbox.history("t0").first?.length ?? 0
        var attachment = Samples()
        var bytes = [UInt8](repeating: 0, count: 100 * 1024)
        for i in 0..<attachmentIterations {
            // New bytes each time, so every enqueue really writes a blob.
            bytes[0] = UInt8(truncatingIfNeeded: i); bytes[1] = UInt8(truncatingIfNeeded: i >> 8)
            let draft = TurnDraft(requestID: "a\(i)", conversationID: "bench", text: "with a file",
                                  attachments: [AttachmentSource(bytes: bytes, name: "photo.jpg")], surface: "cli")
            let t0 = nowNanos()
            try outbox.enqueue(draft)
            attachment.add(nanos: nowNanos() - t0)
        }
        return Result(text: text, attachment: attachment, recordBytes: recordBytes)
    }
}
