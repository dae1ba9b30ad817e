import Glibc

/// A small secret read from a file straight into wiped memory (a webhook signing secret): the
/// bytes without trailing line breaks (LF, CR), and the mode of the file that was read, for the
/// caller's own rule.
public enum SecretFile {
    /// - Throws: `KEY_FILE_NOT_FOUND`, `KEY_FILE_UNREADABLE` (not a regular file), `KEY_FILE_MALFORMED` (over 4 KiB).
    public static func read(path: String) throws(VaultError) -> (bytes: SecureBytes, mode: mode_t) {
        var mode: mode_t = 0
        let contents = try KeyFileIO.read(path: path, private: false, mode: &mode)
        let trimmed = contents.withUnsafeBytes { b in
            var end = b.count
            while end > 0, b[end - 1] == 0x0a || b[end - 1] == 0x0d { end -= 1 }
            return SecureBytes(copying: UnsafeRawBufferPointer(rebasing: b[0..<end]))
        }
        return (trimmed, mode)
    }
}
