import Foundation
import Testing
import VaultCrypto

/// deploy/ and the configuration file: the systemd units pass `systemd-analyze verify`, and
/// settings resolve flag > environment > file > default, with errors that name the setting.
@Suite(.ownThread) struct DeployConfigTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze") || FileManager.default.isExecutableFile(atPath: "/bin/systemd-analyze")))
    func systemdUnitsVerify() throws {
        let r = try run("/bin/bash", [Self.repository + "/deploy/systemd/verify", vaultBinary])
        #expect(r.status == 0, "\(r.out)\n\(r.stderr)")
    }

    /// Each unit's `RestartPreventExitStatus=` lists exactly the exit codes a restart cannot cure
    /// (the catalogue's `restartCannotCure`; the gateway's also systemd's 243/CREDENTIALS), and
    /// every start-up code of the servers has one of the catalogue's documented exit codes.
    @Test func unitsDoNotRestartOnWhatARestartCannotCure() throws {
        for (unit, extra) in [("vault-sidecar.service", [Int32]()), ("vault-gateway.service", [243])] {
            let text = try String(contentsOfFile: Self.repository + "/deploy/systemd/" + unit, encoding: .utf8)
            let lines = text.split(separator: "\n").filter { $0.hasPrefix("RestartPreventExitStatus=") }
            #expect(lines.count == 1, "\(unit)")
            let listed = lines.first.map { $0.dropFirst("RestartPreventExitStatus=".count).split(separator: " ").compactMap { Int32($0) } } ?? []
            #expect(Set(listed) == Set(ErrorCode.ExitStatus.restartCannotCure + extra), "\(unit): \(listed)")
        }
        // The start-up failures a restart cannot cure have one of those codes; the transient ones do not.
        for code: ErrorCode in [.configInvalid, .configNotFound, .secretKeyRefused, .fingerprintKeyRefused, .keyRingInvalid, .storeLocationInvalid,
                                .socketUnavailable, .socketPathTooLong, .socketGroupUnknown, .peerPolicyInvalid, .relayTemplateInvalid, .relayURLNotAllowed] {
            #expect(ErrorCode.ExitStatus.restartCannotCure.contains(code.exitCode), "\(code)")
        }
        for code: ErrorCode in [.storeUnavailable, .socketPathInUse] {
            #expect(!ErrorCode.ExitStatus.restartCannotCure.contains(code.exitCode) && code.exitCode != 1, "\(code)")
        }
    }

    @Test func configurationFileEnvironmentAndFlagsResolveInOrder() throws {
        let keys = try TestKeys()
        defer { keys.remove() }
        // The sidecar's directory: the public key only.
        let pubDir = keys.dir + "/public"
        try FileManager.default.createDirectory(atPath: pubDir, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: keys.pub, toPath: pubDir + "/\(keys.kid).pub")
        let file = keys.dir + "/vault.json"
        try #"{"sidecar":{"keys":"\#(pubDir)","token_ttl":600,"socket":"from-file.sock"},"gateway":{"log_level":"debug"}}"#
            .write(toFile: file, atomically: true, encoding: .utf8)
        let r = try run(vaultBinary, ["config", "check", "--config", file], environment: ProcessInfo.processInfo.environment.merging(["VAULT_SIDECAR_TOKEN_TTL": "700"]) { $1 })
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.out.contains("sidecar.token_ttl = 700.0  [VAULT_SIDECAR_TOKEN_TTL]"), "the environment beats the file: \(r.out)")
        #expect(r.out.contains("sidecar.socket = from-file.sock  [\(file): sidecar.socket]"), "\(r.out)")
        #expect(r.out.contains("sidecar.cvc_ttl = 300.0  [default]") && r.out.contains("gateway.log_level = debug"), "\(r.out)")

        // A store password is never printed.
        let secret = try run(vaultBinary, ["config", "check", "--config", file, "--section", "sidecar"],
                             environment: ProcessInfo.processInfo.environment.merging(["VAULT_SIDECAR_STORE": "postgres://vault:hunter2@db.internal/vault"]) { $1 })
        #expect(secret.status == 0 && secret.out.contains("postgres://vault:***@db.internal/vault") && !secret.out.contains("hunter2"), "\(secret.out) \(secret.stderr)")

        // Errors name the setting and its source; the exit code is 11.
        let bad: [(String, [String: String], String)] = [
            (#"{"sidecar":{"sockt":"x"}}"#, [:], #"unknown setting "sidecar.sockt""#),
            (#"{"sidecaar":{}}"#, [:], #"unknown section "sidecaar""#),
            (#"{"sidecar":{"keys":"\#(pubDir)"}}"#, ["VAULT_SIDECAR_SOCKET_MODE": "9x"], "sidecar.socket_mode (from VAULT_SIDECAR_SOCKET_MODE)"),
            (#"{"sidecar":{"keys":"\#(pubDir)","cvc_ttl":1000}}"#, [:], "sidecar.cvc_ttl (1000 s) must not exceed sidecar.token_ttl"),
            (#"{"sidecar":{"keys":"\#(pubDir)","store":"mysql://x"}}"#, [:], "sidecar.store (from \(file): sidecar.store)"),
            (#"{"sidecar":{"keys":"\#(pubDir)","log_level":"loud"}}"#, [:], "sidecar.log_level"),
            (#"{"sidecar":{"keys":"\#(pubDir)"},"gateway":{"processor":"paypal"}}"#, [:], "gateway.processor"),
        ]
        for (text, env, expected) in bad {
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            let e = try run(vaultBinary, ["config", "check", "--config", file], environment: ProcessInfo.processInfo.environment.merging(env) { $1 })
            #expect(e.status == 11 && e.stderr.contains(expected), "\(text): \(e.status) \(e.stderr)")
        }
        // A server refuses to start on the same errors, before it binds anything.
        try #"{"sidecar":{"keys":"\#(pubDir)","socket_mode":"999"}}"#.write(toFile: file, atomically: true, encoding: .utf8)
        let serve = try run(vaultBinary, ["serve", "--config", file, "--socket", keys.dir + "/v.sock"])
        #expect(serve.status == 11 && serve.stderr.contains("sidecar.socket_mode"), "\(serve.stderr)")
        #expect(!FileManager.default.fileExists(atPath: keys.dir + "/v.sock"))
    }

    @Test func completionScriptsAndHelpExamples() throws {
        let bash = try vault("--generate-completion-script", "bash")
        #expect(bash.status == 0 && bash.out.contains("rewrap") && bash.out.contains("keys"))
        for command in [["keygen"], ["keys"], ["keys", "rotate"], ["keys", "retire"], ["rewrap"], ["audit", "verify"], ["config", "check"],
                        ["serve"], ["gateway"], ["seal"], ["open"], ["validate"], ["tokenize"], ["token"], ["kid"]] {
            let help = try vault(["help"] + command, input: Data())
            #expect(help.status == 0 && help.out.contains("Example"), "vault \(command.joined(separator: " ")) --help has no examples")
        }
    }
}
