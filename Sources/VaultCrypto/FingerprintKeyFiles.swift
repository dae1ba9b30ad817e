#if canImport(Glibc)
import Glibc
#endif

/// The fingerprint key files of a gateway keys directory during a rotation (docs/key-files.md
/// "Rotating the fingerprint key"): `fingerprint.fk` is the primary, `fingerprint-<fkid>.fk` the
/// others still held. Every step keeps a primary in place, so a gateway reloading at any moment
/// loads a working set.
extension KeyFiles {
    /// Writes a new fingerprint key beside the primary as `DIR/fingerprint-<fkid>.fk` (0600) and
    /// returns its kid. The gateway answers its fingerprints beside the primary's once reloaded.
    /// - Throws: `FINGERPRINT_KEY_MISSING` when DIR holds no `fingerprint.fk` (make the first with
    ///   `vault keygen --fingerprint`); `KEY_FILE_EXISTS`; `KEYS_DIRECTORY_UNSAFE`.
    public static func addFingerprintKey(directory dir: String) throws(VaultError) -> String {
        try KeyFileIO.checkDirectory(dir)
        guard KeyFileIO.exists(dir + "/" + fingerprintKeyFileName) else {
            throw VaultError(.fingerprintKeyMissing, "no \(dir)/\(fingerprintKeyFileName): make the first with `vault keygen --fingerprint --out \(dir)`", field: "--keys")
        }
        let key = FingerprintKey(bytes: SecureBytes.random(count: 32))
        let path = dir + "/" + FingerprintKeys.otherFileName(kid: key.kid)
        try writeSecret(key.bytes, kind: .fingerprint, path: path)
        KeyFileIO.syncDirectory(dir)
        return key.kid
    }

    /// Makes `fingerprint-<kid>.fk` the primary: the current primary is kept as
    /// `fingerprint-<its kid>.fk` (a hard link made first), then the new one is renamed over
    /// `fingerprint.fk` (atomic). Returns the previous primary's kid.
    /// - Throws: `KEY_FILE_NOT_FOUND` when DIR holds no such key; `KEY_RING_CHANGE_REFUSED` when it
    ///   is the primary already; the codes of `loadFingerprintKey`; `IO_ERROR`.
    public static func promoteFingerprintKey(directory dir: String, kid: String) throws(VaultError) -> String {
        let primaryPath = dir + "/" + fingerprintKeyFileName
        let newPath = dir + "/" + FingerprintKeys.otherFileName(kid: kid)
        let current = try loadFingerprintKey(path: primaryPath)
        guard current.kid != kid else {
            throw VaultError(.keyRingChangeRefused, "fingerprint key \(kid) is the primary already", field: "FKID")
        }
        guard KeyFileIO.exists(newPath) else {
            throw VaultError(.keyFileNotFound, "no \(newPath): add it with `vault keys add-fingerprint-key`", field: "FKID")
        }
        let loaded = try loadFingerprintKey(path: newPath)
        guard loaded.kid == kid else {
            throw VaultError(.keyFileMalformed, "\(newPath) holds fingerprint key \(loaded.kid), not \(kid)", field: newPath)
        }
        let keptPath = dir + "/" + FingerprintKeys.otherFileName(kid: current.kid)
        if !KeyFileIO.exists(keptPath), link(primaryPath, keptPath) != 0 {
            throw VaultError(.ioError, "cannot keep the primary as \(keptPath) (errno \(errno))", field: keptPath)
        }
        guard rename(newPath, primaryPath) == 0 else {
            throw VaultError(.ioError, "cannot rename \(newPath) to \(primaryPath) (errno \(errno))", field: newPath)
        }
        KeyFileIO.syncDirectory(dir)
        return current.kid
    }

    /// Deletes `fingerprint-<kid>.fk`: the gateway no longer answers its fingerprints once
    /// reloaded (stored ones were recomputed; `vault keys retire-fingerprint-key` deletes their
    /// links first, so lookups by them match nothing).
    /// - Throws: `KEY_RING_CHANGE_REFUSED` for the primary; `KEY_FILE_NOT_FOUND`; `IO_ERROR`.
    public static func retireFingerprintKey(directory dir: String, kid: String) throws(VaultError) {
        if let primary = try? loadFingerprintKey(path: dir + "/" + fingerprintKeyFileName), primary.kid == kid {
            throw VaultError(.keyRingChangeRefused, "fingerprint key \(kid) is the primary: promote another first", field: "FKID")
        }
        let path = dir + "/" + FingerprintKeys.otherFileName(kid: kid)
        guard KeyFileIO.exists(path) else { throw VaultError(.keyFileNotFound, "no \(path)", field: "FKID") }
        guard unlink(path) == 0 else { throw VaultError(.ioError, "cannot remove \(path) (errno \(errno))", field: path) }
        KeyFileIO.syncDirectory(dir)
    }
}
