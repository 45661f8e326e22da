#if canImport(Glibc)
@preconcurrency import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An open TCP socket, carrying the address it belongs to so every error can name it.
public struct SocketDescriptor: Sendable, Hashable, CustomStringConvertible {
    public let raw: Int32
    /// `127.0.0.1:8787` for a listener or a client socket, `peer 127.0.0.1:51234` for an accepted one.
    public let address: String
    public init(raw: Int32, address: String) { self.raw = raw; self.address = address }
    public var description: String { "\(address) (fd \(raw))" }
}

/// TCP over IPv4 through Glibc. Nothing else in the package calls the socket functions.
/// Every call retries EINTR and throws `IOError(errno, call, address)` for anything else.
/// Sends use MSG_NOSIGNAL, so a closed peer is EPIPE, never SIGPIPE.
public enum Sockets {
    /// socket + SO_REUSEADDR + bind + listen. Port 0 picks a free port; the result has the real one.
    public static func listen(host: String, port: UInt16, backlog: Int32 = 128) throws -> (SocketDescriptor, UInt16) {
        let where_ = "\(host):\(port)"
        var addr = try ipv4Address(host: host, port: port)
        let fd = try retryingInterrupts("socket", where_) { socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
        let sock = SocketDescriptor(raw: fd, address: where_)
        do {
            try setOption(sock, SOL_SOCKET, SO_REUSEADDR, 1, "setsockopt(SO_REUSEADDR)")
            _ = try retryingInterrupts("bind", where_) {
                withUnsafePointer(to: &addr) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                }
            }
            _ = try retryingInterrupts("listen", where_) { Glibc.listen(fd, backlog) }
            let bound = try localPort(sock)
            return (SocketDescriptor(raw: fd, address: "\(host):\(bound)"), bound)
        } catch {
            Glibc.close(fd)
            throw error
        }
    }

