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
            Checks the file's shape (unknown sections and settings are errors), every value, and what \
            can be checked without starting: the sidecar's keys directory and key ring (no secret key, \
            the primary's public key present), the gateway's key ring. Exit 0 when all is well; \
            otherwise the first problem, naming the setting, and a non-zero exit (CONFIG_INVALID: 11).

            Examples:
              vault config check --config /etc/vault/vault.json
              VAULT_SIDECAR_STORE=sqlite:/tmp/t.sqlite vault config check --config vault.json --section sidecar
            """
    )

    @Option(help: "Configuration file (default $VAULT_CONFIG).")
    var config: String?

    @Option(help: "Check only this section: sidecar or gateway.")
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
                out += settings.table
            }
            if let section, section != "sidecar", section != "gateway" {
                throw VaultError(.configInvalid, "--section is sidecar or gateway", field: "--section")
            }
            try StandardIO.write(out + "ok\n")
        }
    }
}
