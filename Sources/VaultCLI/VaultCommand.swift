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
        version: VaultVersion.string,
        subcommands: [
            Keygen.self, Keys.self, Seal.self, Open.self, Validate.self, KeyInfo.self, Serve.self, GatewayCommand.self, Tokenize.self, Token.self,
            RewrapCommand.self, ImportCommand.self, ExportCommand.self, AuditCommand.self, ConfigCommand.self, PaymentsCommand.self, CustomersCommand.self, Health.self,
        ]
    )

    public init() {}

    /// The executable's entry (`runHardened`: no core file, no ptrace by the same uid).
    public static func runMain() async -> Never { await runHardened() }
}
