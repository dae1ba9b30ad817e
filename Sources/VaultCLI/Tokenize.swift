import ArgumentParser
import CardRules
import ServerCLI
import VaultClient
import VaultCrypto

/// `vault tokenize`: a card JSON on stdin → the sidecar's token JSON on stdout.
struct Tokenize: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Tokenize a card (JSON on stdin) through a running sidecar; prints the token JSON.",
        discussion: """
            Without --key the card goes over the local socket and is sealed at the sidecar's door; \
            with --key it is sealed here with the public key and only the envelope is sent.

            Examples:
              echo '{"number":"4242424242424242","exp_month":12,"exp_year":30}' \\
                | vault tokenize
              echo '{"number":"4242424242424242","exp_month":12,"exp_year":30}' \\
                | vault tokenize --token-format card
              echo '{"number":"4242424242424242","exp_month":12,"exp_year":30}' \\
                | vault tokenize --dedupe
              vault tokenize --key Keys/0123456789abcdef.pub \\
                --socket /run/vault/vault.sock < card.json
            """
    )

    @Option(help: "The sidecar's socket.", completion: .file())
    var socket = "vault.sock"

    @Option(help: "Seal locally with this public key and send only the envelope.", completion: .file())
    var key: String?

    @Option(help: "Token form: tok (tok_ + 128 random bits) or card (card-shaped: the card's length, first 6 and last 4, random middle; docs/card-tokens.md). Default: the sidecar's token_format.")
    var tokenFormat: String?

    @Flag(help: "Answer an existing reusable token of the same card (same fingerprint, expiry and token form) instead of a new one (docs/dedupe.md).")
    var dedupe = false

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let client = SidecarClient(socketPath: socket)
            let input = try StandardIO.readAll(limit: CardEnvelope.maxJSONBytes)
            let answer: SidecarClient.Answer
            if let key {
                let sealer = try VaultClient.CardSealer(publicKeyFile: key)
                let envelope = try input.withUnsafeBytes { b in
                    Result { () throws(VaultError) in try sealer.seal(cardJSON: StandardIO.droppingTrailingNewline(b)) }
                }.get()
                answer = try client.tokenize(envelope: envelope, tokenFormat: tokenFormat, dedupe: dedupe)
            } else {
                let card = input.withUnsafeBytes { SecureBytes(copying: StandardIO.droppingTrailingNewline($0)) }
                answer = try client.tokenize(cardJSON: card, tokenFormat: tokenFormat, dedupe: dedupe)
            }
            try StandardIO.write(answer.body + "\n")
        }
    }
}

/// `vault token show|delete TOKEN`.
struct Token: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show or delete a token on a running sidecar.",
        discussion: """
            Examples:
              vault token show tok_abcdefghijklmnopqrstuvwxyz \\
                --socket /run/vault-sidecar/vault.sock
              vault token delete tok_abcdefghijklmnopqrstuvwxyz
            """,
        subcommands: [Show.self, Delete.self]
    )

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a token's metadata (never card data).",
            discussion: "Example:\n  vault token show tok_abcdefghijklmnopqrstuvwxyz")
        @Option(help: "The sidecar's socket.") var socket = "vault.sock"
        @Argument(help: "The token.") var token: String
        func run() throws {
            try reportingErrors { () throws(VaultError) in
                try StandardIO.write(try SidecarClient(socketPath: socket).token(token).body + "\n")
            }
        }
    }

    struct Delete: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete a token and its envelope.",
            discussion: "Example:\n  vault token delete tok_abcdefghijklmnopqrstuvwxyz")
        @Option(help: "The sidecar's socket.") var socket = "vault.sock"
        @Argument(help: "The token.") var token: String
        func run() throws {
            try reportingErrors { () throws(VaultError) in try SidecarClient(socketPath: socket).delete(token) }
        }
    }
}