    /// accept + FD_CLOEXEC + TCP_NODELAY. Blocks; call after `waitReadable` says the listener is ready.
    public static func accept(_ listener: SocketDescriptor) throws -> SocketDescriptor {
        var peer = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let fd = try retryingInterrupts("accept", listener.address) {
            withUnsafeMutablePointer(to: &peer) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.accept(listener.raw, $0, &len) }
            }
        }
        let sock = SocketDescriptor(raw: fd, address: "peer \(describe(peer))")
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        do { try setNoDelay(sock) } catch { Glibc.close(fd); throw error }
        return sock
    }

    /// A blocking connect to host:port, with TCP_NODELAY.
    public static func connect(host: String, port: UInt16) throws -> SocketDescriptor {
        let where_ = "\(host):\(port)"
        var addr = try ipv4Address(host: host, port: port)
        let fd = try retryingInterrupts("socket", where_) { socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
        let sock = SocketDescriptor(raw: fd, address: where_)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if rc == -1 {
            var code = Errno.current
            // An interrupted connect continues in the background: wait for it and read its outcome.
            if code == .interrupted {
                var pfd = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                _ = poll(&pfd, 1, -1)
                code = connectOutcome(fd)
            }
            if code.rawValue != 0 {
                Glibc.close(fd)
                throw IOError(code, "connect", where_)
            }
        }
        do { try setNoDelay(sock) } catch { Glibc.close(fd); throw error }
        return sock
    }

    /// The outcome of a connect that went on in the background (SO_ERROR; 0 when it succeeded).
    private static func connectOutcome(_ fd: Int32) -> Errno {
        var err: Int32 = 0
        var len = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len)
        return Errno(rawValue: err)
    }

    /// Resolves `host` (a name, an IPv4 or an IPv6 literal) and connects to the first of its
    /// addresses that accepts, all attempts together bounded by `timeoutMilliseconds`.
    ///
    /// The socket is non-blocking, close-on-exec, with TCP_NODELAY: for callers that bound every
    /// wait with `waitReadable`/`waitWritable`; `receive` and `sendSome` on it throw
    /// `IOError(.again, …)` instead of blocking. Throws `AddressResolutionError` when the name does
    /// not resolve, `IOError(.timedOut, "connect", …)` when no attempt finished in time, and the
    /// last attempt's `IOError` otherwise.
    public static func connect(host: String, port: UInt16, timeoutMilliseconds: Int32) throws -> SocketDescriptor {
        let where_ = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        var rc: Int32
        repeat { rc = getaddrinfo(host, String(port), &hints, &list) } while rc == EAI_SYSTEM && errno == EINTR
        guard rc == 0, let first = list else {
            let reason = rc == EAI_SYSTEM ? Errno.current.description : String(cString: gai_strerror(rc))
            throw AddressResolutionError(host: host, reason: reason)
        }
        defer { freeaddrinfo(first) }
        let deadline = monotonicMillis() + Int64(max(0, timeoutMilliseconds))
        var lastError = IOError(.connectionRefused, "connect", where_)
        var next: UnsafeMutablePointer<addrinfo>? = first
        while let a = next {
            next = a.pointee.ai_next
            let type = a.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
            let fd: Int32
            do { fd = try retryingInterrupts("socket", where_) { socket(a.pointee.ai_family, type, a.pointee.ai_protocol) } }
            catch let e as IOError { lastError = e; continue }
            let sock = SocketDescriptor(raw: fd, address: where_)
            // A non-blocking connect reports EINPROGRESS (or EINTR) and goes on in the background.
            var code = Glibc.connect(fd, a.pointee.ai_addr, a.pointee.ai_addrlen) == 0 ? Errno(rawValue: 0) : Errno.current
            if code == .inProgress || code == .interrupted {
                let left = deadline - monotonicMillis()
                guard try waitWritable(sock, timeoutMilliseconds: Int32(clamping: max(0, left))) else {
                    Glibc.close(fd)
                    throw IOError(.timedOut, "connect", where_)
                }
                code = connectOutcome(fd)
            }
            if code.rawValue != 0 {
                Glibc.close(fd)
                lastError = IOError(code, "connect", where_)
                continue
            }
            do { try setNoDelay(sock) } catch { Glibc.close(fd); throw error }
            return sock
        }
        throw lastError
    }

    /// Waits until the socket has bytes (or EOF, or an error) to read. False on timeout.
    /// A negative timeout waits forever. An interrupted wait resumes with the time left.
    public static func waitReadable(_ sock: SocketDescriptor, timeoutMilliseconds: Int32) throws -> Bool {
        try pollOne(sock, Int16(POLLIN), timeoutMilliseconds)
    }

    /// Waits until the socket can take more bytes (or a connect in progress finished, or an
    /// error is pending). False on timeout. A negative timeout waits forever.
    public static func waitWritable(_ sock: SocketDescriptor, timeoutMilliseconds: Int32) throws -> Bool {
        try pollOne(sock, Int16(POLLOUT), timeoutMilliseconds)
    }

    /// One send(2) with MSG_NOSIGNAL; returns how many bytes it took. On a non-blocking socket whose
    /// buffer is full it throws `IOError(.again, …)`: wait with `waitWritable`, then send the rest.
    public static func sendSome(_ sock: SocketDescriptor, _ bytes: ArraySlice<UInt8>) throws -> Int {
        guard !bytes.isEmpty else { return 0 }
        return try bytes.withUnsafeBytes { buf in
            try retryingInterrupts("send", sock.address) { send(sock.raw, buf.baseAddress!, buf.count, Int32(MSG_NOSIGNAL)) }
        }
    }

    /// One recv(2). Returns 0 at end of stream.
    public static func receive(_ sock: SocketDescriptor, into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return 0 }
        return try retryingInterrupts("recv", sock.address) { recv(sock.raw, base, buffer.count, 0) }
    }

    /// Convenience: receives up to `maxBytes` into a new array (empty at end of stream).
    public static func receive(_ sock: SocketDescriptor, maxBytes: Int) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: maxBytes)
        var failure: (any Error)?
        let n = out.withUnsafeMutableBytes { buf -> Int in
            do throws { return try receive(sock, into: buf) } catch { failure = error; return 0 }
        }
        if let failure { throw failure }
        out.removeSubrange(n...)
        return out
    }

    /// Sends every byte (looping over short sends) with MSG_NOSIGNAL.
    public static func sendAll(_ sock: SocketDescriptor, _ bytes: [UInt8]) throws {
        var done = 0
        while done < bytes.count {
            var failure: (any Error)?
            let n = bytes.withUnsafeBytes { buf -> Int in
                do throws {
                    return try retryingInterrupts("send", sock.address) {
                        send(sock.raw, buf.baseAddress! + done, buf.count - done, Int32(MSG_NOSIGNAL))
                    }
                } catch { failure = error; return 0 }
            }
            if let failure { throw failure }
            done += n
        }
    }

    /// shutdown(2) both directions: wakes a thread blocked in recv or poll on this socket.
    public static func shutdown(_ sock: SocketDescriptor) {
        _ = Glibc.shutdown(sock.raw, Int32(SHUT_RDWR))
    }

    /// close(2), not retried on EINTR (the descriptor is gone either way on Linux).
    public static func close(_ sock: SocketDescriptor) {
        _ = Glibc.close(sock.raw)
    }

    /// Sets SO_RCVTIMEO and SO_SNDTIMEO: a blocked recv or send fails with EAGAIN after this long.
    public static func setTimeouts(_ sock: SocketDescriptor, milliseconds: Int) throws {
        var tv = timeval(tv_sec: milliseconds / 1000, tv_usec: (milliseconds % 1000) * 1000)
        for opt in [SO_RCVTIMEO, SO_SNDTIMEO] {
            _ = try retryingInterrupts("setsockopt(SO_RCVTIMEO/SO_SNDTIMEO)", sock.address) {
                setsockopt(sock.raw, SOL_SOCKET, opt, &tv, socklen_t(MemoryLayout<timeval>.size))
            }
        }
    }

    public static func setNoDelay(_ sock: SocketDescriptor) throws {
        try setOption(sock, Int32(IPPROTO_TCP), TCP_NODELAY, 1, "setsockopt(TCP_NODELAY)")
    }

    // MARK: - Helpers

    /// poll(2) on one socket. EINTR resumes the wait with the time left, not the whole timeout.
    private static func pollOne(_ sock: SocketDescriptor, _ events: Int16, _ timeoutMilliseconds: Int32) throws -> Bool {
        let deadline = timeoutMilliseconds < 0 ? nil : monotonicMillis() + Int64(timeoutMilliseconds)
        while true {
            var pfd = pollfd(fd: sock.raw, events: events, revents: 0)
            let wait = deadline.map { Int32(clamping: max(0, $0 - monotonicMillis())) } ?? -1
            let n = poll(&pfd, 1, wait)
            if n >= 0 { return n > 0 }
            let code = Errno.current
            if code != .interrupted { throw IOError(code, "poll", sock.address) }
        }
    }

    private static func monotonicMillis() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    private static func setOption(_ sock: SocketDescriptor, _ level: Int32, _ name: Int32, _ value: Int32, _ what: String) throws {
        var v = value
        _ = try retryingInterrupts(what, sock.address) {
            setsockopt(sock.raw, level, name, &v, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    private static func localPort(_ sock: SocketDescriptor) throws -> UInt16 {
        var addr = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = try retryingInterrupts("getsockname", sock.address) {
            withUnsafeMutablePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(sock.raw, $0, &len) }
            }
        }
        return UInt16(bigEndian: addr.sin_port)
    }

    private static func ipv4Address(host: String, port: UInt16) throws -> sockaddr_in {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(port).bigEndian
        let name = host == "localhost" ? "127.0.0.1" : host
        guard inet_pton(AF_INET, name, &addr.sin_addr) == 1 else {
            throw IOError(.invalid, "inet_pton (an IPv4 address like 127.0.0.1 is required)", host)
        }
        return addr
    }

    private static func describe(_ addr: sockaddr_in) -> String {
        var a = addr.sin_addr
        var buf = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        inet_ntop(AF_INET, &a, &buf, socklen_t(buf.count))
        let host = buf.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return "\(host):\(UInt16(bigEndian: addr.sin_port))"
    }
}

