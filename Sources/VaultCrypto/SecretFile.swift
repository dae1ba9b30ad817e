import Glibc

/// A small secret read from a file straight into wiped memory (a webhook signing secret): the
/// bytes without trailing whitespace, and the file's mode for the caller's own rule.
public enum SecretFile {
    /// - Throws: `KEY_FILE_NOT_FOUND`, `KEY_FILE_UNREADABLE` (not a regular file, over 4 KiB).
    public static func read(path: String) throws(VaultError) -> (bytes: SecureBytes, mode: mode_t) {
        let contents = try KeyFileIO.read(path: path, private: false)
        var st = stat()
        guard stat(path, &st) == 0 else { throw VaultError(.keyFileUnreadable, "cannot stat \(path)", field: path) }
        let trimmed = contents.withUnsafeBytes { b in
            var end = b.count
            while end > 0, [0x20, 0x0a, 0x0d, 0x09].contains(b[end - 1]) { end -= 1 }
            return SecureBytes(copying: UnsafeRawBufferPointer(rebasing: b[0..<end]))
        }
        return (trimmed, st.st_mode & 0o7777)
    }
}
