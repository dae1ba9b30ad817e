#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// POSIX file handling for key files: reads into wiped memory, checks modes, writes exclusively.
enum KeyFileIO {
    /// Key files are one short line; anything bigger is not a key file.
    static let maxKeyFileBytes = 4096

    /// Reads a whole key file into `SecureBytes`. When `private` is true, refuses a file that group
    /// or others may read.
    static func read(path: String, private isPrivate: Bool, expecting kind: KeyKind? = nil) throws(VaultError) -> SecureBytes {
        var mode: mode_t = 0
        return try read(path: path, private: isPrivate, expecting: kind, mode: &mode)
    }

    /// The same, also giving the mode of the file read (from `fstat` of the open file).
    static func read(path: String, private isPrivate: Bool, expecting kind: KeyKind? = nil, mode: inout mode_t) throws(VaultError) -> SecureBytes {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            let e = errno
            if e == ENOENT { throw VaultError(.keyFileNotFound, "no key file at \(path)", field: path) }
            throw VaultError(.keyFileUnreadable, "cannot open key file \(path): \(errnoText(e))", field: path)
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            throw VaultError(.keyFileUnreadable, "cannot stat key file \(path): \(errnoText(errno))", field: path)
        }
        guard (st.st_mode & S_IFMT) == S_IFREG else {
            throw VaultError(.keyFileUnreadable, "\(path) is not a regular file", field: path)
        }
        mode = st.st_mode & 0o7777
        let tooOpen = isPrivate && st.st_mode & 0o077 != 0
        let contents = try readContents(fd: fd, path: path)
        if tooOpen {
            // Say what the file is first: a public key given where a secret one belongs is the
            // wrong kind, not a permissions problem.
            if let kind {
                _ = try contents.withUnsafeBytes { (raw) throws(VaultError) in try KeyText.payload(raw, expecting: kind) }
            }
            throw VaultError(
                .keyFilePermissions,
                "key file \(path) has mode \(octal(st.st_mode & 0o777)); a secret key file must not be readable by group or others (chmod 600 \(path))",
                field: path)
        }
        return contents
    }

    private static func readContents(fd: Int32, path: String) throws(VaultError) -> SecureBytes {
        try SecureBytes(capacity: maxKeyFileBytes + 1) { (out) throws(VaultError) -> Int in
            var total = 0
            while total < out.count {
                let n = Glibc.read(fd, out.baseAddress! + total, out.count - total)
                if n == 0 { break }
                if n < 0 {
                    if errno == EINTR { continue }
                    throw VaultError(.keyFileUnreadable, "cannot read key file \(path): \(errnoText(errno))", field: path)
                }
                total += n
            }
            guard total <= maxKeyFileBytes else {
                throw VaultError(.keyFileMalformed, "\(path) is too large to be a key file", field: path)
            }
            return total
        }
    }

    /// Creates `path` exclusively with exactly `mode` (umask ignored), writes `bytes`, fsyncs.
    static func createExclusive(path: String, mode: mode_t, bytes: UnsafeRawBufferPointer) throws(VaultError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode)
        guard fd >= 0 else {
            let e = errno
            if e == EEXIST { throw VaultError(.keyFileExists, "\(path) exists; refusing to overwrite it", field: path) }
            throw VaultError(.keyFileUnreadable, "cannot create \(path): \(errnoText(e))", field: path)
        }
        let ok = fillAndSync(fd, mode: mode, bytes: bytes)
        let e = errno
        close(fd)
        guard ok else {
            unlink(path)
            throw VaultError(.keyFileUnreadable, "cannot write \(path): \(errnoText(e))", field: path)
        }
    }

    /// Sets `mode` on a new file, writes all of `bytes` and fsyncs; false (errno set) on failure.
    private static func fillAndSync(_ fd: Int32, mode: mode_t, bytes: UnsafeRawBufferPointer) -> Bool {
        guard fchmod(fd, mode) == 0 else { return false }
        var written = 0
        while written < bytes.count {
            let n = write(fd, bytes.baseAddress! + written, bytes.count - written)
            if n < 0, errno == EINTR { continue }
            if n <= 0 { return false }
            written += n
        }
        return fsync(fd) == 0
    }

    /// Refuses a directory that group or others may write (sticky `/tmp` included), or that
    /// belongs to another user than this one or root: another user could plant files or symlinks
    /// where key files and the ring are written.
    /// - Throws: `KEYS_DIRECTORY_UNSAFE`, `KEY_FILE_NOT_FOUND` (no such directory).
    static func checkDirectory(_ dir: String) throws(VaultError) {
        var st = stat()
        guard stat(dir, &st) == 0 else {
            throw VaultError(.keyFileNotFound, "cannot open the keys directory \(dir): \(errnoText(errno))", field: dir)
        }
        guard (st.st_mode & S_IFMT) == S_IFDIR else {
            throw VaultError(.keysDirectoryUnsafe, "\(dir) is not a directory", field: dir)
        }
        // Its owner may write it whatever the mode: it must be this user or root.
        guard st.st_uid == geteuid() || st.st_uid == 0 else {
            throw VaultError(
                .keysDirectoryUnsafe,
                "the keys directory \(dir) belongs to uid \(st.st_uid), neither this user (\(geteuid())) nor root: its owner could plant files or symlinks there; refusing to write keys there",
                field: dir)
        }
        guard st.st_mode & 0o022 == 0 else {
            throw VaultError(
                .keysDirectoryUnsafe,
                "the keys directory \(dir) has mode \(octal(st.st_mode & 0o7777)): group or others may write it; refusing to write keys there (chmod go-w \(dir))",
                field: dir)
        }
    }

    /// Replaces `path` atomically with `bytes`: a new file under a random name in the same
    /// directory (O_CREAT|O_EXCL|O_NOFOLLOW, `mode` from creation on), fsync, rename over `path`,
    /// fsync of the directory. A symlink planted anywhere is never followed.
    /// - Throws: `IO_ERROR`.
    static func replace(path: String, mode: mode_t, bytes: UnsafeRawBufferPointer) throws(VaultError) {
        let dir = parentDirectory(of: path)
        var tmp = ""
        var fd: Int32 = -1
        for _ in 0..<8 {
            tmp = path + ".tmp-" + RandomID.make(prefix: "", bytes: 12)
            fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
            if fd >= 0 || errno != EEXIST { break }
        }
        guard fd >= 0 else { throw VaultError(.ioError, "cannot create a file beside \(path): \(errnoText(errno))", field: path) }
        var ok = fillAndSync(fd, mode: mode, bytes: bytes)
        var e = errno
        close(fd)
        if ok {
            ok = rename(tmp, path) == 0
            e = errno
        }
        guard ok else {
            unlink(tmp)
            throw VaultError(.ioError, "cannot write \(path): \(errnoText(e))", field: path)
        }
        syncDirectory(dir)
    }

    static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// True if something exists at `path`.
    static func exists(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }

    /// fsync a directory so new entries survive a crash.
    static func syncDirectory(_ path: String) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd >= 0 { _ = fsync(fd); close(fd) }
    }

    static func errnoText(_ e: Int32) -> String { String(cString: strerror(e)) }

    static func octal(_ mode: mode_t) -> String {
        let s = String(mode, radix: 8)
        return String(repeating: "0", count: max(0, 4 - s.count)) + s
    }
}
