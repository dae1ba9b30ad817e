import Foundation
import Logging
import Tokenizer
import VaultCrypto

/// The keys a sidecar holds: public keys only. Never a secret key, never the fingerprint key
/// (docs/key-files.md: beside stored BINs, last 4s and fingerprints it would rebuild every PAN).
public struct SidecarKeys: Sendable {
    /// The sealing keys: the ring's primary and the status of every kid it lists.
    public let sealing: SealingKeys.Snapshot
    /// Public key files found that the ring does not list (refused; logged at load).
    public let unlisted: [KeyID]
    /// When the primary was made: its `created` time in the key ring, or, in a directory without
    /// a ring, the modification time of its `.pub` file (`vault_key_age_seconds`).
    public let primaryCreated: Date

    /// The key new cards are sealed to.
    public var primary: PublicKey { sealing.primary }

    /// Loads `dir`: the key ring `ring.json` and the `*.pub` files.
    ///
    /// The ring pins the kids: the primary is the one it names (its `.pub` must be here and hash
    /// to that kid), and a `.pub` whose kid the ring does not list is refused, never used. A
    /// directory without `ring.json` may hold exactly one public key, which is then the primary.
    /// - Throws: `SECRET_KEY_REFUSED` when the directory holds a secret key (a `.key` file or
    ///   any file starting `vault:sk:`): the sidecar must never hold one; `FINGERPRINT_KEY_REFUSED`
    ///   when it holds a fingerprint key (`fingerprint.fk`, or any file starting `vault:fk:`);
    ///   `KEY_RING_NOT_FOUND`
    ///   for several public keys and no ring; `KEY_RING_INVALID`; key-file codes.
    public static func load(directory dir: String, logger: Logger) throws(VaultError) -> SidecarKeys {
        let names: [String]
        do { names = try FileManager.default.contentsOfDirectory(atPath: dir).sorted() } catch {
            throw VaultError(.keyFileNotFound, "cannot read the keys directory \(dir)", field: dir)
        }
        for name in names {
            let path = dir + "/" + name
            if name.hasSuffix(".key") || Self.startsWithSecretPrefix(path) {
                throw VaultError(
                    .secretKeyRefused,
                    "\(path) is a secret key: the sidecar never holds one (move it to the gateway's keys directory)", field: path)
            }
            if name == KeyFiles.fingerprintKeyFileName || name.hasSuffix(".fk") || Self.starts(path, with: "vault:fk:") {
                throw VaultError(
                    .fingerprintKeyRefused,
                    "\(path) is a fingerprint key: only the gateway holds it (beside stored BINs and last 4s it rebuilds card numbers); move it with `vault keys move-fingerprint-key --from \(dir) --to GATEWAY_KEYS`",
                    field: path)
            }
        }
        var found: [KeyID: PublicKey] = [:], files: [KeyID: String] = [:]
        for name in names where name.hasSuffix(".pub") {
            let key = try KeyFiles.loadPublicKey(path: dir + "/" + name)
            found[key.kid] = key
            files[key.kid] = dir + "/" + name
        }
        let created: Date
        let ringPath = dir + "/" + KeyRingFile.fileName
        let sealing: SealingKeys.Snapshot
        var unlisted: [KeyID] = []
        if names.contains(KeyRingFile.fileName) {
            let ring = try KeyRingFile.load(path: ringPath)
            guard let primary = found[ring.primary] else {
                throw VaultError(
                    .keyFileNotFound, "the key ring's primary \(ring.primary) has no public key file in \(dir) (\(ring.primary).pub)", field: dir)
            }
            sealing = SealingKeys.Snapshot(primary: primary, statuses: Dictionary(uniqueKeysWithValues: ring.entries.map { ($0.kid, $0.status) }))
            created = ring.entries.first { $0.kid == ring.primary }?.created ?? Self.modified(files[ring.primary])
            unlisted = found.keys.filter { ring.status(of: $0) == nil }.sorted()
            for kid in unlisted {
                logger.warning("public key refused: the key ring does not list it", metadata: ["kid": "\(kid)", "ring": "\(ringPath)"])
            }
        } else {
            guard found.count <= 1 else {
                throw VaultError(
                    .keyRingNotFound,
                    "\(dir) holds \(found.count) public keys and no \(KeyRingFile.fileName): name the primary with `vault keys init --keys \(dir) --primary KID`",
                    field: ringPath)
            }
            guard let only = found.values.first else {
                throw VaultError(.keyFileNotFound, "no public key (*.pub) in \(dir): make one with `vault keygen --out DIR` and copy the .pub here", field: dir)
            }
            sealing = SealingKeys.Snapshot(primary: only)
            created = Self.modified(files[only.kid])
        }
        return SidecarKeys(sealing: sealing, unlisted: unlisted, primaryCreated: created)
    }

    /// Checks a keys directory as `load` would; returns the primary kid (for `vault config check`).
    public static func check(directory dir: String) throws(VaultError) -> KeyID {
        var logger = Logger(label: "vault.config")
        logger.logLevel = .critical
        return try load(directory: dir, logger: logger).primary.kid
    }

    /// A file's modification time (now when it cannot be read: a key just loaded from it).
    static func modified(_ path: String?) -> Date {
        guard let path, let attributes = try? FileManager.default.attributesOfItem(atPath: path) else { return Date() }
        return attributes[.modificationDate] as? Date ?? Date()
    }

    private static func startsWithSecretPrefix(_ path: String) -> Bool {
        starts(path, with: "vault:sk:v1:") || starts(path, with: "vault:skp:v1")
    }

    private static func starts(_ path: String, with prefix: String) -> Bool {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
              let h = FileHandle(forReadingAtPath: path)
        else { return false }
        defer { try? h.close() }
        let head = (try? h.read(upToCount: prefix.utf8.count)) ?? Data()
        return head == Data(prefix.utf8)
    }
}
