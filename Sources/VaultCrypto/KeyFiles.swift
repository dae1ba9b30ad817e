#if canImport(Glibc)
import Glibc
#endif
internal import CSodium

/// Key files on disk (docs/key-files.md): `<kid>.pub` (0644), `<kid>.key` (0600), and the
/// fingerprint key.
public enum KeyFiles {
    /// The file name of the fingerprint key inside a keys directory.
    public static let fingerprintKeyFileName = "fingerprint.fk"

    /// Loads a public key file.
    /// - Throws: `KEY_FILE_NOT_FOUND`, `KEY_FILE_UNREADABLE`, `KEY_FILE_WRONG_KIND`, `KEY_FILE_MALFORMED`.
    public static func loadPublicKey(path: String) throws(VaultError) -> PublicKey {
        let contents = try KeyFileIO.read(path: path, private: false)
        do throws(VaultError) {
            return try contents.withUnsafeBytes { (raw) throws(VaultError) -> PublicKey in
                let payload = try KeyText.payload(raw, expecting: .public)
                var out = [UInt8](repeating: 0, count: Base64.maxDecodedLength(payload.count))
                guard let n = out.withUnsafeMutableBytes({ Base64.decode(payload, into: $0) }), n == Sodium.boxPublicKeyBytes else {
                    throw VaultError(.keyFileMalformed, "a public key line holds base64 of exactly 32 bytes")
                }
                return try PublicKey(rawBytes: Array(out.prefix(n)))
            }
        } catch {
            throw VaultError(error.code, "\(path): \(error.message)", field: path)
        }
    }

    /// Loads a fingerprint key file (mode must not allow group/others).
    /// - Throws: as `loadPublicKey`, plus `KEY_FILE_PERMISSIONS`.
    public static func loadFingerprintKey(path: String) throws(VaultError) -> FingerprintKey {
        let contents = try KeyFileIO.read(path: path, private: true, expecting: .fingerprint)
        do throws(VaultError) {
            return FingerprintKey(bytes: try decodeSecret(contents, kind: .fingerprint))
        } catch {
            throw VaultError(error.code, "\(path): \(error.message)", field: path)
        }
    }

    /// Makes a new X25519 pair and writes `<dir>/<kid>.pub` (0644) and `<dir>/<kid>.key` (0600).
    /// Refuses to overwrite either file. Returns the new key's id.
    /// - Throws: `KEY_FILE_EXISTS`, `KEY_FILE_UNREADABLE`.
    /// With `passphrase`, the secret key file is protected (`vault:skp:v1:`, Argon2id at `cost`).
    @discardableResult
    public static func generateKeyPair(
        directory: String, passphrase: SecureBytes? = nil, cost: ProtectedKey.Cost = .moderate
    ) throws(VaultError) -> KeyID {
        try KeyFileIO.checkDirectory(directory)
        Sodium.ensureInitialised()
        var publicBytes = [UInt8](repeating: 0, count: Sodium.boxPublicKeyBytes)
        let secret = SecureBytes(capacity: Sodium.boxSecretKeyBytes) { out in
            _ = crypto_box_keypair(&publicBytes, out.baseAddress!.assumingMemoryBound(to: UInt8.self))
            return out.count
        }
        let publicKey = try PublicKey(rawBytes: publicBytes)
        let pubPath = directory + "/" + publicKey.kid.rawValue + ".pub"
        let keyPath = directory + "/" + publicKey.kid.rawValue + ".key"
        for path in [pubPath, keyPath] where KeyFileIO.exists(path) {
            throw VaultError(.keyFileExists, "\(path) exists; refusing to overwrite it", field: path)
        }
        if let passphrase {
            try writeProtected(secret, passphrase: passphrase, cost: cost, path: keyPath)
        } else {
            try writeSecret(secret, kind: .secret, path: keyPath)
        }
        let line = Array((publicKey.text + "\n").utf8)
        try line.withUnsafeBytes { b in
            Result { () throws(VaultError) in try KeyFileIO.createExclusive(path: pubPath, mode: 0o644, bytes: b) }
        }.get()
        KeyFileIO.syncDirectory(directory)
        return publicKey.kid
    }

