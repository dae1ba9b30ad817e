#if canImport(Glibc)
import Glibc
#endif
import VaultCrypto

/// Blocking Unix-socket I/O for `SidecarClient`.
enum UnixSocket {
    /// Connects to the socket at `path`; with `timeout` (seconds), connecting, each send and
    /// each receive give up after that long. `peer` names the server in messages.
    static func connect(_ path: String, timeout: Double? = nil, peer: String = "the sidecar") throws(VaultError) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw VaultError(.sidecarUnreachable, "cannot make a socket") }
        if let timeout, timeout > 0 {
            var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1_000_000))
            for option in [SO_RCVTIMEO, SO_SNDTIMEO] { setsockopt(fd, SOL_SOCKET, option, &tv, socklen_t(MemoryLayout<timeval>.size)) }
        }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else {
            close(fd)
            throw VaultError(.sidecarUnreachable, "socket path is too long")
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { $0.copyBytes(from: bytes) }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else {
            let e = errno
            close(fd)
            throw VaultError(.sidecarUnreachable, "cannot connect to \(peer) at \(path): \(String(cString: strerror(e)))")
        }
        return fd
    }

    static func send(_ fd: Int32, _ bytes: [UInt8], peer: String = "the sidecar") throws(VaultError) {
        try bytes.withUnsafeBytes { b in Result { () throws(VaultError) in try send(fd, b, peer: peer) } }.get()
    }

    static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, peer: String = "the sidecar") throws(VaultError) {
        var at = 0
        while at < bytes.count {
            let n = Glibc.send(fd, bytes.baseAddress! + at, bytes.count - at, Int32(MSG_NOSIGNAL))
            if n < 0, errno == EINTR { continue }
            guard n > 0 else {
                let e = errno
                throw VaultError(.sidecarUnreachable, e == EAGAIN || e == EWOULDBLOCK ? "\(peer) took the request too long" : "\(peer) closed the connection")
            }
            at += n
        }
    }

    /// Reads until the peer closes (requests say `Connection: close`); answers are small.
    static func receiveAll(_ fd: Int32, limit: Int = 1 << 20, peer: String = "the sidecar") throws(VaultError) -> [UInt8] {
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 16384)
        while true {
            let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
            if n < 0, errno == EINTR { continue }
            guard n >= 0 else {
                let e = errno
                throw VaultError(.sidecarUnreachable, e == EAGAIN || e == EWOULDBLOCK ? "no answer from \(peer) in time" : "reading the answer of \(peer) failed")
            }
            if n == 0 { return out }
            out += buf[0..<n]
            guard out.count <= limit else { throw VaultError(.sidecarUnreachable, "the answer of \(peer) is too large") }
        }
    }
}

/// Parses an HTTP/1.1 response (Content-Length, chunked, or read-to-close bodies).
enum HTTPResponseParser {
    static func parse(_ raw: [UInt8]) throws(VaultError) -> SidecarClient.Answer {
        let sep: [UInt8] = [13, 10, 13, 10]
        guard let headEnd = (0..<max(0, raw.count - 3)).first(where: { raw[$0..<($0 + 4)].elementsEqual(sep) }) else {
            throw VaultError(.sidecarUnreachable, "the sidecar's answer is not HTTP")
        }
        let head = String(decoding: raw[..<headEnd], as: UTF8.self)
        let lines = head.split(separator: "\r\n")
        guard let statusLine = lines.first, statusLine.hasPrefix("HTTP/1."), let status = Int(statusLine.split(separator: " ").dropFirst().first ?? "") else {
            throw VaultError(.sidecarUnreachable, "the sidecar's answer is not HTTP")
        }
        var chunked = false
        for line in lines.dropFirst() {
            let l = line.lowercased()
            if l.hasPrefix("transfer-encoding:") && l.contains("chunked") { chunked = true }
        }
        var body = Array(raw[(headEnd + 4)...])
        if chunked { body = dechunk(body) }
        return SidecarClient.Answer(status: status, body: String(decoding: body, as: UTF8.self))
    }

    static func dechunk(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var i = 0
        while i < bytes.count {
            guard let lineEnd = (i..<max(i, bytes.count - 1)).first(where: { bytes[$0] == 13 && bytes[$0 + 1] == 10 }) else { break }
            let sizeText = String(decoding: bytes[i..<lineEnd], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText, radix: 16), size > 0 else { break }
            let start = lineEnd + 2
            guard start + size <= bytes.count else { break }
            out += bytes[start..<(start + size)]
            i = start + size + 2
        }
        return out
    }
}
