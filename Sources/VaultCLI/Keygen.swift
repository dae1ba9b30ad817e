import ArgumentParser
import Foundation
import ServerCLI
import VaultCrypto

/// `vault keygen --out DIR`: a new X25519 pair, or with `--fingerprint` a fingerprint key.
struct Keygen: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make a key pair: DIR/<kid>.pub (0644) and DIR/<kid>.key (0600). Prints the kid.",
        discussion: """
            Refuses to overwrite. A directory that does not exist is made (mode 0700). With \
            --secret-dir, the secret key goes there instead (the gateway's keys) and DIR keeps the \
            public key only, as the sidecar needs: a DIR holding ring.json (or named by \
            VAULT_SIDECAR_KEYS) is the sidecar's, which refuses to start with a secret key in it, so \
            keygen refuses to write one there (SECRET_KEY_REFUSED) and asks for --secret-dir. With \
            --fingerprint, writes DIR/fingerprint.fk (0600), the key of card fingerprints, instead: \
            the gateway's keys directory only.

            Examples:
              vault keygen --out Keys --secret-dir gateway-keys
              vault keygen --out dev-keys
              vault keygen --fingerprint --out gateway-keys
            """
    )

    @Option(help: "Directory to write the key files into (made, 0700, if missing).", completion: .directory)
    var out: String

    @Option(help: "Directory for the secret key (made, 0700, if missing); --out then gets the public key only.", completion: .directory)
    var secretDir: String?

    @Flag(help: "Make the fingerprint key (fingerprint.fk) instead of a key pair.")
    var fingerprint = false

    func validate() throws {
        if fingerprint, secretDir != nil { throw ValidationError("--secret-dir is for a key pair; the fingerprint key goes to --out") }
    }

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            if fingerprint {
                try Self.makeDirectory(out)
                let path = out + "/" + KeyFiles.fingerprintKeyFileName
                try KeyFiles.generateFingerprintKey(path: path)
                try StandardIO.write(path + "\n")
                return
            }
            guard let secretDir else {
                try Self.refuseSidecarDirectory(out)
                try Self.makeDirectory(out)
                let kid = try KeyFiles.generateKeyPair(directory: out)
                try StandardIO.write(kid.rawValue + "\n")
                return
            }
            try Self.makeDirectory(out)
            try Self.makeDirectory(secretDir)
            let kid = try KeyFiles.generateKeyPair(directory: secretDir)
            let from = secretDir + "/" + kid.rawValue + ".pub", to = out + "/" + kid.rawValue + ".pub"
            if (from as NSString).standardizingPath != (to as NSString).standardizingPath {
                guard !FileManager.default.fileExists(atPath: to) else {
                    throw VaultError(.keyFileExists, "\(to) exists; refusing to overwrite it", field: to)
                }
                do {
                    try FileManager.default.copyItem(atPath: from, toPath: to)
                    try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: to)
                    try FileManager.default.removeItem(atPath: from)
                } catch {
                    throw VaultError(.keyFileUnreadable, "cannot move \(from) to \(to)", field: to)
                }
            }
            try StandardIO.write(kid.rawValue + "\n")
        }
    }

    /// A directory the sidecar reads (it holds ring.json, or `VAULT_SIDECAR_KEYS` names it) gets no
    /// secret key: the sidecar would refuse to start (`SECRET_KEY_REFUSED`).
    static func refuseSidecarDirectory(_ dir: String) throws(VaultError) {
        let named = ProcessInfo.processInfo.environment["VAULT_SIDECAR_KEYS"].map { ($0 as NSString).standardizingPath }
        let holdsRing = FileManager.default.fileExists(atPath: dir + "/" + KeyRingFile.fileName)
        guard holdsRing || named == (dir as NSString).standardizingPath else { return }
        throw VaultError(
            .secretKeyRefused,
            "\(dir) is the sidecar's public keys directory (\(holdsRing ? "it holds ring.json" : "VAULT_SIDECAR_KEYS names it")), which must hold no secret key: "
                + "give --secret-dir DIR for the secret key (the gateway's keys, e.g. --secret-dir gateway-keys), or use `vault keys add --keys \(dir) --secret-dir DIR`",
            field: "--secret-dir")
    }

    /// Makes `dir` (and its missing parents) with mode 0700 when it does not exist.
    static func makeDirectory(_ dir: String) throws(VaultError) {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: dir, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else { throw VaultError(.keyFileUnreadable, "\(dir) exists and is not a directory", field: dir) }
            return
        }
        do {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw VaultError(.keyFileUnreadable, "cannot create the directory \(dir): \((error as NSError).localizedDescription)", field: dir)
        }
    }
}

/// `vault kid FILE`: the kid of a public key file.
struct KeyInfo: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kid",
        abstract: "Print the kid of a public key file.",
        discussion: "Example:\n  vault kid Keys/0123456789abcdef.pub"
    )

    @Argument(help: "A public key file (vault:pk:v1:…).", completion: .file())
    var file: String

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            try StandardIO.write(try KeyFiles.loadPublicKey(path: file).kid.rawValue + "\n")
        }
    }
}
