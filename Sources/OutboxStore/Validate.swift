import Foundation
import OutboxFormat

/// Input checks shared by every write, with messages a person can act on.
enum Validate {
    static let maxTextBytes = 512 * 1024

    static func id(_ id: String, what: String) throws {
        guard !id.isEmpty, id.utf8.count <= 128,
              id.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A)
                  || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: ":") })
        else {
            throw StoreError.invalidInput("\(what) \"\(id)\" must be 1–128 characters of letters, digits, - _ . :")
        }
    }

    static func surface(_ s: String) throws {
        guard !s.isEmpty, s.utf8.count <= 32,
              s.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") })
        else { throw StoreError.invalidInput("surface \"\(s)\" must be 1–32 characters of lowercase letters, digits, - _ (for example cli, ios, web)") }
    }

    static func title(_ t: String) -> String {
        let trimmed = t.trimmingCharacters(in: .whitespacesAndNewlines)
        let flat = trimmed.map { $0.isNewline ? " " : $0 }
        let s = String(flat)
        return s.count > 200 ? String(s.prefix(200)) : s
    }

    static func text(_ t: String, attachments: Int) throws {
        if t.utf8.count > maxTextBytes {
            throw StoreError.invalidInput("message is \(t.utf8.count) bytes; the limit is \(maxTextBytes) bytes (send long documents as attachments)")
        }
        // Stops at the first visible character, so it costs nothing for a real message.
        if attachments == 0 && t.unicodeScalars.allSatisfy({ $0.properties.isWhitespace }) {
            throw StoreError.invalidInput("message is empty (nothing to send)")
        }
    }
}
