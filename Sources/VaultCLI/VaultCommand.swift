import VaultCrypto
import ArgumentParser

/// `vault`: the sealed card vault's command line.
public struct VaultCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "vault",
        abstract: "Seal card data with a public key; open it only where the secret key lives.",
        discussion: """
            Formats: docs/key-files.md, docs/sealed-value.md, docs/envelope-v1.md. \
            Exit codes: docs/cli.md.
            """,
        version: "0.1.0",
        subcommands: [
            Keygen.self, Keys.self, Seal.self, Open.self, Validate.self, KeyInfo.self, Serve.self, GatewayCommand.self, Tokenize.self, Token.self,
            RewrapCommand.self, AuditCommand.self, ConfigCommand.self, PaymentsCommand.self,
        ]
    )

    public init() {}

    /// Parses the process's arguments and runs the chosen subcommand, sync or async; exits with
    /// argument-parser's conventions (help, usage errors, `ExitCode`).
    public static func runMain() async -> Never {
        // Every subcommand may hold card data (serve, seal, tokenize, validate) or secret keys and
        // opened cards (gateway, open, rewrap, keys): no core file, no ptrace by the same uid.
        // The gateway also refuses to start if this fails.
        ProcessHardening.disableCoreDumps()
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            exit()
        } catch {
            exit(withError: error)
        }
    }
}
