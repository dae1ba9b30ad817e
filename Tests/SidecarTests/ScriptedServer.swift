#if canImport(Glibc)
import Glibc
#endif
import Foundation
import VaultCrypto

/// A Unix socket server for tests (the gateway as the sidecar sees it): each connection runs
/// `serve` on a thread of its own. GatewayHTTPTests and GatewayFingerprinterTests script it.
final class ScriptedServer: @unchecked Sendable {
    let path: String
    private let listener: Int32
    private let lock = NSLock()
    private var _connections = 0
    private var _requests: [String] = []
    /// Connections still being served; `stop` shuts them down, so no serving thread outlives its test.
    private var open: Set<Int32> = []
    let serve: @Sendable (ScriptedServer, Int32) -> Void
    let listening: Bool

    var connections: Int { lock.withLock { _connections } }
    var requests: [String] { lock.withLock { _requests } }
    /// Connections whose `serve` has not returned yet.
    var serving: Int { lock.withLock { open.count } }

    init(listening: Bool = true, _ serve: @escaping @Sendable (ScriptedServer, Int32) -> Void) throws {
        path = NSTemporaryDirectory() + "gw-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        self.serve = serve
        self.listening = listening
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else { throw VaultError(.sidecarUnreachable, "cannot bind") }
        // Not listening: the socket file is there and connecting to it is refused.
        guard listening else { return }
        guard listen(listener, 16) == 0 else { throw VaultError(.sidecarUnreachable, "cannot listen") }
        Thread.detachNewThread { [self] in accept() }
    }

    /// Stops accepting and ends the connections still open: their threads' reads see the end and
    /// return. The accepting thread closes the listener itself, and each connection's thread its
    /// own socket (under the lock, so that a number shut down here is never one already reused by
    /// another test's socket).
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        lock.withLock { for fd in open { shutdown(fd, Int32(SHUT_RDWR)) } }
        if !listening { close(listener) }
        unlink(path)
    }

    private func accept() {
        while true {
            let fd = Glibc.accept(listener, nil, nil)
            guard fd >= 0 else {
                close(listener)
                return
            }
            lock.withLock { _connections += 1; open.insert(fd) }
            Thread.detachNewThread { [self] in
                serve(self, fd)
                lock.withLock { open.remove(fd); close(fd) }
            }
        }
    }

    /// Reads one request (head and `Content-Length` body) from `fd`: its text, or nil at the end.
    func readRequest(_ fd: Int32, _ buffer: inout [UInt8]) -> String? {
        var chunk = [UInt8](repeating: 0, count: 65536)
        var request: (head: Int, length: Int)?
        while request == nil || buffer.count < request!.head + request!.length {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
            guard n > 0 else { return nil }
            buffer += chunk[0..<n]
            if request == nil, let end = (0..<max(0, buffer.count - 3)).first(where: { buffer[$0..<($0 + 4)].elementsEqual([13, 10, 13, 10]) }) {
                let head = String(decoding: buffer[..<end], as: UTF8.self).lowercased()
                let length = head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
                request = (end + 4, length)
            }
        }
        let text = String(decoding: buffer[..<(request!.head + request!.length)], as: UTF8.self)
        buffer.removeFirst(request!.head + request!.length)
        lock.withLock { _requests.append(text) }
        return text
    }

    static func answer(_ fd: Int32, status: String = "200 OK", body: String) {
        let bytes = Array(body.utf8)
        let out = Array("HTTP/1.1 \(status)\r\nContent-Type: application/json\r\nContent-Length: \(bytes.count)\r\n\r\n".utf8) + bytes
        _ = out.withUnsafeBytes { Glibc.send(fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
    }
}

extension ScriptedServer {
    /// Writes `text` as it is (an answer cut short, odd framing).
    static func send(_ fd: Int32, raw text: String) {
        let out = Array(text.utf8)
        _ = out.withUnsafeBytes { Glibc.send(fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// The body of a request `readRequest` answered.
    static func body(of request: String) -> Data {
        guard let end = request.range(of: "\r\n\r\n") else { return Data() }
        return Data(request[end.upperBound...].utf8)
    }
}
