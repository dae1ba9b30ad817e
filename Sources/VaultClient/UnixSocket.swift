#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
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

    /// Reads one HTTP/1.1 answer (head, then a Content-Length or chunked body, or up to the close).
    /// Nil when the peer closed before sending a byte (a kept-alive connection the server had
    /// closed: the request was never read).
    static func receiveAnswer(_ fd: Int32, limit: Int = 1 << 20, peer: String = "the sidecar") throws(VaultError) -> (raw: [UInt8], keepAlive: Bool)? {
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 16384)
        var framing: HTTPResponseParser.Framing?
        while true {
            if let framing, let end = framing.end(in: out) { return (Array(out[..<end]), framing.keepAlive) }
            let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
            if n < 0, errno == EINTR { continue }
            if n < 0, errno == ECONNRESET, out.isEmpty { return nil }
            guard n >= 0 else {
                let e = errno
                throw VaultError(.sidecarUnreachable, e == EAGAIN || e == EWOULDBLOCK ? "no answer from \(peer) in time" : "reading the answer of \(peer) failed")
            }
            if n == 0 {
                if out.isEmpty { return nil }
                guard framing == nil || framing?.toClose == true else { throw VaultError(.sidecarUnreachable, "\(peer) closed the connection mid-answer") }
                return (out, false)
            }
            out += buf[0..<n]
            guard out.count <= limit else { throw VaultError(.sidecarUnreachable, "the answer of \(peer) is too large") }
            if framing == nil { framing = HTTPResponseParser.framing(out) }
        }
    }
}

/// Idle kept-alive connections to one socket, reused by the calls of a `SidecarClient` and its
/// copies (HTTP/1.1 keep-alive: one request at a time per connection).
final class ConnectionPool: Sendable {
    private let idle = Mutex<[Int32]>([])
    let maxIdle: Int

    init(maxIdle: Int) { self.maxIdle = maxIdle }

    deinit { for fd in idle.withLock({ $0 }) { close(fd) } }

    /// An idle connection, if any.
    func take() -> Int32? { idle.withLock { $0.popLast() } }

    /// Returns a connection after a whole answer was read on it.
    func give(_ fd: Int32) {
        let kept = idle.withLock { idle -> Bool in
            guard idle.count < maxIdle else { return false }
            idle.append(fd)
            return true
        }
        if !kept { close(fd) }
    }
}

/// Parses an HTTP/1.1 response (Content-Length, chunked, or read-to-close bodies).
enum HTTPResponseParser {
    /// How an answer's body ends, from its head.
    struct Framing {
        let bodyStart: Int
        var contentLength: Int?
        var chunked = false
        var keepAlive = true
        var toClose: Bool { contentLength == nil && !chunked }

        /// The answer's length once `bytes` holds all of it.
        func end(in bytes: [UInt8]) -> Int? {
            if let contentLength { return bytes.count >= bodyStart + contentLength ? bodyStart + contentLength : nil }
            guard chunked, bytes.count >= bodyStart + 5 else { return nil }
            // The last chunk: "0\r\n\r\n" (no trailers are sent by the servers).
            let tail: [UInt8] = [48, 13, 10, 13, 10]
            var i = bodyStart
            while i + 2 <= bytes.count {
                guard let lineEnd = (i..<(bytes.count - 1)).first(where: { bytes[$0] == 13 && bytes[$0 + 1] == 10 }) else { return nil }
                let sizeText = String(decoding: bytes[i..<lineEnd], as: UTF8.self).split(separator: ";").first ?? ""
                guard let size = Int(sizeText, radix: 16) else { return nil }
                if size == 0 {
                    return bytes.count >= lineEnd + 4 && Array(bytes[(lineEnd - 1)..<(lineEnd + 4)]).elementsEqual(tail) ? lineEnd + 4 : nil
                }
                i = lineEnd + 2 + size + 2
            }
            return nil
        }
    }

    static func headEnd(_ raw: [UInt8]) -> Int? {
        let sep: [UInt8] = [13, 10, 13, 10]
        return (0..<max(0, raw.count - 3)).first(where: { raw[$0..<($0 + 4)].elementsEqual(sep) })
    }

    /// The framing of an answer whose head `raw` holds, or nil while the head is incomplete.
    static func framing(_ raw: [UInt8]) -> Framing? {
        guard let headEnd = headEnd(raw) else { return nil }
        var f = Framing(bodyStart: headEnd + 4)
        let lines = String(decoding: raw[..<headEnd], as: UTF8.self).split(separator: "\r\n")
        // 1xx, 204 and 304 answers have no body whatever their headers say (RFC 9112 §6.3).
        let status = lines.first.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 200
        for line in lines.dropFirst() {
            let l = line.lowercased()
            if l.hasPrefix("transfer-encoding:") && l.contains("chunked") { f.chunked = true }
            if l.hasPrefix("content-length:") {
                let value = l.dropFirst("content-length:".count)
                // Spaces and tabs around the digits (the usual case) without Foundation's trimming.
                var digits = value
                while let c = digits.first, c == " " || c == "\t" { digits = digits.dropFirst() }
                while let c = digits.last, c == " " || c == "\t" { digits = digits.dropLast() }
                f.contentLength = Int(digits) ?? Int(value.trimmingCharacters(in: .whitespaces))
            }
            if l.hasPrefix("connection:") && l.contains("close") { f.keepAlive = false }
        }
        if f.chunked { f.contentLength = nil }
        if status < 200 || status == 204 || status == 304 {
            f.chunked = false
            f.contentLength = 0
        }
        if f.toClose { f.keepAlive = false }
        return f
    }

    static func parse(_ raw: [UInt8], peer: String = "the sidecar") throws(VaultError) -> SidecarClient.Answer {
        guard let headEnd = headEnd(raw) else {
            throw VaultError(.sidecarUnreachable, "the answer of \(peer) is not HTTP")
        }
        let head = String(decoding: raw[..<headEnd], as: UTF8.self)
        let lines = head.split(separator: "\r\n")
        guard let statusLine = lines.first, statusLine.hasPrefix("HTTP/1."), let status = Int(statusLine.split(separator: " ").dropFirst().first ?? "") else {
            throw VaultError(.sidecarUnreachable, "the answer of \(peer) is not HTTP")
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
