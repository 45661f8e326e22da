/// A JSON value that keeps object keys in the order they were written, so a record's bytes are
/// stable and a person reads `v`, `seq`, `type` first.
public enum JSONValue: Sendable, Equatable, Hashable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    public var stringValue: String? { if case .string(let s) = self { return s }; return nil }
    public var intValue: Int64? { if case .int(let i) = self { return i }; return nil }
    public var boolValue: Bool? { if case .bool(let b) = self { return b }; return nil }
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { return a }; return nil }
    public var objectValue: JSONObject? { if case .object(let o) = self { return o }; return nil }
    public var isNull: Bool { self == .null }
}

/// An ordered JSON object. Lookups are linear: records have a dozen keys at most.
public struct JSONObject: Sendable, Equatable, Hashable, ExpressibleByDictionaryLiteral {
    public var pairs: [Pair]
    public struct Pair: Sendable, Equatable, Hashable {
        public var key: String
        public var value: JSONValue
        public init(_ key: String, _ value: JSONValue) { self.key = key; self.value = value }
    }

    public init() { pairs = [] }
    public init(_ pairs: [(String, JSONValue)]) { self.pairs = pairs.map { Pair($0.0, $0.1) } }
    public init(dictionaryLiteral elements: (String, JSONValue)...) { self.init(elements) }

    public subscript(key: String) -> JSONValue? {
        get { pairs.first(where: { $0.key == key })?.value }
        set {
            if let i = pairs.firstIndex(where: { $0.key == key }) {
                if let v = newValue { pairs[i].value = v } else { pairs.remove(at: i) }
            } else if let v = newValue {
                pairs.append(Pair(key, v))
            }
        }
    }

    public var keys: [String] { pairs.map(\.key) }
    public var isEmpty: Bool { pairs.isEmpty }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral, ExpressibleByNilLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(nilLiteral: ()) { self = .null }
}

extension JSONValue {
    /// `.string` or `.null` for optionals, so absent values still print as `null`.
    public static func optional(_ s: String?) -> JSONValue { s.map { .string($0) } ?? .null }
    public static func optional(_ i: Int64?) -> JSONValue { i.map { .int($0) } ?? .null }
}
