#if canImport(Glibc)
import Glibc
#endif
internal import CSodium

/// Passphrase protection of secret key files (docs/key-files.md): one line
/// `vault:skp:v1:<base64 of salt(16) ‖ opslimit(8, LE) ‖ memlimit(8, LE) ‖ nonce(24) ‖ secretbox(32-byte key)(48)>`.
///
/// The box key is Argon2id (`crypto_pwhash`, ALG_ARGON2ID13) of the passphrase under the salt with
/// the recorded limits; the box is `crypto_secretbox_easy` (XSalsa20-Poly1305). The limits are read
/// back from the file but bounded (opslimit ≤ 16, memlimit ≤ 1 GiB), so a crafted file cannot make
/// the loader spin or exhaust memory.
public enum ProtectedKey {
    /// Argon2id cost presets, as libsodium names them.
    public enum Cost: String, Sendable, CaseIterable {
        case interactive, moderate, sensitive

        var limits: (ops: UInt64, mem: UInt64) {
            switch self {
            case .interactive: (UInt64(crypto_pwhash_opslimit_interactive()), UInt64(crypto_pwhash_memlimit_interactive()))
            case .moderate: (UInt64(crypto_pwhash_opslimit_moderate()), UInt64(crypto_pwhash_memlimit_moderate()))
            case .sensitive: (UInt64(crypto_pwhash_opslimit_sensitive()), UInt64(crypto_pwhash_memlimit_sensitive()))
            }
        }
    }

    static let saltBytes = 16
    static let nonceBytes = 24
    static let macBytes = 16
    static let payloadBytes = saltBytes + 16 + nonceBytes + 32 + macBytes
    static let maxOps: UInt64 = 16
    static let maxMem: UInt64 = 1 << 30

