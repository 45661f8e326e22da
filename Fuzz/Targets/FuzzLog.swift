// libFuzzer target: the record decoder with log recovery (the code that reads turns.jsonl).
// Built by Fuzz/run.sh together with every file of Sources/OutboxFormat, so the
// fuzzer exercises exactly the code that reads turns.jsonl at open.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzLog(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let scan = LogScanner.scan(bytes)

    // The scanner never claims more than it read, and what it kept is a valid log on its own.
    precondition(scan.validEnd >= 0 && scan.validEnd <= Int64(size))
    let prefix = Array(bytes[0..<Int(scan.validEnd)])
    let again = LogScanner.scan(prefix)
    precondition(again.corruption == nil && again.tail == .clean && again.entries == scan.entries,
                 "re-scanning the valid prefix must give the same records and nothing torn")
    var previous: Int64?
    for e in scan.entries {
        if let p = previous { precondition(e.seq == p + 1, "sequence numbers are consecutive") }
        previous = e.seq
        // Every accepted record re-encodes to a line that decodes to the same record.
        let line = LineCodec.encode(seq: e.seq, type: e.type, at: e.at, fields: e.fields)
        guard case .success(let round) = LineCodec.decode(Array(line.dropLast())) else {
            preconditionFailure("a record the scanner accepted does not survive re-encoding")
        }
        precondition(round.fields == e.fields && round.type == e.type && round.seq == e.seq)
        _ = try? OutboxRecord(type: e.type, fields: e.fields)
    }
    // The JSON parser alone never crashes, and what it accepts round-trips.
    if let v = try? JSONParser.parse(bytes) {
        precondition((try? JSONParser.parse(JSONWriter.encode(v))) == v, "JSON round trip")
    }
    return 0
}
