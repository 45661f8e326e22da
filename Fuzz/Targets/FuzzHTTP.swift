// libFuzzer target: the HTTP/1.1 request parser. Differential: the same bytes fed at once and
// fed one byte at a time must give the same requests and the same error.

enum Outcome: Equatable {
    case request(HTTPRequest)
    case continueExpected
    case failed(Int)
}

func parseAll(_ bytes: [UInt8], chunk: Int) -> [Outcome] {
    var parser = HTTPRequestParser(maxHeaderBytes: 2048, bodyLimit: { _ in 4096 })
    var out: [Outcome] = []
    var i = 0
    while i < bytes.count {
        parser.append(bytes[i..<min(bytes.count, i + chunk)])
        i += chunk
        while true {
            do {
                guard let event = try parser.next() else { break }
                switch event {
                case .request(let r): out.append(.request(r))
                case .continueExpected: break  // depends on how much body arrived with the head
                }
            } catch {
                out.append(.failed(error.status))
                return out
            }
        }
    }
    return out
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTP(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let whole = parseAll(bytes, chunk: max(1, bytes.count))
    let bytewise = parseAll(bytes, chunk: 1)
    precondition(whole == bytewise, "feeding byte by byte must not change the result")
    for case .request(let r) in whole {
        precondition(r.body.count <= 4096, "body limit enforced")
    }
    return 0
}
