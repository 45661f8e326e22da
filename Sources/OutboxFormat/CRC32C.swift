/// CRC-32C (Castagnoli), the checksum LevelDB and ext4 use; table-driven, slicing by one byte.
public enum CRC32C {
    static let table: [UInt32] = (0..<256).map { n -> UInt32 in
        var c = UInt32(n)
        for _ in 0..<8 { c = (c & 1) != 0 ? (c >> 1) ^ 0x82F6_3B78 : c >> 1 }
        return c
    }

    public static func checksum<C: Collection>(_ bytes: C, seed: UInt32 = 0) -> UInt32 where C.Element == UInt8 {
        var crc = ~seed
        table.withUnsafeBufferPointer { t in
            for b in bytes { crc = t[Int((crc ^ UInt32(b)) & 0xFF)] ^ (crc >> 8) }
        }
        return ~crc
    }

    public static func checksum(_ buf: UnsafeBufferPointer<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        table.withUnsafeBufferPointer { t in
            for b in buf { crc = t[Int((crc ^ UInt32(b)) & 0xFF)] ^ (crc >> 8) }
        }
        return ~crc
    }
}
