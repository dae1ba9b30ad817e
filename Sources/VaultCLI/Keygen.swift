import ArgumentParser
import ServerCLI
import VaultCrypto

/// `vault keygen --out DIR`: a new X25519 pair, or with `--fingerprint` a fingerprint key.
struct Keygen: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make a key pair: DIR/<kid>.pub (0644) and DIR/<kid>.key (0600). Prints the kid.",
        discussion: """
            Refuses to overwrite. With --fingerprint, writes DIR/fingerprint.fk (0600), the key of card \
            fingerprints, instead.

            Examples:
              vault keygen --out Keys
              vault keygen --fingerprint --out /etc/vault/keys
            """
    )

    @Option(help: "Directory to write the key files into.")
    var out: String

    @Flag(help: "Make the fingerprint key (fingerprint.fk) instead of a key pair.")
    var fingerprint = false

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            if fingerprint {
                let path = out + "/" + KeyFiles.fingerprintKeyFileName
                try KeyFiles.generateFingerprintKey(path: path)
                try StandardIO.write(path + "\n")
            } else {
                let kid = try KeyFiles.generateKeyPair(directory: out)
                try StandardIO.write(kid.rawValue + "\n")
            }
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

    @Argument(help: "A public key file (vault:pk:v1:…).")
    var file: String

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            try StandardIO.write(try KeyFiles.loadPublicKey(path: file).kid.rawValue + "\n")
        }
    }
}
