import Foundation
import Logging
import VaultCrypto

/// The keys a sidecar holds: public keys and the fingerprint key. Never a secret key.
public struct SidecarKeys: Sendable {
    /// The key new cards are sealed to.
    public let primary: PublicKey
    /// Every public key found (the primary included).
    public let all: [PublicKey]
    /// The fingerprint key.
    public let fingerprintKey: FingerprintKey

    /// Loads `dir`: every `*.pub`, and `fingerprint.fk` (created, mode 0600, when absent, and
    /// logged). The primary is the newest `.pub` until the key ring (issue 5) names one.
    /// - Throws: `SECRET_KEY_REFUSED` when the directory holds a secret key (a `.key` file or
    ///   any file starting `vault:sk:`): the sidecar must never hold one; key-file codes.
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
        }
        var keys: [(PublicKey, Date)] = []
        for name in names where name.hasSuffix(".pub") {
            let path = dir + "/" + name
            let key = try KeyFiles.loadPublicKey(path: path)
            let mtime = (try? FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date) ?? .distantPast
            keys.append((key, mtime ?? .distantPast))
        }
        guard let primary = keys.max(by: { $0.1 < $1.1 })?.0 else {
            throw VaultError(.keyFileNotFound, "no public key (*.pub) in \(dir): make one with `vault keygen --out DIR` and copy the .pub here", field: dir)
        }
        let fkPath = dir + "/" + KeyFiles.fingerprintKeyFileName
        if !FileManager.default.fileExists(atPath: fkPath) {
            try KeyFiles.generateFingerprintKey(path: fkPath)
            logger.notice("created fingerprint key", metadata: ["path": "\(fkPath)"])
        }
        return SidecarKeys(primary: primary, all: keys.map(\.0), fingerprintKey: try KeyFiles.loadFingerprintKey(path: fkPath))
    }

    private static func startsWithSecretPrefix(_ path: String) -> Bool {
        guard let h = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? h.close() }
        let head = (try? h.read(upToCount: 12)) ?? Data()
        return head == Data("vault:sk:v1:".utf8)
    }
}

extension VaultError.Code {
    /// The sidecar was given a secret key.
    public static let secretKeyRefused = VaultError.Code(rawValue: "SECRET_KEY_REFUSED")
}
