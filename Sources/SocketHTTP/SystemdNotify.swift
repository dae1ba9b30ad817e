#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// The systemd notification protocol (`sd_notify(3)`), without libsystemd: one datagram of
/// `KEY=value` lines sent to the `AF_UNIX` `SOCK_DGRAM` socket named by `$NOTIFY_SOCKET`, a path
/// or, starting with `@`, a name in the abstract namespace. Units with `Type=notify` count the
/// server started on `READY=1` (`SocketServer.run` sends it once the socket accepts connections)
/// and see `STOPPING=1` when it begins its graceful shutdown (`ShutdownNotice`). Without
/// `$NOTIFY_SOCKET` (not run by systemd, or another `Type=`) nothing is sent.
public enum SystemdNotify {
    /// The server accepts connections: `READY=1` and a status line for `systemctl status`.
    @discardableResult
    public static func ready(status: String) -> Bool { send("READY=1\nSTATUS=" + oneLine(status)) }

    /// The server is shutting down gracefully: `STOPPING=1` and a status line.
    @discardableResult
    public static func stopping(status: String) -> Bool { send("STOPPING=1\nSTATUS=" + oneLine(status)) }

    /// Sends `state` (newline-separated `KEY=value` assignments) to `$NOTIFY_SOCKET`.
    /// - Returns: whether it was sent: false without `$NOTIFY_SOCKET`, for an address that is not
    ///   a path or an abstract name (`vsock:`), or when the send failed (never fatal: systemd then
    ///   times the start out and says so).
    @discardableResult
    public static func send(_ state: String, environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        guard let address = environment["NOTIFY_SOCKET"], let target = socketAddress(address) else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var (addr, length) = target
        let bytes = Array(state.utf8)
        let sent = withUnsafePointer(to: &addr) { a in
            a.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                bytes.withUnsafeBytes { b in sendto(fd, b.baseAddress, b.count, Int32(MSG_NOSIGNAL), sa, length) }
            }
        }
        return sent == bytes.count
    }

    /// The `sockaddr_un` and its length for a `$NOTIFY_SOCKET` value: `/path` (with its NUL), or
    /// `@name` (a leading NUL, then the name, no terminating NUL: the length says where it ends).
    /// Nil for anything else or a name too long for `sun_path`.
    static func socketAddress(_ value: String) -> (sockaddr_un, socklen_t)? {
        var name = Array(value.utf8)
        let abstract = name.first == UInt8(ascii: "@")
        guard abstract || name.first == UInt8(ascii: "/"), name.count > 1, !name.contains(0) else { return nil }
        if abstract { name[0] = 0 } else { name.append(0) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        guard name.count <= MemoryLayout.size(ofValue: addr.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &addr.sun_path) { $0.copyBytes(from: name) }
        let offset = MemoryLayout<sockaddr_un>.offset(of: \.sun_path) ?? 2
        return (addr, socklen_t(offset + name.count))
    }

    /// A status is one line: newlines would start new assignments.
    static func oneLine(_ text: String) -> String {
        String(text.map { $0.isNewline ? " " : $0 })
    }
}
