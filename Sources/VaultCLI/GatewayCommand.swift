#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import Gateway
import Logging
import ServerCLI
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
              vault gateway --keys /etc/vault/gateway-keys \\
                --socket /run/vault/gateway.sock --allow-user vault-sidecar
              vault gateway --config /etc/vault/vault.json
              vault gateway --processor relay:/etc/vault/relay/stripe-style.json \\
                --store postgres://vault@db.internal/vault
              vault gateway --store sqlite:/var/lib/vault/gateway-ledger.sqlite \\
                --ring Keys/ring.json
            """
    )

    @OptionGroup var file: ConfigOption<GatewaySettings>
    @OptionGroup var socket: SocketOptions<GatewaySettings>
    @OptionGroup var keys: KeysOption<GatewaySettings>
    @OptionGroup var gateway: GatewayOptions
    @OptionGroup var store: StoreOption<GatewaySettings>
    @OptionGroup var logging: LoggingOptions<GatewaySettings>

    var options: GatewayServeOptions {
        GatewayServeOptions(file: file, socket: socket, keys: keys, gateway: gateway, store: store, logging: logging)
    }

    func run() async throws {
        do {
            if SocketServer.eventLoopSettingIsRefused {
                throw VaultError(.configInvalid, SocketServer.eventLoopSettingRule)
            }
            let (config, log, _) = try GatewayServer.Configuration.resolve(options, file: try ConfigFile.named(options.file.config))
            let logger = log.logger("vault.gateway")
            try await GatewayServer(configuration: config, logger: logger).run()
        } catch let exit as ExitCode {
            throw exit
        } catch {
            throw fail(serverFailure(error))
        }
    }
}

extension VaultCommand {
    /// First thing in `main`, before any task runs: for `vault gateway`, the number of event loops
    /// (`VAULT_EVENT_LOOPS`, else one fewer than the cores) and Swift's tasks on them, as the
    /// sidecar does (docs/configuration.md). A request's open and its answer then stay on the
    /// loop that read it, with no hop to Swift's pool and back. Issue 16, measured on 2 cores
    /// against tasks on the pool: gateway CPU per payment 15-17 % less, payments at c=8 +3-6 %
    /// (docs/benchmarks.md). Other subcommands keep Swift's own executor.
    public static func prepareExecutor(arguments: [String]) {
        guard arguments.dropFirst().first == GatewayCommand.configuration.commandName else { return }
        SocketServer.chooseEventLoops()
        SocketServer.runTasksOnEventLoops()
    }
}
