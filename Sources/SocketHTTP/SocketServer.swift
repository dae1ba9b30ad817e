#if canImport(Glibc)
import Glibc
#endif
import Hummingbird
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle

/// Serves a router on a vault Unix socket, for both servers: HTTP/1.1 with the peer's
/// credentials on every connection (`PeerCredentialsHandler`); the socket is bound in a private
/// directory and linked into place with its mode and group already set once the server runs
/// (`SocketFile`), and `listening` is called then, and systemd told `READY=1` (`SystemdNotify`,
/// for `Type=notify` units). Runs, with `services`, until SIGTERM/SIGINT (graceful drain).
public enum SocketServer {
    /// Makes NIO's event loops Swift's global executor, so a request's handler runs on the
    /// event-loop threads instead of being handed to a pool of its own and back (issue 16: thread
    /// switches were the largest cost per token after the seal). The sidecar's `main` calls it
    /// first thing, before any task runs; false when it was too late (the process then runs as
    /// before). Work on these threads must not wait long: the store's short SQLite statements run
    /// on them, but a COMMIT (which waits for the disk) runs on the store's writer queue and a
    /// long read on a dispatch thread (`Database.scan`); the audit log's `fdatasync`, at most once
    /// per `sync_interval`, does run on them. The gateway does not do this: measured, it gained
    /// nothing on fingerprints and lost a little on payments.
    @discardableResult
    public static func runTasksOnEventLoops() -> Bool {
        NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
    }

    public static func run<Responder: HTTPResponderBuilder>(
        _ router: Responder, socketPath: String, mode: mode_t, group: gid_t?, serverName: String, services: [any Service],
        logger: Logger, listening: @escaping @Sendable () -> Void
    ) async throws where Responder.Responder.Context: InitializableFromSource<ApplicationRequestContextSource> {
        try SocketFile.prepare(socketPath)
        let bindPath = try SocketFile.privateBindPath(for: socketPath)
        defer { SocketFile.discard(bindPath) }
        let app = Application(
            router: router,
            server: .http1(configuration: .init(additionalChannelHandlers: [PeerCredentialsHandler(), ParserRefusalBodyHandler()])),
            configuration: .init(address: .unixDomainSocket(path: bindPath), serverName: serverName),
            services: services,
            onServerRunning: { channel in
                guard SocketFile.publish(bindPath, at: socketPath, mode: mode, group: group, logger: logger) else {
                    try? await channel.close()
                    return
                }
                listening()
                SystemdNotify.ready(status: "listening on \(socketPath)")
            },
            logger: logger)
        try await app.runService()
    }
}
