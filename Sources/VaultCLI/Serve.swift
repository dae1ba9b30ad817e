#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import Logging
import Payments
import Sidecar
import SocketHTTP
import Tokenizer
import VaultCrypto

/// `vault serve`: the tokenizing sidecar (DESIGN §5) on a Unix socket.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the sidecar: tokenize cards over HTTP/JSON on a Unix socket (public key only).",
        discussion: """
            Every flag has a default, so a bare `vault serve` works in a directory with Keys/<kid>.pub. \
            The keys directory holds public keys and fingerprint.fk (created on first start); a secret \
            key there is refused (SECRET_KEY_REFUSED). Stops gracefully on SIGTERM or SIGINT.

            Examples:
              vault serve
              vault serve --socket /run/vault/vault.sock --keys /etc/vault/keys --store sqlite:/var/lib/vault/tokens.sqlite
              vault serve --store 'postgres://vault@/vault?host=/run/postgresql'
              curl --unix-socket vault.sock -H 'Content-Type: application/json' \\
                -d '{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2030,"cvc":"123"}}' http://vault/v1/tokens
            """
    )

    @Option(help: "Unix socket path.")
    var socket = "vault.sock"

    @Option(help: "Socket file mode (octal).")
    var socketMode = "660"

    @Option(help: "Group owning the socket (name or gid); with mode 660 its members may connect. Default: the process's group.")
    var socketGroup: String?

    @Option(help: "Token store: sqlite:PATH or postgres://user@host/db (or ?host=/socket/dir).")
    var store = "sqlite:vault.sqlite"

    @Option(help: "Keys directory (public keys and fingerprint.fk; never secret keys).")
    var keys = "Keys"

    @Option(help: "Token lifetime in seconds.")
    var tokenTTL: Double = 900

    @Option(help: "CVC lifetime in seconds (≤ token lifetime).")
    var cvcTTL: Double = 300

    @Option(help: "Allow a local user or group: uid:N=roles or gid:N=roles (roles: tokenize,pay,admin). Repeatable. Default: this process's uid, every role.")
    var allow: [String] = []

    @Option(help: "The gateway adapter's socket (vault gateway), for payments.")
    var gateway = "gateway.sock"

    @Option(help: "Reconcile a payment still processing after this many seconds (a crash or lost connection).")
    var reconcileAfter: Double = 60

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel = "info"

    @Option(help: "Append an audit line per tokenize, read, delete, pay, confirm and key reload to this file (docs/audit-log.md).")
    var auditLog: String?

    @Flag(help: "Log every request (route template, status, duration) at info level.")
    var logRequests = false

    func run() async throws {
        var logger = Logger(label: "vault.sidecar")
        logger.logLevel = Logger.Level(rawValue: logLevel) ?? .info
        var config = SidecarServer.Configuration()
        config.socketPath = socket
        guard let mode = mode_t(socketMode, radix: 8) else { throw ValidationError("--socket-mode is octal, e.g. 660") }
        config.socketMode = mode
        do throws(VaultError) {
            config.socketGroup = try socketGroup.map { (g) throws(VaultError) in try SocketFile.groupID(g) }
        } catch {
            throw fail(error)
        }
        config.keysDirectory = keys
        config.policy = TokenPolicy(tokenTTL: tokenTTL, cvcTTL: cvcTTL)
        config.gatewaySocket = gateway
        config.auditLogPath = auditLog
        config.logRequests = logRequests
        guard reconcileAfter >= 1 else { throw ValidationError("--reconcile-after is at least 1 second") }
        config.reconcileAfter = .milliseconds(Int(reconcileAfter * 1000))
        do {
            if !allow.isEmpty { config.peers = try PeerPolicy(parsing: allow) }
            config.store = try StoreLocation(store)
            try await SidecarServer(configuration: config, logger: logger).run()
        } catch let error as VaultError {
            throw fail(error)
        } catch let error as TokenStoreError {
            throw fail(VaultError(store: error))
        } catch let error as PaymentStoreError {
            throw fail(VaultError(VaultError.Code(rawValue: error.code.rawValue), error.message))
        }
    }
}
