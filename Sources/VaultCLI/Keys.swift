import ArgumentParser
import Foundation
import ServerCLI
import VaultClient
import VaultCrypto

/// `vault keys …`: the key ring (docs/key-ring.md, docs/key-files.md): which kid seals, which open.
struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the key ring: add, promote, retire and rotate keys.",
        discussion: """
            The ring (KEYS/ring.json) names the primary key (new cards are sealed to it), the active \
            keys (they still open) and the retired ones (refused). Sidecars and the gateway reload it \
            on SIGHUP. Rotation in the safe order: add the new key as active, reload the gateway so it \
            opens it, then promote it and reload the sidecars; rewrap; retire the old key.

            Examples:
              vault keys init --keys Keys
              vault keys rotate --keys Keys --secret-dir /etc/vault/gateway-keys \\
                --gateway /run/vault-gateway/gateway.sock
              vault keys retire 0123456789abcdef --keys Keys \\
                --store sqlite:/var/lib/vault-sidecar/vault.sqlite
            """,
        subcommands: [
            KeysInit.self, KeysList.self, KeysAdd.self, KeysPromote.self, KeysRetire.self, KeysRotate.self, KeysProtect.self,
            KeysMoveFingerprintKey.self, KeysAddFingerprintKey.self, KeysPromoteFingerprintKey.self, KeysRetireFingerprintKey.self,
        ]
    )
}

/// Where the ring is.
struct RingOptions: ParsableArguments {
    @Option(help: "The public keys directory (<kid>.pub files and ring.json).", completion: .directory)
    var keys = "Keys"

    @Option(help: "The key ring file (default: KEYS/ring.json).", completion: .file())
    var ring: String?

    @Option(help: "Append a line for the change to this audit log (docs/audit-log.md).", completion: .file())
    var auditLog: String?

    var ringPath: String { ring ?? keys + "/" + KeyRingFile.fileName }

    func load() throws(VaultError) -> KeyRingFile { try KeyRingFile.load(path: ringPath) }
}

struct KeysInit: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Write KEYS/ring.json listing the public keys there, with one primary.",
        discussion: """
            With one public key it becomes the primary; with several, name it with --primary (the \
            others are listed as active). Refuses to overwrite an existing ring.

            Examples:
              vault keys init --keys Keys
              vault keys init --keys /etc/vault/keys --primary 0123456789abcdef
            """
    )
    @OptionGroup var ring: RingOptions
    @Option(help: "The kid to make primary (required when there are several public keys).")
    var primary: String?

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            guard !FileManager.default.fileExists(atPath: ring.ringPath) else {
                throw VaultError(.keyRingChangeRefused, "\(ring.ringPath) exists; change it with vault keys add/promote/retire")
            }
            let kids = try publicKeys(in: ring.keys).map(\.kid)
            let chosen: KeyID
            if let primary {
                guard let k = KeyID(primary), kids.contains(k) else {
                    throw VaultError(.keyNotInRing, "no public key \(primary).pub in \(ring.keys)", field: "--primary")
                }
                chosen = k
            } else {
                guard kids.count == 1 else {
                    throw VaultError(.keyRingInvalid, "\(ring.keys) holds \(kids.count) public keys: name the primary with --primary KID", field: "--primary")
                }
                chosen = kids[0]
            }
            let now = Date()
            let file = try KeyRingFile(entries: kids.map { .init(kid: $0, status: $0 == chosen ? .primary : .active, created: now) })
            try file.write(path: ring.ringPath)
            CLIAudit.record(ring.auditLog, action: "key_init", kid: chosen)
            try StandardIO.write(file.text)
        }
    }
}

/// Where the ring is, for a command that only reads it.
struct RingLocation: ParsableArguments {
    @Option(help: "The public keys directory (<kid>.pub files and ring.json).", completion: .directory)
    var keys = "Keys"

    @Option(help: "The key ring file (default: KEYS/ring.json).", completion: .file())
    var ring: String?

    /// Accepted and ignored: earlier versions offered it here, but a listing changes nothing.
    @Option(help: .hidden)
    var auditLog: String?

