import ArgumentParser

/// `vault`: the sealed card vault's command line.
public struct VaultCommand: ParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "vault",
        abstract: "Seal card data with a public key; open it only where the secret key lives.",
        discussion: """
            Formats: docs/key-files.md, docs/sealed-value.md, docs/envelope-v1.md. \
            Exit codes: docs/cli.md.
            """,
        version: "0.1.0",
        subcommands: [Keygen.self, Seal.self, Open.self, Validate.self, KeyInfo.self]
    )

    public init() {}
}
