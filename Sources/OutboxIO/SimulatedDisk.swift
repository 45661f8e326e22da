/// The persistence model behind `CrashSimulatingFileSystem`: what a process sees (the volatile
/// view) and what would survive a power cut (the durable view), for one directory tree.
///
/// - File contents live in inodes. A write or truncate changes the volatile bytes at once and is
///   remembered as pending; `fsync`/`fdatasync` of the file makes every pending change durable.
/// - Directory operations (create, rename, link, unlink, mkdir, rmdir) change the volatile tree at
///   once and are remembered in order as pending; each becomes durable when every directory it
///   touches has been fsynced after it (a rename needs both of its directories). A rename is
///   atomic: a crash keeps all of it or none of it.
/// - Operations on the same directory entry persist in order: a crash state that keeps one keeps
///   every earlier pending operation on that entry (file systems journal them in order; nothing
///   reorders a create of a name before the rename that freed it).
/// - Powersafe overwrite (SQLite's SQLITE_IOCAP_POWERSAFE_OVERWRITE): an unsynced write can damage
///   only the bytes it wrote, at 512-byte sector granularity, never bytes outside its own range.
///
/// A value type: a crash point is a copy of the model, from which `crashStates` builds every
/// variant the model allows (bounded by `CrashEnumeration`).
public struct SimulatedDisk: Sendable {
    public typealias InodeID = Int
    public typealias DirectoryID = Int

    public enum Node: Sendable, Hashable {
        case file(InodeID)
        case directory(DirectoryID)
    }

    enum DataChange: Sendable {
        case write(offset: Int, bytes: [UInt8])
        case truncate(Int)
    }

    struct Inode: Sendable {
        var durable: [UInt8] = []
        var volatile: [UInt8] = []
        var pending: [DataChange] = []
    }

    struct EntryKey: Sendable, Hashable {
        var directory: DirectoryID
        var name: String
    }

    struct Effect: Sendable {
        var key: EntryKey
        var node: Node?
    }

    /// One directory operation, in the order it happened.
    struct DirectoryChange: Sendable {
        var label: String
        var effects: [Effect]
        /// Directories that must be fsynced after it for it to be durable.
        var needs: Set<DirectoryID>
        var synced: Set<DirectoryID> = []
        var durable = false
        var keys: Set<EntryKey> { Set(effects.map(\.key)) }
    }

    typealias Tree = [DirectoryID: [String: Node]]

    public static let sectorSize = 512
    public static let root: DirectoryID = 0

    /// Durable tree with every durable prefix of `changes` folded in.
    var base: Tree = [0: [:]]
    /// Directory operations after `base`, durable or not, in order.
    var changes: [DirectoryChange] = []
    var volatileTree: Tree = [0: [:]]
    var inodes: [InodeID: Inode] = [:]
    var nextInode = 1
    var nextDirectory = 1

    public init() {}

    // MARK: - the volatile view

    func lookup(_ components: [String]) -> Node? {
        var node = Node.directory(Self.root)
        for c in components {
            guard case .directory(let d) = node, let next = volatileTree[d]?[c] else { return nil }
            node = next
        }
        return node
    }

    func directory(_ components: [String]) -> DirectoryID? {
        if case .directory(let d)? = lookup(components) { return d }
        return nil
    }

    func size(_ inode: InodeID) -> Int { inodes[inode]?.volatile.count ?? 0 }
    func volatileBytes(_ inode: InodeID) -> [UInt8] { inodes[inode]?.volatile ?? [] }

    /// Every path of the volatile tree (relative, "/"-joined) with its node.
    func volatilePaths() -> [(path: String, node: Node)] {
        Self.walk(volatileTree)
    }

    // MARK: - changes (each called after the real call succeeded)

    mutating func createFile(in parent: DirectoryID, _ name: String) -> InodeID {
        let id = nextInode
        nextInode += 1
        inodes[id] = Inode()
        record("create \(name)", [Effect(key: EntryKey(directory: parent, name: name), node: .file(id))], needs: [parent])
        return id
    }

    mutating func makeDirectory(in parent: DirectoryID, _ name: String) -> DirectoryID {
        let id = nextDirectory
        nextDirectory += 1
        volatileTree[id] = [:]
        record("mkdir \(name)", [Effect(key: EntryKey(directory: parent, name: name), node: .directory(id))], needs: [parent])
        return id
    }

