import Foundation
import Testing
import EngineProtocol
import OutboxFormat
import OutboxIO
import OutboxStore
@testable import OutboxSync

/// A person moves from one engine to another (or the engine lost its data): the outbox's
/// conversations were all created by this client, so the drain creates them again.
@Suite(.serialized) struct EngineSwitchTests {
    @Test func aConversationTheNewEngineDoesNotKnowIsCreatedAgainAndTheTurnDelivered() throws {
        let dir = TempDir()
        let first = try EngineProcess(dataDir: dir.engineData)
        let outbox = try Outbox.open(directory: dir.outbox)
        try outbox.send("t1", "on the first engine", conversation: "c1")
        _ = try Drain(outbox: outbox, client: first.client()).runOnce()
        #expect(outbox.conversation("c1")?.isOnEngine == true && outbox.turn("t1")?.state == .synced)

        let second = try EngineProcess(dataDir: dir.path + "/engine-two")
        try outbox.send("t2", "on the second engine", conversation: "c1")
        let report = try Drain(outbox: outbox, client: second.client()).runOnce()
        #expect(report.delivered == ["t2"] && report.needsAttention.isEmpty, "\(report.needsAttention)")
        let held = try second.client().conversationTurns("c1").map(\.requestID)
        #expect(held == ["t2"])
    }

    /// A turn the engine refused outright (its POST got a 4xx) is known not to be on the engine,
    /// so a person may cancel it; one whose fate is unknown may not.
    @Test func aTurnTheEngineRefusedMayBeCancelled() throws {
        let dir = TempDir()
        let engine = try EngineProcess(dataDir: dir.engineData)
        let outbox = try Outbox.open(directory: dir.outbox)
        try outbox.send("t1", "first", conversation: "c1")
        _ = try Drain(outbox: outbox, client: engine.client()).runOnce()
        // Another client took request id "t2" with other content: our POST gets 422.
        _ = try engine.client().postTurn(conversationID: "c1", requestID: "t2", text: "someone else's", attachments: [],
                                         createdAt: Timestamp.format(millis: 0), surface: "web")
        try outbox.send("t2", "mine", conversation: "c1")
        let report = try Drain(outbox: outbox, client: engine.client()).runOnce()
        #expect(report.needsAttention.map(\.turnID) == ["t2"])
        let t2 = try #require(outbox.turn("t2"))
        #expect(t2.state == .failedNeedsAttention && !t2.mayHaveLanded)
        try outbox.cancel("t2")
        #expect(outbox.turn("t2")?.state == .cancelled)
    }
}
