#if canImport(Glibc)
import Glibc
#endif
import Foundation
import ServerCLI
import VaultCrypto
import VaultOpen

/// The keys an operator command in the gateway's zone loads from a keys directory (`vault import`,
/// `vault export`): the secret keys (pinned to the key ring when there is one, as the gateway does),
/// the primary public key new envelopes are sealed to, and the fingerprint keys.
struct ZoneKeys {
    let ring: KeyRing
    /// The ring's primary (or the one key of a directory without a ring).
    let primary: PublicKey
    let fingerprintKeys: FingerprintKeys?

    /// - Throws: `KEY_FILE_NOT_FOUND` (no directory, or no secret key in it), `KEY_RING_NOT_FOUND`
    ///   (several secret keys and no ring), the key-file and ring codes.
    init(keys: String, ring ringPath: String?, passphraseFile: String?) throws(VaultError) {
        let passphrase = try passphraseFile.map { (f) throws(VaultError) in try ProtectedKey.readPassphrase(path: f) }
        let names: [String]
        do { names = try FileManager.default.contentsOfDirectory(atPath: keys).sorted() } catch {
            throw VaultError(.keyFileNotFound, "cannot read the keys directory \(keys)", field: "--keys")
        }
        let secrets = names.filter { $0.hasSuffix(".key") }
        guard !secrets.isEmpty else {
            throw VaultError(.keyFileNotFound, "no secret key (*.key) in \(keys): run this in the gateway's zone", field: "--keys")
        }
        var ring = try KeyRing(paths: secrets.map { keys + "/" + $0 }, passphrase: passphrase)
        let path = ringPath ?? keys + "/" + KeyRingFile.fileName
        if ringPath != nil || FileManager.default.fileExists(atPath: path) {
            let description = try KeyRingFile.load(path: path)
            try ring.pin(to: description)
        }
        let primaryKid = ring.pinned?.primary ?? (ring.kids.count == 1 ? ring.kids[0] : nil)
        guard let primaryKid, let primary = ring.publicKey(for: primaryKid) else {
            throw VaultError(.keyRingNotFound, "\(keys) holds several secret keys and no ring.json says which is the primary", field: "--ring")
        }
        self.ring = ring
        self.primary = primary
        fingerprintKeys = try FingerprintKeys.load(directory: keys, names: names)
    }
}

/// An output file made for this run only: created 0600 under a temporary name beside `path` and
/// renamed over it once complete (a reader never sees half a file).
struct OutputFile {
    let path: String
    let temporary: String
    let fd: Int32
    let refuseExisting: Bool

    /// - Throws: `OUTPUT_FILE_EXISTS` when `refuseExisting` and `path` exists; `IO_ERROR`.
    init(_ path: String, refuseExisting: Bool) throws(VaultError) {
        if refuseExisting, FileManager.default.fileExists(atPath: path) {
            throw VaultError(.outputFileExists, "\(path) exists: it is not overwritten", field: "--out")
        }
        self.path = path
        self.refuseExisting = refuseExisting
        temporary = path + ".partial-\(getpid())"
        // O_EXCL: never a file someone made under that name beforehand.
        fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw VaultError(.ioError, "cannot create \(temporary)", field: "--out") }
        fchmod(fd, 0o600)
    }

    func write(_ text: String) throws(VaultError) { try StandardIO.write(fd: fd, text) }

    /// Syncs, closes and moves the file into place: with `refuseExisting`, by a hard link that
    /// fails if `path` appeared meanwhile (never overwritten), otherwise by a rename over it.
    func commit() throws(VaultError) {
        fsync(fd)
        close(fd)
        guard refuseExisting else {
            guard rename(temporary, path) == 0 else { throw VaultError(.ioError, "cannot rename \(temporary) to \(path)", field: "--out") }
            return
        }
        guard link(temporary, path) == 0 else {
            let exists = errno == EEXIST
            unlink(temporary)
            if exists { throw VaultError(.outputFileExists, "\(path) exists: it is not overwritten", field: "--out") }
            throw VaultError(.ioError, "cannot move \(temporary) to \(path)", field: "--out")
        }
        unlink(temporary)
    }

    /// Closes and removes the unfinished file.
    func discard() {
        close(fd)
        unlink(temporary)
    }
}
