import ArgumentParser
import Foundation
import Logging
import Rewrap
import ServerCLI
import Store
import VaultCrypto

/// `vault keys add-fingerprint-key`, `promote-fingerprint-key`, `retire-fingerprint-key`: rotating
/// the fingerprint key in the gateway's keys directory (docs/key-files.md "Rotating the
/// fingerprint key"), in the order add (every gateway) → reload → promote → reload →
/// `vault rewrap --fingerprints` → retire → reload.
struct KeysAddFingerprintKey: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add-fingerprint-key",
        abstract: "Add a new fingerprint key beside the primary; prints its kid.",
        discussion: """
            Writes KEYS/fingerprint-<fkid>.fk (0600) in the gateway's keys directory, beside the \
            primary fingerprint.fk. Once the gateway reloads (SIGHUP) it answers each card's \
            fingerprint under both keys, and the sidecar links them, so lookups by either match. Copy \
            the file to every gateway's keys directory and reload them all before promoting it.

            Example:
              vault keys add-fingerprint-key --keys /etc/vault/gateway-keys
            """
    )
    @Option(help: "The gateway's keys directory (holds fingerprint.fk).", completion: .directory)
    var keys: String
    @Option(help: "Append a line for the change to this audit log (docs/audit-log.md).", completion: .file())
    var auditLog: String?

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let kid = try KeyFiles.addFingerprintKey(directory: keys)
            CLIAudit.record(auditLog, action: "fingerprint_key_add", kid: KeyID(kid))
            try StandardIO.write(kid + "\n")
        }
    }
}

struct KeysPromoteFingerprintKey: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "promote-fingerprint-key",
        abstract: "Make an added fingerprint key the primary; the old primary is kept beside it.",
        discussion: """
            fingerprint-<FKID>.fk becomes fingerprint.fk; the previous primary stays as \
            fingerprint-<its fkid>.fk, so the gateway still answers it (lookups by old fingerprints \
            keep matching). Reload the gateway, then run `vault rewrap --fingerprints`. Prints the \
            previous primary's kid.

            Example:
              vault keys promote-fingerprint-key 0123456789abcdef \\
                --keys /etc/vault/gateway-keys
            """
    )
    @Argument(help: "The fingerprint kid to promote (16 lowercase hex).") var fkid: String
    @Option(help: "The gateway's keys directory (holds fingerprint.fk).", completion: .directory)
    var keys: String
    @Option(help: "Append a line for the change to this audit log (docs/audit-log.md).", completion: .file())
    var auditLog: String?

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            guard let k = KeyID(fkid) else { throw VaultError(.kidMalformed, "\(fkid) is not a kid (16 lowercase hex characters)", field: "FKID") }
            let previous = try KeyFiles.promoteFingerprintKey(directory: keys, kid: k.rawValue)
            CLIAudit.record(auditLog, action: "fingerprint_key_promote", kid: k)
            try StandardIO.write(previous + "\n")
        }
    }
}

struct KeysRetireFingerprintKey: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "retire-fingerprint-key",
        abstract: "Delete a fingerprint key that is no longer the primary, once no stored fingerprint needs it.",
        discussion: """
            Refused while any token or instrument in --store has a fingerprint that is not the \
            primary's (run `vault rewrap --fingerprints` first), and for the primary itself. Deletes \
            KEYS/fingerprint-<FKID>.fk; reload the gateway. The links from the retired key's \
            fingerprints are deleted first: lookups by them match nothing afterwards.

            Example:
              vault keys retire-fingerprint-key 0123456789abcdef \\
                --keys /etc/vault/gateway-keys \\
                --store sqlite:/var/lib/vault-sidecar/vault.sqlite
            """
    )
    @Argument(help: "The fingerprint kid to retire (16 lowercase hex).") var fkid: String
    @Option(help: "The gateway's keys directory (holds fingerprint.fk).", completion: .directory)
    var keys: String
    @Option(help: "The store whose fingerprints must all be the primary's: sqlite:PATH or a postgres:// URL.", completion: .default)
    var store: String
    @Option(help: "Append a line for the change to this audit log (docs/audit-log.md).", completion: .file())
    var auditLog: String?

    func run() async throws {
        do {
            guard let k = KeyID(fkid) else { throw VaultError(.kidMalformed, "\(fkid) is not a kid (16 lowercase hex characters)", field: "FKID") }
            let primary = try KeyFiles.loadFingerprintKey(path: keys + "/" + KeyFiles.fingerprintKeyFileName)
            guard primary.kid != k.rawValue else {
                throw VaultError(.keyRingChangeRefused, "fingerprint key \(k) is the primary: promote another first", field: "FKID")
            }
            // A kid this directory does not hold changes nothing (no link is forgotten for it).
            let file = keys + "/" + FingerprintKeys.otherFileName(kid: k.rawValue)
            guard FileManager.default.fileExists(atPath: file) else { throw VaultError(.keyFileNotFound, "no \(file)", field: "FKID") }
            // Refused while a stored fingerprint needs the key; else its links are forgotten
            // (FingerprintLinks.forget) before the key file goes.
            let left = try await StoreTables.withStore(store, logger: Logger(label: "vault.keys")) { db in
                let left = try await FingerprintRecomputer.remaining(in: db, primaryKid: primary.kid)
                if left == 0 { try await FingerprintLinks.forget(kid: k.rawValue, in: db) }
                return left
            }
            guard left == 0 else {
                throw VaultError(.keyInUse, "\(left) stored fingerprints are not the primary key's (\(primary.kid)): run `vault rewrap --fingerprints` first")
            }
            try KeyFiles.retireFingerprintKey(directory: keys, kid: k.rawValue)
            CLIAudit.record(auditLog, action: "fingerprint_key_retire", kid: k)
            try StandardIO.write("retired fingerprint key \(k): reload the gateway (SIGHUP; under systemd: restart it)\n")
        } catch let error as VaultError {
            throw fail(error)
        }
    }
}