    func load() throws(VaultError) -> KeyRingFile { try KeyRingFile.load(path: ring ?? keys + "/" + KeyRingFile.fileName) }
}

struct KeysList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "Print the key ring: kid, status, created, changed.",
        discussion: "Example:\n  vault keys list --keys Keys"
    )
    @OptionGroup var ring: RingLocation

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let file = try ring.load()
            var out = "kid               status   created              changed\n"
            for e in file.entries {
                out += "\(e.kid)  \(e.status.rawValue.padding(toLength: 8, withPad: " ", startingAt: 0)) \(KeyRingFile.timestamp(e.created))  \(KeyRingFile.timestamp(e.changed))\n"
            }
            try StandardIO.write(out)
        }
    }
}

struct KeysAdd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Make a new key pair and add it to the ring as active (it opens; nothing seals to it yet). Prints the kid.",
        discussion: """
            The secret key goes to --secret-dir (mode 0600; protected when a passphrase is given), the \
            public key to KEYS. Reload the gateway next (it must open the new key before anything is \
            sealed to it), then `vault keys promote KID`.

            Examples:
              vault keys add --keys Keys --secret-dir /etc/vault/gateway-keys
              vault keys add --keys Keys --secret-dir /etc/vault/gateway-keys \\
                --passphrase-file /etc/vault/passphrase
            """
    )
    @OptionGroup var ring: RingOptions
    @OptionGroup var secret: SecretKeyOptions

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let kid = try addKey(ring: ring, secret: secret)
            try StandardIO.write(kid.rawValue + "\n")
        }
    }
}

/// Where a new secret key goes and how it is protected.
struct SecretKeyOptions: ParsableArguments {
    @Option(help: "Directory for the new secret key (the gateway's keys).", completion: .directory)
    var secretDir: String

    @Option(help: "Protect the new secret key with the passphrase in this file (Argon2id).", completion: .file())
    var passphraseFile: String?

    @Option(help: "Argon2id cost for a protected key: interactive, moderate or sensitive.", completion: .list(["interactive", "moderate", "sensitive"]))
    var kdf = "moderate"

    func passphrase() throws(VaultError) -> (SecureBytes?, ProtectedKey.Cost) {
        guard let cost = ProtectedKey.Cost(rawValue: kdf) else {
            throw VaultError(.keyRingChangeRefused, "--kdf is interactive, moderate or sensitive", field: "--kdf")
        }
        return (try passphraseFile.map { (f) throws(VaultError) in try ProtectedKey.readPassphrase(path: f) }, cost)
    }
}

/// Makes a pair in the secret directory, copies the public key to the keys directory, adds the
/// kid to the ring as active, and records it in the audit log.
func addKey(ring: RingOptions, secret: SecretKeyOptions) throws(VaultError) -> KeyID {
    var file = try ring.load()
    // Every directory written below is checked before anything is written: a refusal leaves no
    // key pair or public key behind (outside audit: an unsafe keys directory got both, then the
    // refusal).
    try KeyRingFile.checkWritable(path: ring.ringPath)
    try KeyRingFile.checkWritable(path: ring.keys + "/ring-check")
    let (passphrase, cost) = try secret.passphrase()
    let kid = try KeyFiles.generateKeyPair(directory: secret.secretDir, passphrase: passphrase, cost: cost)
    let from = secret.secretDir + "/" + kid.rawValue + ".pub", to = ring.keys + "/" + kid.rawValue + ".pub"
    if from != to {
        do {
            try FileManager.default.copyItem(atPath: from, toPath: to)
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: to)
        } catch {
            throw VaultError(.ioError, "cannot copy \(from) to \(to)", field: to)
        }
    }
    try file.add(kid)
    try file.write(path: ring.ringPath)
    CLIAudit.record(ring.auditLog, action: "key_add", kid: kid)
    return kid
}

