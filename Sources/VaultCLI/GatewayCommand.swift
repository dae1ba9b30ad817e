#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import Gateway
import Logging
import SocketHTTP
import VaultCrypto

/// `vault gateway`: the gateway adapter, the only process that opens envelopes (DESIGN §1, §7).
struct GatewayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gateway",
        abstract: "Run the gateway adapter: open envelopes with the secret key and charge them (own process and socket).",
        discussion: """
            The keys directory holds secret keys (*.key, mode 0600) and optionally fingerprint.fk; without \
            --keys, $CREDENTIALS_DIRECTORY (systemd LoadCredential=) is used. Core dumps are disabled before \
            a key is loaded. Only the uids given with --allow-uid may call it (default: its own uid); in \
            production that is the sidecar's user. Stops gracefully on SIGTERM or SIGINT.

            Examples:
              vault gateway --keys /etc/vault/gateway-keys --socket /run/vault/gateway.sock --allow-uid 998
              vault gateway --processor sandbox:/var/lib/vault/sandbox.sqlite
            """
    )

    @Option(help: "Unix socket path.")
    var socket = "gateway.sock"

    @Option(help: "Socket file mode (octal).")
    var socketMode = "600"

    @Option(help: "Group owning the socket (name or gid).")
    var socketGroup: String?

    @Option(help: "Keys directory with *.key files (default: $CREDENTIALS_DIRECTORY).")
    var keys: String?

    @Option(help: "The key ring (ring.json): only its primary and active kids open. Default: KEYS/ring.json if present.")
    var ring: String?

    @Option(help: "File with the passphrase of protected secret keys (default: the `passphrase` credential, if any).")
    var passphraseFile: String?

    @Option(help: "Processor: sandbox, or relay:TEMPLATE.json for a real processor's API (templates in deploy/relay/).")
    var processor = "sandbox"

    @Option(help: "The processor's durable ledger of charges by payment id (SQLite).")
    var ledger = "gateway-ledger.sqlite"

    @Option(help: "A uid allowed to call the gateway (repeatable; default: this process's uid).")
    var allowUid: [UInt32] = []

    @Option(help: "A user (name) allowed to call the gateway, e.g. vault-sidecar (repeatable).")
    var allowUser: [String] = []

    @Option(help: "Append an audit line per authorize/confirm and key reload to this file (docs/audit-log.md).")
    var auditLog: String?

    @Flag(help: "Log every request (route template, status, duration) at info level.")
    var logRequests = false

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel = "info"

    func run() async throws {
        var logger = Logger(label: "vault.gateway")
        logger.logLevel = Logger.Level(rawValue: logLevel) ?? .info
        var config = GatewayServer.Configuration()
        config.socketPath = socket
        guard let mode = mode_t(socketMode, radix: 8) else { throw ValidationError("--socket-mode is octal, e.g. 600") }
        config.socketMode = mode
        config.keysDirectory = keys
        config.ringPath = ring
        config.passphraseFile = passphraseFile
        var uids = Set(allowUid)
        for name in allowUser {
            guard let pw = getpwnam(name) else { throw ValidationError("--allow-user \(name): no such user") }
            uids.insert(pw.pointee.pw_uid)
        }
        if !uids.isEmpty { config.allowedUIDs = uids }
        config.auditLogPath = auditLog
        config.logRequests = logRequests
        if processor == "sandbox" {
            config.processor = .sandbox(ledgerPath: ledger)
        } else if processor.hasPrefix("sandbox:"), processor.count > 8 {
            config.processor = .sandbox(ledgerPath: String(processor.dropFirst(8)))
        } else if processor.hasPrefix("relay:"), processor.count > 6 {
            config.processor = .relay(templatePath: String(processor.dropFirst(6)), ledgerPath: ledger)
        } else {
            throw ValidationError("--processor is sandbox, sandbox:LEDGER or relay:TEMPLATE.json")
        }
        do {
            config.socketGroup = try socketGroup.map { (g) throws(VaultError) in try SocketFile.groupID(g) }
            try await GatewayServer(configuration: config, logger: logger).run()
        } catch let error as VaultError {
            throw fail(error)
        }
    }
}
