/// One tree a power cut could leave behind, built from a `SimulatedDisk` copy: its directories and
/// files (with hard links kept as links), a description of the choices that made it, and a
/// fingerprint of its contents so identical states are checked once.
public struct CrashState: Sendable {
    public struct File: Sendable {
        public var path: String
        /// Entries naming the same inode get the same group (hard links).
        public var group: Int
        public var bytes: [UInt8]
    }

    public var directories: [String]
    public var files: [File]
    public var label: String

    /// A 128-bit FNV-1a fingerprint of names, link groups and bytes.
    public var fingerprint: String {
        var a: UInt64 = 0xcbf29ce484222325, b: UInt64 = 0x84222325cbf29ce4
        func mix(_ byte: UInt8) {
            a = (a ^ UInt64(byte)) &* 0x100000001b3
            b = (b ^ UInt64(byte ^ 0x5c)) &* 0x100000001b3
        }
        func mix(_ s: String) { for c in s.utf8 { mix(c) }; mix(0) }
        for d in directories { mix("d"); mix(d) }
        for f in files {
            mix("f"); mix(f.path); mix(String(f.group)); mix(String(f.bytes.count))
            for byte in f.bytes { mix(byte) }
        }
        return String(a, radix: 16) + String(b, radix: 16)
    }

    /// Writes the state under `root` (which must exist and be empty): directories 0700, files 0600.
    public func materialize(into root: String, fileSystem fs: any FileSystem = PosixFileSystem()) throws {
        for d in directories { try fs.makeDirectory(root + "/" + d, mode: 0o700) }
        var firstPath: [Int: String] = [:]
        for f in files {
            let path = root + "/" + f.path
            if let other = firstPath[f.group] {
                try fs.link(other, path)
                continue
            }
            firstPath[f.group] = path
            let fd = try fs.open(path, [.write, .create, .exclusive, .noFollow], mode: 0o600)
            defer { try? fs.close(fd) }
            do { try fs.writeAll(fd, f.bytes) } catch let w as WriteError { throw w.error }
        }
    }
}

/// How many crash states to build at one crash point.
public struct CrashEnumeration: Sendable {
    /// With this many pending directory operations or fewer, every subset is tried (closed under
    /// per-entry order); beyond it, every prefix, every single one dropped, every single one kept.
    public var allSubsetsUpTo: Int = 3
    /// Torn-write cut points per file: 0 means every sector boundary.
    public var tornCuts: Int = 3
    /// Random mixes of per-file variants per directory variant (beyond the one-file-at-a-time ones).
    public var randomMixes: Int = 0
    public var seed: UInt64 = 1
    public init(allSubsetsUpTo: Int = 3, tornCuts: Int = 3, randomMixes: Int = 0, seed: UInt64 = 1) {
        self.allSubsetsUpTo = allSubsetsUpTo; self.tornCuts = tornCuts; self.randomMixes = randomMixes; self.seed = seed
    }
}

extension SimulatedDisk {
    /// What one file may hold after the crash.
    struct FileVariant {
        var label: String
        var bytes: [UInt8]
    }

    /// The sets of pending directory operations a crash may keep (indices into `changes`).
    func directoryVariants(_ options: CrashEnumeration) -> [(label: String, kept: Set<Int>)] {
        let pending = changes.indices.filter { !changes[$0].durable }
        let n = pending.count
        var sets: [Set<Int>] = []
        if n <= options.allSubsetsUpTo {
            for mask in 0..<(1 << n) {
                sets.append(Set(pending.indices.filter { mask & (1 << $0) != 0 }.map { pending[$0] }))
            }
        } else {
            for k in 0...n { sets.append(Set(pending.prefix(k))) }
            for i in pending {
                sets.append(Set(pending).subtracting([i]))
                sets.append([i])
            }
        }
        var seen = Set<Set<Int>>()
        var out: [(String, Set<Int>)] = []
        for s in sets {
            let closed = closeUnderEntryOrder(s, pending: pending)
            if !seen.insert(closed).inserted { continue }
            let dropped = pending.filter { !closed.contains($0) }
            let label = n == 0 ? "no pending directory ops"
                : dropped.isEmpty ? "all \(n) directory ops kept"
                : "directory ops undone: " + dropped.map { changes[$0].label }.joined(separator: ", ")
            out.append((label, closed))
        }
        return out
    }

    /// Keeping a change keeps every earlier pending change on the same entries.
    func closeUnderEntryOrder(_ kept: Set<Int>, pending: [Int]) -> Set<Int> {
        var result = kept
        var keys = Set<EntryKey>()
        for i in pending.reversed() {
            if result.contains(i) { keys.formUnion(changes[i].keys) }
            else if !changes[i].keys.isDisjoint(with: keys) { result.insert(i); keys.formUnion(changes[i].keys) }
        }
        return result
    }

    func tree(keeping kept: Set<Int>) -> Tree {
        var t = base
        for i in changes.indices where changes[i].durable || kept.contains(i) {
            for e in changes[i].effects { Self.apply(e, to: &t) }
        }
        return t
    }

