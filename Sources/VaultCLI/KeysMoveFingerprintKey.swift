import ArgumentParser
import Foundation
import ServerCLI
import VaultCrypto

/// `vault keys move-fingerprint-key`: moves `fingerprint.fk` from a sidecar's keys directory (where
/// versions before the fingerprint-key fix created it) to the gateway's (docs/key-files.md).
struct KeysMoveFingerprintKey: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "move-fingerprint-key",
        abstract: "Move fingerprint.fk from the sidecar's keys directory to the gateway's.",
        discussion: """
            The fingerprint key must live only in the gateway zone: beside the BINs, last 4s and \
            fingerprints a sidecar stores, it rebuilds every card number in about 1,000 guesses \
            (PCI DSS 3.5.1). This copies FROM/fingerprint.fk to TO/fingerprint.fk (mode 0600, never \
            over a different key), checks the copy, removes the original and says what else to \
            delete. Fingerprints already stored stay valid: it is the same key. Then restart the \
            sidecar (it refuses to start while it holds a fingerprint key) and reload the gateway.

            Examples:
              vault keys move-fingerprint-key --from /etc/vault/keys \\
                --to /etc/vault/gateway-keys
            """
    )
    @Option(help: "The sidecar's keys directory that holds fingerprint.fk.", completion: .directory)
    var from: String

    @Option(help: "The gateway's keys directory (its secret keys are there).", completion: .directory)
    var to: String

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let source = from + "/" + KeyFiles.fingerprintKeyFileName
            let destination = to + "/" + KeyFiles.fingerprintKeyFileName
            guard FileManager.default.fileExists(atPath: source) else {
                throw VaultError(.keyFileNotFound, "no \(source): nothing to move", field: "--from")
            }
            let resolved = { (p: String) in URL(fileURLWithPath: p).standardizedFileURL.resolvingSymlinksInPath().path }
            guard resolved(from) != resolved(to) else {
                throw VaultError(.keyRingChangeRefused, "--from and --to are the same directory", field: "--to")
            }
            let written = try KeyFiles.copyFingerprintKey(from: source, to: destination)
            _ = try KeyFiles.loadFingerprintKey(path: destination)
            guard unlink(source) == 0 else {
                throw VaultError(.ioError, "copied to \(destination) but cannot remove \(source) (errno \(errno)): remove it by hand")
            }
            let dir = open(from, O_RDONLY | O_DIRECTORY)
            if dir >= 0 { fsync(dir); close(dir) }
            try StandardIO.write("""
                \(written ? "copied" : "already there:") \(destination) (mode 0600)
                removed \(source)
                delete as well: every backup or copy of \(from) made while it held fingerprint.fk \
                (snapshots, configuration management, container images), and any other copy of the key \
                outside the gateway's zone
                then: restart the sidecar; reload the gateway (SIGHUP) so it computes fingerprints\n
                """)
        }
    }
}