    mutating func removeEntry(in parent: DirectoryID, _ name: String, label: String) {
        record("\(label) \(name)", [Effect(key: EntryKey(directory: parent, name: name), node: nil)], needs: [parent])
    }

    mutating func rename(from: DirectoryID, _ fromName: String, to: DirectoryID, _ toName: String, node: Node) {
        record("rename \(fromName) -> \(toName)",
               [Effect(key: EntryKey(directory: from, name: fromName), node: nil),
                Effect(key: EntryKey(directory: to, name: toName), node: node)], needs: [from, to])
    }

    mutating func link(to: DirectoryID, _ toName: String, node: Node) {
        record("link \(toName)", [Effect(key: EntryKey(directory: to, name: toName), node: node)], needs: [to])
    }

    private mutating func record(_ label: String, _ effects: [Effect], needs: Set<DirectoryID>) {
        for e in effects { Self.apply(e, to: &volatileTree) }
        changes.append(DirectoryChange(label: label, effects: effects, needs: needs))
    }

    mutating func write(_ inode: InodeID, at offset: Int, _ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        inodes[inode, default: Inode()].pending.append(.write(offset: offset, bytes: bytes))
        Self.apply(.write(offset: offset, bytes: bytes), to: &inodes[inode]!.volatile)
    }

    mutating func truncate(_ inode: InodeID, to length: Int) {
        inodes[inode, default: Inode()].pending.append(.truncate(length))
        Self.apply(.truncate(length), to: &inodes[inode]!.volatile)
    }

    /// fsync/fdatasync of a file: its contents are durable.
    mutating func syncFile(_ inode: InodeID) {
        guard var i = inodes[inode] else { return }
        i.durable = i.volatile
        i.pending = []
        inodes[inode] = i
    }

    /// fsync of a directory: every operation that needed it and has all its directories synced
    /// is durable, and so is every earlier operation on the same entries.
    mutating func syncDirectory(_ dir: DirectoryID) {
        for i in changes.indices where !changes[i].durable && changes[i].needs.contains(dir) {
            changes[i].synced.insert(dir)
            if changes[i].needs.isSubset(of: changes[i].synced) { changes[i].durable = true }
        }
        // Order per entry: a durable change drags every earlier change on its entries along.
        var keys = Set<EntryKey>()
        for i in changes.indices.reversed() {
            if changes[i].durable { keys.formUnion(changes[i].keys) }
            else if !changes[i].keys.isDisjoint(with: keys) { changes[i].durable = true; keys.formUnion(changes[i].keys) }
        }
        while let first = changes.first, first.durable {
            for e in first.effects { Self.apply(e, to: &base) }
            changes.removeFirst()
        }
    }

    // MARK: - helpers

    static func apply(_ effect: Effect, to tree: inout Tree) {
        if let node = effect.node {
            tree[effect.key.directory, default: [:]][effect.key.name] = node
            if case .directory(let d) = node, tree[d] == nil { tree[d] = [:] }
        } else {
            tree[effect.key.directory]?[effect.key.name] = nil
        }
    }

    static func apply(_ change: DataChange, to bytes: inout [UInt8]) {
        switch change {
        case .write(let offset, let new):
            if bytes.count < offset { bytes += [UInt8](repeating: 0, count: offset - bytes.count) }
            let overlap = min(new.count, bytes.count - offset)
            if overlap > 0 { bytes.replaceSubrange(offset..<(offset + overlap), with: new[0..<overlap]) }
            if overlap < new.count { bytes += new[overlap...] }
        case .truncate(let length):
            if length < bytes.count { bytes.removeSubrange(length...) }
            else if length > bytes.count { bytes += [UInt8](repeating: 0, count: length - bytes.count) }
        }
    }

    /// Paths reachable from the root, depth first, sorted by name.
    static func walk(_ tree: Tree) -> [(path: String, node: Node)] {
        var out: [(String, Node)] = []
        func visit(_ dir: DirectoryID, _ prefix: String) {
            for (name, node) in (tree[dir] ?? [:]).sorted(by: { $0.key < $1.key }) {
                let path = prefix.isEmpty ? name : prefix + "/" + name
                out.append((path, node))
                if case .directory(let d) = node { visit(d, path) }
            }
        }
        visit(root, "")
        return out
    }
}