/// A host name that did not resolve (getaddrinfo reports its own codes, not errno).
public struct AddressResolutionError: Error, Sendable, CustomStringConvertible, Equatable {
    public var host: String
    /// gai_strerror's sentence, e.g. "Name or service not known".
    public var reason: String
    public init(host: String, reason: String) { self.host = host; self.reason = reason }
    public var description: String { "getaddrinfo \(host): \(reason)" }
}

/// Process-wide signal handling for servers.
public enum Signals {
    /// Writes to a closed socket must be EPIPE errors, not a process-killing SIGPIPE.
    public static func ignoreBrokenPipe() {
        signal(SIGPIPE, SIG_IGN)
    }

    /// Blocks SIGINT and SIGTERM in every thread and returns a function that waits for one of
    /// them and returns its name. Call it before starting other threads so they inherit the mask.
    public static func blockTermination() -> @Sendable () -> String {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &set, nil)
        let frozen = set
        return {
            var s = frozen
            var sig: Int32 = 0
            while sigwait(&s, &sig) != 0 {}
            return sig == SIGINT ? "SIGINT" : "SIGTERM"
        }
    }

    /// Sends a signal to a process (tests use SIGKILL for crash tests).
    public static func send(_ signal: Int32, to pid: Int32) throws {
        _ = try retryingInterrupts("kill(\(signal))", "pid \(pid)") { Glibc.kill(pid, signal) }
    }

    public static let kill: Int32 = SIGKILL
    public static let terminate: Int32 = SIGTERM
    public static let interrupt: Int32 = SIGINT
}
