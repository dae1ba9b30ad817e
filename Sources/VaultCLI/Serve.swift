#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import Logging
import Payments
import Sidecar
import SocketHTTP
import Store
import Tokenizer
import VaultCrypto

/// `vault serve`: the tokenizing sidecar (README "The sidecar") on a Unix socket.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the sidecar: tokenize cards over HTTP/JSON on a Unix socket (public key only).",
        discussion: """
            Every setting has a default, so a bare `vault serve` works in a directory with Keys/<kid>.pub. \
            Settings come from flags, then VAULT_SIDECAR_<SETTING> environment variables, then the \
            "sidecar" section of --config (or $VAULT_CONFIG), then defaults (docs/configuration.md). \
            The keys directory holds public keys and ring.json only: a secret key there is refused \
            (SECRET_KEY_REFUSED), and so is the fingerprint key (FINGERPRINT_KEY_REFUSED: it lives \
            with the gateway, which computes each token's fingerprint). SIGHUP reloads the keys and the key \
            ring without dropping connections; SIGTERM or SIGINT stops gracefully.

            Examples:
              vault serve
              vault serve --config /etc/vault/vault.json
              vault serve --socket /run/vault/vault.sock --keys /etc/vault/keys --store sqlite:/var/lib/vault/tokens.sqlite
              vault serve --store 'postgres://vault@/vault?host=/run/postgresql' --audit-log /var/log/vault/audit.jsonl
              curl --unix-socket vault.sock -H 'Content-Type: application/json' \\
                -d '{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2030,"cvc":"123"}}' http://vault/v1/tokens
            """
    )

    @Option(help: "Configuration file (JSON, section \"sidecar\"); default $VAULT_CONFIG.")
    var config: String?

    @Option(help: "Unix socket path (default vault.sock).")
    var socket: String?

    @Option(help: "Socket file mode, octal (default 660).")
    var socketMode: String?

    @Option(help: "Group owning the socket (name or gid); with mode 660 its members may connect. Default: the process's group.")
    var socketGroup: String?

    @Option(help: "Token store: sqlite:PATH or postgres://user@host/db (or ?host=/socket/dir). Default sqlite:vault.sqlite.")
    var store: String?

    @Option(help: "Keys directory (public keys and ring.json; never secret or fingerprint keys). Default Keys.")
    var keys: String?

    @Option(help: "Token lifetime in seconds (default 900).")
    var tokenTTL: Double?

    @Option(help: "CVC lifetime in seconds, ≤ token lifetime (default 300).")
    var cvcTTL: Double?

    @Option(help: "Allow a local user or group: uid:N=roles or gid:N=roles (roles: tokenize,pay,admin). Repeatable. Default: this process's uid, every role.")
    var allow: [String] = []

    @Option(help: "The gateway adapter's socket (vault gateway), for payments (default gateway.sock).")
    var gateway: String?

    @Option(help: "Reconcile a payment still processing after this many seconds (default 60).")
    var reconcileAfter: Double?

    @Option(help: "Failed payment attempts a checkout session allows before it is closed (SESSION_ATTEMPTS_EXCEEDED). Default 3.")
    var sessionMaxAttempts: Double?

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical (default info).")
    var logLevel: String?

    @Option(help: "Append an audit line per tokenize, read, delete, pay, confirm and key reload to this file (docs/audit-log.md).")
    var auditLog: String?

    @Flag(help: "Log every request (route template, status, duration) at info level.")
    var logRequests = false

    var flags: SidecarFlags {
        SidecarFlags(
            socket: socket, socketMode: socketMode, socketGroup: socketGroup, store: store, keys: keys, gateway: gateway,
            auditLog: auditLog, logLevel: logLevel, tokenTTL: tokenTTL, cvcTTL: cvcTTL, reconcileAfter: reconcileAfter,
            sessionMaxAttempts: sessionMaxAttempts, allow: allow, logRequests: logRequests)
    }

    func run() async throws {
        do {
            let (config, level, _) = try ResolvedConfiguration.sidecar(flags, config: try ResolvedConfiguration.file(self.config))
            var logger = Logger(label: "vault.sidecar")
            logger.logLevel = level
            try await SidecarServer(configuration: config, logger: logger).run()
        } catch let error as VaultError {
            throw fail(error)
        } catch let error as StoreError {
            throw fail(VaultError(store: error))
        }
    }
}
