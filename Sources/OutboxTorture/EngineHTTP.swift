import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import EngineProtocol

/// The few engine reads the checker needs, over plain URLSession.
struct EngineHTTP {
    let base: String
    let token: String

    func get<T: Decodable>(_ path: String, as: T.Type) throws -> T? {
        var request = URLRequest(url: URL(string: base + path)!)
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        request.timeoutInterval = 10
        let box = ResultBox()
        URLSession.shared.dataTask(with: request) { data, response, error in
            box.set(data, (response as? HTTPURLResponse)?.statusCode, error)
        }.resume()
        let (data, status, error) = box.wait()
        if let error { throw TortureError("GET \(path): \(error.localizedDescription)") }
        guard status == 200, let data else { return nil }
        return try WireJSON.decode(T.self, from: Array(data))
    }
}

final class ResultBox: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var value: (Data?, Int?, Error?) = (nil, nil, nil)
    func set(_ d: Data?, _ s: Int?, _ e: Error?) { value = (d, s, e); done.signal() }
    func wait() -> (Data?, Int?, Error?) { done.wait(); return value }
}

struct TortureError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}
