#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import Gateway
import Logging
import SocketHTTP
import VaultCrypto

/// `vault gateway`: the gateway adapter, the only process that opens envelopes
/// (docs/threat-model.md).
struct GatewayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gateway",
        abstract: "Run the gateway adapter: open envelopes with the secret key and charge them (own process and socket).",
        discussion: """
            The keys directory holds secret keys (*.key, mode 0600; passphrase-protected ones need \
            --passphrase-file or the `passphrase` credential) and fingerprint.fk, the key of card \
            fingerprints, which only the gateway holds (POST /v1/fingerprints answers the sidecar); without \
            --keys, $CREDENTIALS_DIRECTORY (systemd LoadCredential=) is used. With a key ring \
            (--ring, or ring.json in the keys directory) only its primary and active kids open. Core \
            dumps are disabled before a key is loaded. Only the uids given with --allow-uid/--allow-user \
            may call it (default: its own uid); root may read GET /v1/keys. Settings also come from \
            VAULT_GATEWAY_<SETTING> and the "gateway" section of --config (docs/configuration.md). \
            SIGHUP reloads keys and ring without dropping connections; SIGTERM or SIGINT stops gracefully.

            The processor ledger (one row per payment id sent to the processor) lives in --store: a \
            SQLite file (default), or PostgreSQL, which any number of gateways share. Outcomes left \
            unknown by a timeout, a 5xx, a dropped connection or a crash are settled as the relay \
            template's "settle" section says (docs/errors.md, docs/configuration.md).

            Examples:
              vault gateway --keys /etc/vault/gateway-keys --socket /run/vault/gateway.sock --allow-user vault-sidecar
              vault gateway --config /etc/vault/vault.json
              vault gateway --processor relay:/etc/vault/relay/stripe-style.json --store postgres://vault@db.internal/vault
              vault gateway --store sqlite:/var/lib/vault/gateway-ledger.sqlite --ring Keys/ring.json
            """
    )

    @Option(help: "Configuration file (JSON, section \"gateway\"); default $VAULT_CONFIG.")
    var config: String?

    @Option(help: "Unix socket path (default gateway.sock).")
    var socket: String?

    @Option(help: "Socket file mode, octal (default 600).")
    var socketMode: String?

    @Option(help: "Group owning the socket (name or gid).")
    var socketGroup: String?

    @Option(help: "Keys directory with *.key files (default: $CREDENTIALS_DIRECTORY).")
    var keys: String?

    @Option(help: "The key ring (ring.json): only its primary and active kids open. Default: KEYS/ring.json if present.")
    var ring: String?

    @Option(help: "File with the passphrase of protected secret keys (default: the `passphrase` credential, if any).")
    var passphraseFile: String?

    @Option(help: "Processor: sandbox, or relay:TEMPLATE.json for a real processor's API (templates in deploy/relay/). sandbox:PATH is an alias of --processor sandbox --store sqlite:PATH.")
    var processor: String?

    @Option(help: "The store of the processor ledger: sqlite:PATH or postgres://user@host/db (default sqlite:gateway-ledger.sqlite). Gateways sharing a PostgreSQL store charge a payment id at most once whichever gets it.")
    var store: String?

    @Option(help: "Alias of --store sqlite:PATH (kept for existing set-ups).")
    var ledger: String?

    @Option(help: "Seconds between rounds of the background settler of unknown outcomes (default 2).")
    var settleInterval: Double?

    @Option(help: "A uid allowed to call the gateway (repeatable; default: this process's uid).")
    var allowUid: [String] = []

    @Option(help: "A user (name) allowed to call the gateway, e.g. vault-sidecar (repeatable).")
    var allowUser: [String] = []

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical (default info).")
    var logLevel: String?

    @Option(help: "Append an audit line per authorize/confirm and key reload to this file (docs/audit-log.md).")
    var auditLog: String?

    @Flag(help: "Log every request (route template, status, duration) at info level.")
    var logRequests = false

    var flags: GatewayFlags {
        GatewayFlags(
            socket: socket, socketMode: socketMode, socketGroup: socketGroup, keys: keys, ring: ring, passphraseFile: passphraseFile,
            processor: processor, store: store, ledger: ledger, auditLog: auditLog, logLevel: logLevel, settleInterval: settleInterval,
            allowUid: allowUid, allowUser: allowUser, logRequests: logRequests)
    }

    func run() async throws {
        do {
            let (config, level, _) = try ResolvedConfiguration.gateway(flags, config: try ResolvedConfiguration.file(self.config))
            var logger = Logger(label: "vault.gateway")
            logger.logLevel = level
            try await GatewayServer(configuration: config, logger: logger).run()
        } catch let error as VaultError {
            throw fail(error)
        }
    }
}
