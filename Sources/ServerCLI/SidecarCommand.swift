import ArgumentParser
import Logging
import Sidecar
import SocketHTTP
import Store
import VaultCrypto

/// `vault-sidecar`, which `vault serve` runs: the tokenizing sidecar on a Unix socket.
/// Its own executable, whose module graph holds no opening code (no VaultOpen, Gateway or Rewrap;
/// Tests/VaultCLITests/ArchitectureTests.swift).
public struct SidecarCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(commandName: "vault-sidecar", abstract: abstract, discussion: discussion, version: VaultVersion.string)

    public static let abstract = "Run the sidecar: tokenize cards over HTTP/JSON on a Unix socket (public key only)."
    public static let discussion = """
        Every setting has a default, so a bare `vault serve` works in a directory with Keys/<kid>.pub. \
        Settings come from flags, then VAULT_SIDECAR_<SETTING> environment variables, then the \
        "sidecar" section of --config (or $VAULT_CONFIG), then defaults (docs/configuration.md). \
        The keys directory holds public keys and ring.json only: a secret key there is refused \
        (SECRET_KEY_REFUSED), and so is the fingerprint key (FINGERPRINT_KEY_REFUSED: it lives \
        with the gateway, which computes each token's fingerprint). SIGHUP reloads the keys and the key \
        ring without dropping connections; SIGTERM or SIGINT stops gracefully. `vault serve` runs the \
        executable vault-sidecar, installed beside vault, with the same arguments (same process): the \
        running sidecar holds no code that opens envelopes.

        Examples:
          vault serve
          vault serve --config /etc/vault/vault.json
          vault serve --socket /run/vault/vault.sock --keys /etc/vault/keys \\
            --store sqlite:/var/lib/vault/tokens.sqlite
          vault serve --store 'postgres://vault@/vault?host=/run/postgresql' \\
            --audit-log /var/log/vault/audit.jsonl
          vault-sidecar --config /etc/vault/vault.json
          curl --unix-socket vault.sock -H 'Content-Type: application/json' \\
            -d '{"card":{"number":"4242424242424242","exp_month":12,"exp_year":30}}' \\
            http://vault/v1/tokens
        """

    /// First thing in `main`, before any task runs: the number of event loops
    /// (`SocketServer.chooseEventLoops`), and Swift's tasks on them
    /// (`SocketServer.runTasksOnEventLoops`).
    public static func prepareExecutor() {
        SocketServer.chooseEventLoops()
        SocketServer.runTasksOnEventLoops()
    }

    @OptionGroup var file: ConfigOption<SidecarSettings>
    @OptionGroup var socket: SocketOptions<SidecarSettings>
    @OptionGroup var store: StoreOption<SidecarSettings>
    @OptionGroup var keys: KeysOption<SidecarSettings>
    @OptionGroup var sidecar: SidecarOptions
    @OptionGroup var logging: LoggingOptions<SidecarSettings>

    var options: ServeOptions {
        ServeOptions(file: file, socket: socket, store: store, keys: keys, sidecar: sidecar, logging: logging)
    }

    public init() {}

    public func run() async throws {
        do {
            if SocketServer.eventLoopSettingIsRefused {
                throw VaultError(.configInvalid, SocketServer.eventLoopSettingRule)
            }
            let (config, log, _) = try SidecarServer.Configuration.resolve(options, file: try ConfigFile.named(options.file.config))
            let logger = log.logger("vault.sidecar")
            try await SidecarServer(configuration: config, logger: logger).run()
        } catch let exit as ExitCode {
            throw exit
        } catch {
            throw fail(serverFailure(error))
        }
    }

    /// The executable's entry (`runHardened`: no core file, no ptrace by the same uid).
    public static func runMain() async -> Never { await runHardened() }
}