struct KeysPromote: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "promote",
        abstract: "Make an active key the primary (the old primary stays active).",
        discussion: """
            Only after every gateway opens the key (reloaded since `keys add`; `vault keys rotate \
            --gateway` checks this for you). Then reload the sidecars.

            Example:
              vault keys promote 0123456789abcdef --keys Keys
            """
    )
    @Argument(help: "The kid to promote.") var kid: String
    @OptionGroup var ring: RingOptions

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            guard let k = KeyID(kid) else { throw VaultError(.kidMalformed, "\(kid) is not a kid (16 lowercase hex characters)", field: "KID") }
            var file = try ring.load()
            try file.promote(k)
            try file.write(path: ring.ringPath)
            CLIAudit.record(ring.auditLog, action: "key_promote", kid: k)
            try StandardIO.write(file.text)
        }
    }
}

struct KeysRetire: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "retire",
        abstract: "Retire an active key: envelopes sealed to it are refused from then on.",
        discussion: """
            Refused while any stored envelope (token or instrument) in --store is still sealed to it: \
            run `vault rewrap` first. A retired key never comes back.

            Example:
              vault keys retire 0123456789abcdef --keys Keys \\
                --store sqlite:/var/lib/vault-sidecar/vault.sqlite
            """
    )
    @Argument(help: "The kid to retire.") var kid: String
    @OptionGroup var ring: RingOptions
    @Option(help: "The store whose envelopes must no longer use the key: sqlite:PATH or a postgres:// URL.", completion: .default)
    var store: String

    func run() async throws {
        guard let k = KeyID(kid) else { throw fail(VaultError(.kidMalformed, "\(kid) is not a kid (16 lowercase hex characters)", field: "KID")) }
        do {
            var file = try ring.load()
            try file.retire(k)  // checks the status before the store is opened
            let counts = try await StoreTables.kidCounts(store)
            let using = counts[k.rawValue] ?? 0
            guard using == 0 else {
                throw VaultError(.keyInUse, "\(using) stored envelopes are still sealed to \(k): run `vault rewrap` first")
            }
            try file.write(path: ring.ringPath)
            CLIAudit.record(ring.auditLog, action: "key_retire", kid: k)
            try StandardIO.write(file.text)
        } catch let error as VaultError {
            throw fail(error)
        }
    }
}

