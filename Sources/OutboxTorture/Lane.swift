import Foundation

/// One conversation written by one sequential sender: the order of its acknowledged turns is
/// the order the engine must show them in.
final class Lane: @unchecked Sendable {
    let index: Int
    unowned let torture: Torture
    private(set) var conversation: String?
    private(set) var acknowledged: [(id: String, text: String)] = []
    private(set) var finished = false
    private var attachmentDir: String { torture.outboxDirectory + "-files" }

    init(index: Int, torture: Torture) { self.index = index; self.torture = torture }

    func run() {
        defer { finished = true }
        try? FileManager.default.createDirectory(atPath: attachmentDir, withIntermediateDirectories: true)
        var n = 0
        while !torture.isStopping {
            let text = "lane \(index) message \(n)"
            var args = ["send", "--no-wait", "--json"]
            if let c = conversation { args += ["--cid", c] } else { args += ["--new", "--title", "lane \(index)"] }
            if n % 4 == 0 { args += ["-a", attachment(n)] }
            args.append(text)
            guard let child = torture.spawn("send", args) else { break }
            let r = torture.reap(child)
            n += 1
            guard r.status == 0, !r.killed, let line = r.lines.last,
                  let obj = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let id = obj["id"] as? String, let cid = obj["conversation"] as? String else { continue }
            if conversation == nil { conversation = cid }
            if cid == conversation { acknowledged.append((id, text)) }
        }
    }

    /// Every 8th attachment has bytes shared by all lanes; the others are the lane's own.
    private func attachment(_ n: Int) -> String {
        let shared = n % 8 == 0
        let path = shared ? "\(attachmentDir)/shared.bin" : "\(attachmentDir)/lane\(index)-\(n).bin"
        if !FileManager.default.fileExists(atPath: path) {
            let bytes = shared ? Data(repeating: 0x5A, count: 4096) : Data("lane \(index) file \(n) ".utf8 + [UInt8](repeating: UInt8(n % 251), count: 2048))
            _ = FileManager.default.createFile(atPath: path, contents: bytes)
        }
        return path
    }
}