    /// Writes a new fingerprint key (32 random bytes) at `path`, mode 0600; refuses to overwrite.
    /// - Throws: `KEY_FILE_EXISTS`, `KEY_FILE_UNREADABLE`.
    public static func generateFingerprintKey(path: String) throws(VaultError) {
        try KeyFileIO.checkDirectory(KeyFileIO.parentDirectory(of: path))
        try writeSecret(SecureBytes.random(count: 32), kind: .fingerprint, path: path)
    }

    /// Copies the fingerprint key at `source` to `destination` (mode 0600, created exclusively).
    /// - Returns: true when written, false when `destination` already holds the same key.
    /// - Throws: the codes of `loadFingerprintKey`; `KEYS_DIRECTORY_UNSAFE` for a destination
    ///   directory group or others may write; `KEY_FILE_EXISTS` when `destination` holds a
    ///   different fingerprint key (two keys would split every fingerprint in two).
    public static func copyFingerprintKey(from source: String, to destination: String) throws(VaultError) -> Bool {
        let key = try loadFingerprintKey(path: source)
        try KeyFileIO.checkDirectory(KeyFileIO.parentDirectory(of: destination))
        if access(destination, F_OK) == 0 {
            let existing = try loadFingerprintKey(path: destination)
            let probe: [UInt8] = Array("0000000000000000".utf8)
            let same = probe.withUnsafeBytes { p in existing.fingerprint(ofDigits: p) == key.fingerprint(ofDigits: p) }
            guard same else {
                throw VaultError(.keyFileExists, "\(destination) holds a different fingerprint key: keep one (both would split every fingerprint)", field: destination)
            }
            return false
        }
        try writeSecret(key.bytes, kind: .fingerprint, path: destination)
        KeyFileIO.syncDirectory(KeyFileIO.parentDirectory(of: destination))
        return true
    }

    /// Whether the file at `path` starts like a passphrase-protected secret key.
    public static func isProtected(path: String) -> Bool {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let prefix = Array(KeyKind.protectedSecret.rawValue.utf8)
        var head = [UInt8](repeating: 0, count: prefix.count)
        return read(fd, &head, head.count) == head.count && head == prefix
    }

    // MARK: - Shared with SecretKey

    /// Decodes the 32 secret bytes of a `vault:sk:v1:` or `vault:fk:v1:` line without any String.
    static func decodeSecret(_ contents: SecureBytes, kind: KeyKind) throws(VaultError) -> SecureBytes {
        try contents.withUnsafeBytes { (raw) throws(VaultError) -> SecureBytes in
            let payload = try KeyText.payload(raw, expecting: kind)
            return try SecureBytes(capacity: Base64.maxDecodedLength(payload.count)) { (out) throws(VaultError) -> Int in
                guard let n = Base64.decode(payload, into: out), n == 32 else {
                    throw VaultError(.keyFileMalformed, "\(kind.name) line holds base64 of exactly 32 bytes")
                }
                return n
            }
        }
    }

    /// Encodes 32 secret bytes as a key line in wiped memory and writes it with mode 0600.
    static func writeSecret(_ secret: SecureBytes, kind: KeyKind, path: String) throws(VaultError) {
        let prefix = Array(kind.rawValue.utf8)
        let lineLength = prefix.count + Base64.encodedLength(secret.count) + 1
        let line = SecureBytes(capacity: lineLength + 1) { out in
            out.copyBytes(from: prefix)
            let n = secret.withUnsafeBytes { Base64.encode($0, into: UnsafeMutableRawBufferPointer(rebasing: out[prefix.count...])) }
            out[prefix.count + n] = 10
            return prefix.count + n + 1
        }
        try line.withUnsafeBytes { (b) throws(VaultError) in try KeyFileIO.createExclusive(path: path, mode: 0o600, bytes: b) }
    }
}