    /// Kept, dropped, torn at sector boundaries, zero-filled and garbage-filled versions of a
    /// file with unsynced changes. Only bytes written since the last sync can be damaged.
    func fileVariants(_ inode: InodeID, _ options: CrashEnumeration, salt: UInt64) -> [FileVariant] {
        guard let ino = inodes[inode], !ino.pending.isEmpty else {
            return [FileVariant(label: "synced", bytes: inodes[inode]?.durable ?? [])]
        }
        let d = ino.durable, v = ino.volatile
        var out = [FileVariant(label: "kept", bytes: v), FileVariant(label: "dropped", bytes: d)]
        // Byte ranges written since the last sync that are still in the file, cut at sector edges.
        var written = [Bool](repeating: false, count: v.count)
        var lengthNow = d.count
        for change in ino.pending {
            switch change {
            case .write(let offset, let bytes):
                for p in offset..<(offset + bytes.count) where p < written.count { written[p] = true }
                lengthNow = max(lengthNow, offset + bytes.count)
            case .truncate(let length):
                lengthNow = length
                if length < written.count { for p in length..<written.count { written[p] = false } }
            }
        }
        var chunks: [Range<Int>] = []
        var p = 0
        while p < v.count {
            if !written[p] { p += 1; continue }
            let sectorEnd = (p / Self.sectorSize + 1) * Self.sectorSize
            var q = p
            while q < v.count && q < sectorEnd && written[q] { q += 1 }
            chunks.append(p..<q)
            p = q
        }
        if chunks.isEmpty { return out }

        enum Fill { case new, old, zero, garbage }
        var rng = SplitMix(seed: options.seed ^ salt)
        func compose(length: Int, _ fill: (Int) -> Fill) -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: length)
            var inChunk = [Bool](repeating: false, count: length)
            for (i, c) in chunks.enumerated() {
                let f = fill(i)
                for q in c where q < length {
                    inChunk[q] = true
                    switch f {
                    case .new: bytes[q] = v[q]
                    case .old: bytes[q] = q < d.count ? d[q] : 0
                    case .zero: bytes[q] = 0
                    case .garbage: bytes[q] = UInt8(truncatingIfNeeded: rng.next())
                    }
                }
            }
            for q in 0..<length where !inChunk[q] {
                bytes[q] = q < v.count ? v[q] : (q < d.count ? d[q] : 0)
            }
            return bytes
        }
        let n = chunks.count
        var cuts = Array(1..<n)
        if options.tornCuts > 0 && cuts.count > options.tornCuts {
            let picks = (0..<options.tornCuts).map { cuts[$0 * (cuts.count - 1) / max(1, options.tornCuts - 1)] }
            cuts = Array(Set(picks)).sorted()
        }
        let grows = v.count > d.count
        for k in cuts {
            // The first k sectors of new data reached the disk; a growing file ends with them.
            let length = grows ? max(d.count, chunks[k - 1].upperBound) : v.count
            out.append(FileVariant(label: "torn after sector \(k) of \(n)", bytes: compose(length: length) { $0 < k ? .new : .old }))
        }
        for k in Set([0, n / 2, n - 1]).sorted() {
            out.append(FileVariant(label: "\(k) of \(n) sectors written, the rest zero", bytes: compose(length: v.count) { $0 < k ? .new : .zero }))
        }
        for k in Set([0, n - 1]).sorted() {
            out.append(FileVariant(label: "\(k) of \(n) sectors written, the rest garbage", bytes: compose(length: v.count) { $0 < k ? .new : .garbage }))
        }
        return out
    }

    /// Every crash state this model allows at this moment, bounded by `options`.
    public func crashStates(_ options: CrashEnumeration = CrashEnumeration()) -> [CrashState] {
        var out: [CrashState] = []
        var mixRNG = SplitMix(seed: options.seed &* 31 &+ 7)
        for (dirLabel, kept) in directoryVariants(options) {
            let t = tree(keeping: kept)
            let entries = Self.walk(t)
            let dirty = Array(Set(entries.compactMap { e -> InodeID? in
                if case .file(let i) = e.node, let ino = inodes[i], !ino.pending.isEmpty { return i }
                return nil
            })).sorted()
            var variants: [InodeID: [FileVariant]] = [:]
            for i in dirty { variants[i] = fileVariants(i, options, salt: UInt64(i)) }
            func build(_ choice: [InodeID: Int], _ label: String) {
                var dirs: [String] = []
                var files: [CrashState.File] = []
                for e in entries {
                    switch e.node {
                    case .directory: dirs.append(e.path)
                    case .file(let i):
                        let bytes = variants[i].map { $0[choice[i] ?? 0].bytes } ?? (inodes[i]?.durable ?? [])
                        files.append(.init(path: e.path, group: i, bytes: bytes))
                    }
                }
                out.append(CrashState(directories: dirs, files: files, label: "\(dirLabel); \(label)"))
            }
            let allKept = Dictionary(uniqueKeysWithValues: dirty.map { ($0, 0) })
            let allDropped = Dictionary(uniqueKeysWithValues: dirty.map { ($0, 1) })
            build(allKept, dirty.isEmpty ? "no unsynced file data" : "all unsynced file data kept")
            if dirty.isEmpty { continue }
            build(allDropped, "all unsynced file data dropped")
            for i in dirty {
                let name = entries.first { $0.node == .file(i) }?.path ?? "inode \(i)"
                for (vi, variant) in variants[i]!.enumerated() where vi >= 2 || dirty.count > 1 {
                    var k = allKept; k[i] = vi
                    build(k, "\(name): \(variant.label), other files kept")
                    if dirty.count > 1 {
                        var dr = allDropped; dr[i] = vi
                        build(dr, "\(name): \(variant.label), other files dropped")
                    }
                }
            }
            for m in 0..<options.randomMixes {
                var mix: [InodeID: Int] = [:]
                for i in dirty { mix[i] = Int(mixRNG.next() % UInt64(variants[i]!.count)) }
                build(mix, "random mix \(m): " + dirty.map { i in variants[i]![mix[i]!].label }.joined(separator: " / "))
            }
        }
        return out
    }
}

/// A small deterministic generator (SplitMix64), so every garbage byte can be reproduced.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E3779B97F4A7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58476D1CE4E5B9
        z = (z ^ (z >> 27)) &* 0x94D049BB133111EB
        return z ^ (z >> 31)
    }
}
