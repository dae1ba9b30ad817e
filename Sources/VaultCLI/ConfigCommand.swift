import ArgumentParser
import Foundation
import Gateway
import Logging
import ServerCLI
import Sidecar
import VaultCrypto

/// `vault config check`: resolve and check the settings of the sidecar and the gateway.
struct ConfigCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Check a configuration file (docs/configuration.md).",
        subcommands: [ConfigCheck.self]
    )
}

struct ConfigCheck: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Resolve every setting (flag, else environment, else file, else default), check it, print it with its source.",
        discussion: """
            Checks the file's shape (unknown sections and settings are errors), every value (numbers \
            within their bounds, JSON numbers and booleans in the file), and what can be checked \
            without starting: the sidecar's keys directory and key ring (no secret key, the primary's \
            public key present), the gateway's relay template (loaded as at start), key ring, and \
            secret keys, passphrase and fingerprint key when its keys directory is given. Exit 0 \
            when all is well; otherwise the first problem, naming the setting, and its exit code \
            (CONFIG_INVALID: 11; a key file: 2; the key ring: 12).

            Examples:
              vault config check --config /etc/vault/vault.json
              VAULT_SIDECAR_STORE=sqlite:/tmp/t.sqlite vault config check \\
                --config vault.json --section sidecar
            """
    )

    @Option(help: "Configuration file (default $VAULT_CONFIG).", completion: .file())
    var config: String?

    @Option(help: "Check only this section: sidecar or gateway.", completion: .list(["sidecar", "gateway"]))
    var section: String?

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let file = try ConfigFile.named(config)
            var out = file.map { "configuration: \($0.path ?? "")\n" } ?? "configuration: none (defaults and environment)\n"
            if section == nil || section == "sidecar" {
                let (c, _, settings) = try SidecarServer.Configuration.resolve(.none, file: file)
                if FileManager.default.fileExists(atPath: c.keysDirectory) {
                    let keys = try SidecarKeys.check(directory: c.keysDirectory)
                    out += "sidecar: primary key \(keys)\n"
                } else {
                    throw VaultError(.configInvalid, "sidecar.keys: no directory \(c.keysDirectory)", field: "sidecar.keys")
                }
                out += settings.table
            }
            if section == nil || section == "gateway" {
                let (c, _, settings) = try GatewayServer.Configuration.resolve(.none, file: file)
                if let ring = c.ringPath {
                    let r = try KeyRingFile.load(path: ring)
                    out += "gateway: key ring \(ring), primary \(r.primary), opens \(r.openingKids.map(\.rawValue).joined(separator: ","))\n"
                }
                out += try Self.checkGateway(c)
                out += settings.table
            }
            if let section, section != "sidecar", section != "gateway" {
                throw VaultError(.configInvalid, "--section is sidecar or gateway", field: "--section")
            }
            try StandardIO.write(out + "ok\n")
        }
    }

    /// What the gateway would refuse at start and can be checked here: the relay template (loaded
    /// as the gateway loads it), and the keys directory's secret keys, passphrase, key ring and
    /// fingerprint key when the directory is given (or `$CREDENTIALS_DIRECTORY` is set).
    static func checkGateway(_ c: GatewayServer.Configuration) throws(VaultError) -> String {
        var out = ""
        if case .relay(let path) = c.processor {
            do throws(RelayTemplate.Invalid) { _ = try RelayTemplate(path: path) } catch {
                throw VaultError(error.code, "gateway.processor: relay template \(path): \(error.message)", field: "gateway.processor")
            }
            out += "gateway: relay template \(path) loads\n"
        }
        if c.keysDirectory != nil || ProcessInfo.processInfo.environment["CREDENTIALS_DIRECTORY"] != nil {
            let keys = try GatewayKeys.load(c, logger: Logger(label: "vault.config-check"))
            out += "gateway: secret keys open \(keys.ring.openingKids.map(\.rawValue).joined(separator: ",")); fingerprint key \(keys.fingerprintKey == nil ? "absent (tokens get no fingerprint)" : "present")\n"
        } else {
            out += "gateway: keys not checked (no gateway.keys and no $CREDENTIALS_DIRECTORY: the gateway reads them from systemd's credentials)\n"
        }
        return out
    }
}