struct KeysRotate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rotate",
        abstract: "Add a new key and promote it in the safe order. Prints the new kid.",
        discussion: """
            Adds the new pair as active. With --gateway it then waits (up to --wait seconds) until the \
            gateway at that socket opens the new kid (reload it with SIGHUP, e.g. `systemctl reload \
            vault-gateway`; --reload-gateway-pid sends it for you), and promotes it. Without --gateway it \
            stops after adding and prints the next steps. Reload the sidecars afterwards, then run \
            `vault rewrap` and `vault keys retire OLD`.

            Examples:
              vault keys rotate --keys Keys --secret-dir gateway-keys \\
                --gateway gateway.sock --reload-gateway-pid 4242
              vault keys rotate --keys /etc/vault/keys --secret-dir /etc/vault/gateway-keys
            """
    )
    @OptionGroup var ring: RingOptions
    @OptionGroup var secret: SecretKeyOptions
    @Option(help: "The gateway's socket: promote only once it opens the new key.", completion: .file())
    var gateway: String?
    @Option(help: "Send SIGHUP to this gateway process after adding the key.")
    var reloadGatewayPid: Int32?
    @Option(help: "Seconds to wait for the gateway to open the new key.")
    var wait: Double = 30

    func run() async throws {
        do {
            let kid = try addKey(ring: ring, secret: secret)
            guard let gateway else {
                try StandardIO.write(kid.rawValue + "\n")
                try StandardIO.write(fd: 2, """
                    added \(kid) as active. Next: reload every gateway (systemctl reload vault-gateway), then
                      vault keys promote \(kid) --keys \(ring.keys)
                    and reload the sidecars.

                    """)
                return
            }
            if let pid = reloadGatewayPid, kill(pid, SIGHUP) != 0 {
                throw VaultError(.ioError, "cannot signal process \(pid)", field: "--reload-gateway-pid")
            }
            let client = SidecarClient(socketPath: gateway)
            let started = Date(), deadline = started.addingTimeInterval(wait)
            try StandardIO.write(fd: 2, "added \(kid) as active; waiting up to \(Int(wait)) s for the gateway at \(gateway) to open it\(reloadGatewayPid == nil ? " (reload it: systemctl reload vault-gateway, or kill -HUP its pid)" : "")\n")
            var reported = 0
            while true {
                if let answer = try? client.get("/v1/keys"), answer.status == 200,
                   let opens = answer.json?["opens"] as? [String], opens.contains(kid.rawValue) {
                    try StandardIO.write(fd: 2, "the gateway opens \(kid); promoting it\n")
                    break
                }
                let waited = Int(Date().timeIntervalSince(started))
                if waited >= reported + 5 {
                    reported = waited - waited % 5
                    try StandardIO.write(fd: 2, "still waiting for the gateway to open \(kid): \(waited) s of \(Int(wait)) s\n")
                }
                guard Date() < deadline else {
                    throw VaultError(
                        .keyRingChangeRefused,
                        "the gateway at \(gateway) does not open \(kid) after \(Int(wait)) s: reload it, then `vault keys promote \(kid)`")
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            var file = try ring.load()
            try file.promote(kid)
            try file.write(path: ring.ringPath)
            CLIAudit.record(ring.auditLog, action: "key_promote", kid: kid)
            try StandardIO.write(kid.rawValue + "\n")
        } catch let error as VaultError {
            throw fail(error)
        }
    }
}

struct KeysProtect: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "protect",
        abstract: "Protect a secret key file with a passphrase (Argon2id), change it, or remove it.",
        discussion: """
            The key itself (and its kid) stays the same. Passphrases come from files (first line) or, \
            on a terminal, from a prompt with echo off.

            Examples:
              vault keys protect /etc/vault/gateway-keys/0123456789abcdef.key \\
                --passphrase-file new.txt
              vault keys protect KEY --current-passphrase-file old.txt \\
                --passphrase-file new.txt
              vault keys protect KEY --current-passphrase-file old.txt --remove
            """
    )
    @Argument(help: "The secret key file (<kid>.key).", completion: .file()) var file: String
    @Option(help: "The key's current passphrase (if it is protected).", completion: .file()) var currentPassphraseFile: String?
    @Option(help: "The new passphrase.", completion: .file()) var passphraseFile: String?
    @Flag(help: "Store the key in clear again (vault:sk:v1:).") var remove = false
    @Option(help: "Argon2id cost: interactive, moderate or sensitive.", completion: .list(["interactive", "moderate", "sensitive"])) var kdf = "moderate"

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            guard let cost = ProtectedKey.Cost(rawValue: kdf) else {
                throw VaultError(.keyRingChangeRefused, "--kdf is interactive, moderate or sensitive", field: "--kdf")
            }
            var current: SecureBytes?
            if let f = currentPassphraseFile {
                current = try ProtectedKey.readPassphrase(path: f)
            } else if KeyFiles.isProtected(path: file) {
                current = ProtectedKey.promptPassphrase("current passphrase: ")
            }
            var new: SecureBytes?
            if !remove {
                if let f = passphraseFile {
                    new = try ProtectedKey.readPassphrase(path: f)
                } else {
                    guard let a = ProtectedKey.promptPassphrase("new passphrase: "), let b = ProtectedKey.promptPassphrase("again: ") else {
                        throw VaultError(.keyPassphraseRequired, "no terminal: give --passphrase-file", field: "--passphrase-file")
                    }
                    guard a == b else { throw VaultError(.keyPassphraseWrong, "the two passphrases differ") }
                    new = a
                }
            }
            try KeyFiles.reprotect(path: file, current: current, new: new, cost: cost)
        }
    }
}

/// The public keys of a directory.
func publicKeys(in dir: String) throws(VaultError) -> [PublicKey] {
    let names: [String]
    do { names = try FileManager.default.contentsOfDirectory(atPath: dir).sorted() } catch {
        throw VaultError(.keyFileNotFound, "cannot read the keys directory \(dir)", field: dir)
    }
    var keys: [PublicKey] = []
    for name in names where name.hasSuffix(".pub") { keys.append(try KeyFiles.loadPublicKey(path: dir + "/" + name)) }
    return keys
}
