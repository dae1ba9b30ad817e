import Foundation
import Logging
import VaultCrypto

/// The socket file of a server: stale files, mode and group.
///
/// The socket is bound in a private directory (mode 0700, random name) beside its path, given
/// its group and mode there, and only then linked into place (`publish`): it is never visible at
/// its path with another mode or group, and nothing is chmod'ed or chown'ed through a path
/// another user could swap for a symlink.
public enum SocketFile {
    /// Removes a stale socket file (nothing listening); refuses when a server is still there.
    /// - Throws: `SOCKET_PATH_IN_USE`.
    public static func prepare(_ path: String) throws(VaultError) {
        var st = stat()
        guard lstat(path, &st) == 0 else { return }
        guard (st.st_mode & S_IFMT) == S_IFSOCK else {
            throw VaultError(.socketPathInUse, "\(path) exists and is not a socket")
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { buf in path.utf8CString.withUnsafeBytes { buf.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0.prefix(buf.count - 1))) } }
        let connected = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        } == 0
        if connected { throw VaultError(.socketPathInUse, "a server is already listening on \(path)") }
        unlink(path)
    }

    /// Resolves a group given by name or number.
    /// - Throws: `SOCKET_GROUP_UNKNOWN`.
    public static func groupID(_ text: String) throws(VaultError) -> gid_t {
        if let gid = gid_t(text) { return gid }
        guard let entry = getgrnam(text) else {
            throw VaultError(.socketGroupUnknown, "no group named \(JSONReader.printable(text))")
        }
        return entry.pointee.gr_gid
    }

    /// Only root may give a file to a group it is not in: refuse before binding anything.
    /// - Throws: `SOCKET_GROUP_UNKNOWN`.
    public static func checkCanChown(to gid: gid_t) throws(VaultError) {
        if geteuid() == 0 || getegid() == gid { return }
        var groups = [gid_t](repeating: 0, count: Int(getgroups(0, nil)))
        let n = getgroups(Int32(groups.count), &groups)
        guard n >= 0, groups.prefix(Int(n)).contains(gid) else {
            throw VaultError(.socketGroupUnknown, "this process is not in group \(gid), so it cannot give the socket to it")
        }
    }

    /// Where to bind the socket for `path`: `s` in a new private directory (0700, random name)
    /// in `path`'s directory. Give it to the server, then `publish` it; `discard` it when done.
    /// - Throws: `SOCKET_UNAVAILABLE` (the directory is missing or not writable), `IO_ERROR`.
    public static func privateBindPath(for path: String) throws(VaultError) -> String {
        let slash = path.lastIndex(of: "/")
        let dir = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        // The private name must fit sun_path (108 bytes with its NUL) as the socket's own would.
        let bindLength = (dir + "/.vsock-XXXXXX/s").utf8.count
        let limit = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1
        guard bindLength <= limit else {
            throw VaultError(
                .socketPathTooLong,
                "the socket's directory \(dir) is too long: a Unix socket path holds \(limit) bytes and the private bind name beside it needs \(bindLength)")
        }
        var template = Array((dir + "/.vsock-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            let number = errno
            switch number {
            case ENOENT, ENOTDIR:
                throw VaultError(.socketUnavailable, "cannot create the socket at \(path): its directory \(dir) does not exist (create it, or give --socket another path)")
            case EACCES, EPERM, EROFS:
                throw VaultError(.socketUnavailable, "cannot create the socket at \(path): this user may not write its directory \(dir) (\(String(cString: strerror(number)))); give the directory to this user, or --socket another path")
            default:
                throw VaultError(.ioError, "cannot make a private directory beside the socket \(path): \(String(cString: strerror(number)))")
            }
        }
        return String(cString: made) + "/s"
    }

    /// Gives the socket bound at `bound` (from `privateBindPath`) its group and mode inside its
    /// private directory, then links it at `path` (never replacing anything there) and removes
    /// the private name. False (and logged) when any step fails: the caller then closes the
    /// server rather than serve on a socket with the wrong owner or mode.
    public static func publish(_ bound: String, at path: String, mode: mode_t, group: gid_t?, logger: Logger) -> Bool {
        defer { discard(bound) }
        // Only this uid can change entries of the private directory: these paths cannot be swapped.
        var st = stat()
        guard lstat(bound, &st) == 0, (st.st_mode & S_IFMT) == S_IFSOCK else {
            logger.critical("the bound socket is missing from its private directory", metadata: ["path": "\(bound)"])
            return false
        }
        if let group, lchown(bound, uid_t.max, group) != 0 {
            logger.critical("cannot give the socket to its group", metadata: ["gid": "\(group)", "errno": "\(errno)"])
            return false
        }
        guard chmod(bound, mode) == 0 else {
            logger.critical("cannot set the socket's mode", metadata: ["mode": "\(String(mode, radix: 8))", "errno": "\(errno)"])
            return false
        }
        // link(2) never follows nor replaces what is at `path` (EEXIST): whatever appeared there
        // since `prepare` (a symlink, another server's socket) stays untouched and we stop.
        guard link(bound, path) == 0 else {
            logger.critical("cannot put the socket in place", metadata: ["path": "\(path)", "errno": "\(errno)"])
            return false
        }
        return true
    }

    /// Removes the private name and directory of a bound socket (after `publish`, or when the
    /// server did not start).
    public static func discard(_ bound: String) {
        unlink(bound)
        if let slash = bound.lastIndex(of: "/") { rmdir(String(bound[..<slash])) }
    }
}