    /// Encrypts 32 secret bytes under `passphrase` into a `vault:skp:v1:` line (in wiped memory).
    static func seal(_ secret: SecureBytes, passphrase: SecureBytes, cost: Cost) throws(VaultError) -> SecureBytes {
        Sodium.ensureInitialised()
        precondition(secret.count == 32)
        let (ops, mem) = cost.limits
        var payload = [UInt8](repeating: 0, count: payloadBytes)
        randombytes_buf(&payload, saltBytes)
        for i in 0..<8 {
            payload[saltBytes + i] = UInt8(truncatingIfNeeded: ops >> (8 * UInt64(i)))
            payload[saltBytes + 8 + i] = UInt8(truncatingIfNeeded: mem >> (8 * UInt64(i)))
        }
        payload.withUnsafeMutableBytes { p in randombytes_buf(p.baseAddress! + saltBytes + 16, nonceBytes) }
        let boxKey = try derive(passphrase: passphrase, salt: Array(payload[0..<saltBytes]), ops: ops, mem: mem)
        payload.withUnsafeMutableBytes { p in
            let base = p.baseAddress!.assumingMemoryBound(to: UInt8.self)
            secret.withUnsafeBytes { s in
                boxKey.withUnsafeBytes { k in
                    _ = crypto_secretbox_easy(
                        base + saltBytes + 16 + nonceBytes, s.baseAddress!.assumingMemoryBound(to: UInt8.self), 32,
                        base + saltBytes + 16, k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
        }
        let prefix = Array(KeyKind.protectedSecret.rawValue.utf8)
        return SecureBytes(capacity: prefix.count + Base64.encodedLength(payloadBytes) + 1) { out in
            out.copyBytes(from: prefix)
            let n = payload.withUnsafeBytes { Base64.encode($0, into: UnsafeMutableRawBufferPointer(rebasing: out[prefix.count...])) }
            out[prefix.count + n] = 10
            return prefix.count + n + 1
        }
    }

    /// Opens the payload of a `vault:skp:v1:` line.
    /// - Throws: `KEY_FILE_MALFORMED`, `KEY_PASSPHRASE_WRONG`.
    static func open(payload: UnsafeRawBufferPointer, passphrase: SecureBytes) throws(VaultError) -> SecureBytes {
        let (raw, ops, mem) = try header(payload: payload)
        let boxKey = try derive(passphrase: passphrase, salt: Array(raw[0..<saltBytes]), ops: ops, mem: mem)
        var ok = false
        let secret = SecureBytes(capacity: 32) { out in
            ok = raw.withUnsafeBytes { r in
                boxKey.withUnsafeBytes { k in
                    let base = r.baseAddress!.assumingMemoryBound(to: UInt8.self)
                    return crypto_secretbox_open_easy(
                        out.baseAddress!.assumingMemoryBound(to: UInt8.self), base + saltBytes + 16 + nonceBytes, UInt64(32 + macBytes),
                        base + saltBytes + 16, k.baseAddress!.assumingMemoryBound(to: UInt8.self)) == 0
                }
            }
            return ok ? 32 : 0
        }
        guard ok else { throw VaultError(.keyPassphraseWrong, "the passphrase does not open this key (or the file was altered)") }
        return secret
    }

    /// Decodes the payload of a `vault:skp:v1:` line and checks its Argon2id limits, without
    /// deriving anything (the fuzz target reaches the parser through this).
    /// - Throws: `KEY_FILE_MALFORMED`.
    static func header(payload: UnsafeRawBufferPointer) throws(VaultError) -> (raw: [UInt8], ops: UInt64, mem: UInt64) {
        var raw = [UInt8](repeating: 0, count: Base64.maxDecodedLength(payload.count))
        guard let n = raw.withUnsafeMutableBytes({ Base64.decode(payload, into: $0) }), n == payloadBytes else {
            throw VaultError(.keyFileMalformed, "a protected secret key line holds base64 of exactly \(payloadBytes) bytes")
        }
        raw.removeLast(raw.count - n)
        var ops: UInt64 = 0, mem: UInt64 = 0
        for i in (0..<8).reversed() {
            ops = ops << 8 | UInt64(raw[saltBytes + i])
            mem = mem << 8 | UInt64(raw[saltBytes + 8 + i])
        }
        let (minOps, minMem) = Cost.interactive.limits
        guard ops >= minOps, ops <= maxOps, mem >= minMem, mem <= maxMem else {
            throw VaultError(.keyFileMalformed, "the protected key's Argon2id limits are outside the accepted range")
        }
        return (raw, ops, mem)
    }

    private static func derive(passphrase: SecureBytes, salt: [UInt8], ops: UInt64, mem: UInt64) throws(VaultError) -> SecureBytes {
        guard passphrase.count > 0 else { throw VaultError(.keyPassphraseWrong, "the passphrase is empty") }
        var failed = false
        let key = SecureBytes(capacity: 32) { out in
            let r = passphrase.withUnsafeBytes { p in
                crypto_pwhash(
                    out.baseAddress!.assumingMemoryBound(to: UInt8.self), 32,
                    p.baseAddress!.assumingMemoryBound(to: CChar.self), UInt64(p.count),
                    salt, ops, Int(mem), crypto_pwhash_alg_argon2id13())
            }
            failed = r != 0
            return failed ? 0 : 32
        }
        if failed { throw VaultError(.ioError, "Argon2id could not run (out of memory?)") }
        return key
    }

    // MARK: - Passphrases

    /// Reads a passphrase file into wiped memory: its first line (one trailing newline dropped).
    /// - Throws: `KEY_FILE_NOT_FOUND`, `KEY_FILE_UNREADABLE`, `KEY_FILE_PERMISSIONS` (group or
    ///   others may read it), `KEY_PASSPHRASE_WRONG` for an empty passphrase.
    public static func readPassphrase(path: String) throws(VaultError) -> SecureBytes {
        let contents = try KeyFileIO.read(path: path, private: true)
        let line = contents.withUnsafeBytes { b in
            var end = b.firstIndex(of: 10) ?? b.count
            if end > 0, b[end - 1] == 13 { end -= 1 }
            return SecureBytes(copying: UnsafeRawBufferPointer(rebasing: b[0..<end]))
        }
        guard line.count > 0 else { throw VaultError(.keyPassphraseWrong, "the passphrase file \(path) is empty", field: path) }
        return line
    }

    /// Reads a passphrase from the terminal with echo off; nil when there is no terminal.
    public static func promptPassphrase(_ prompt: String) -> SecureBytes? {
        let fd = Glibc.open("/dev/tty", O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var old = termios()
        guard tcgetattr(fd, &old) == 0 else { return nil }
        var quiet = old
        quiet.c_lflag &= ~tcflag_t(ECHO)
        _ = tcsetattr(fd, TCSAFLUSH, &quiet)
        defer {
            _ = tcsetattr(fd, TCSAFLUSH, &old)
            _ = write(fd, "\n", 1)
        }
        _ = prompt.withCString { write(fd, $0, strlen($0)) }
        return SecureBytes(capacity: 1024) { out in
            var n = 0
            while n < out.count {
                var c: UInt8 = 0
                guard read(fd, &c, 1) == 1, c != 10 else { break }
                out[n] = c
                n += 1
            }
            return n
        }
    }
}

extension KeyFiles {
    /// Writes a secret key file protected by `passphrase` (mode 0600); refuses to overwrite.
    /// - Throws: `KEY_FILE_EXISTS`, `KEY_FILE_UNREADABLE`.
    static func writeProtected(_ secret: SecureBytes, passphrase: SecureBytes, cost: ProtectedKey.Cost, path: String) throws(VaultError) {
        let line = try ProtectedKey.seal(secret, passphrase: passphrase, cost: cost)
        try line.withUnsafeBytes { (b) throws(VaultError) in try KeyFileIO.createExclusive(path: path, mode: 0o600, bytes: b) }
    }

    /// Rewrites the secret key file at `path` protected by `passphrase` (or, with nil, in clear),
    /// through a new file renamed over it. The key stays the same (and so does its kid).
    /// - Throws: key-file codes, `KEY_PASSPHRASE_REQUIRED`, `KEY_PASSPHRASE_WRONG`, `IO_ERROR`.
    public static func reprotect(path: String, current: SecureBytes?, new: SecureBytes?, cost: ProtectedKey.Cost) throws(VaultError) {
        let key = try SecretKey(path: path, passphrase: current)
        try KeyFileIO.checkDirectory(parentDirectory(of: path))
        // A random name, created exclusively without following symlinks (createExclusive).
        let tmp = path + ".new-" + RandomID.make(prefix: "", bytes: 12)
        if let new {
            try writeProtected(key.bytes, passphrase: new, cost: cost, path: tmp)
        } else {
            try writeSecret(key.bytes, kind: .secret, path: tmp)
        }
        guard rename(tmp, path) == 0 else {
            let e = errno
            unlink(tmp)
            throw VaultError(.ioError, "cannot replace \(path): \(KeyFileIO.errnoText(e))", field: path)
        }
        KeyFileIO.syncDirectory(parentDirectory(of: path))
    }

    static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
