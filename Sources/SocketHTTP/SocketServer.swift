#if canImport(Glibc)
import Glibc
#endif
import Hummingbird
import Logging
import NIOCore
import NIOPosix
import Synchronization
import ServiceLifecycle
import VaultCrypto

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
    /// NIO finds Swift's hook with `dlsym`: a binary that exports no symbol table must export that
    /// one (Package.swift; a release build without it ran every handler on Dispatch's threads).
    @discardableResult
    public static func runTasksOnEventLoops() -> Bool {
        let installed = NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor() || installHook()
        tasksOnEventLoopsState.store(installed, ordering: .relaxed)
        return installed
    }

    /// What NIO's takeover does once it has found the hook, with the hook's address taken at link
    /// time (`SwiftRuntimeHooks.enqueueGlobal`): a static Swift runtime is linked with
    /// `--exclude-libs ALL`, so NIO's `dlsym` finds nothing there. Each job Swift would hand to its
    /// global pool goes to an event loop of NIO's singleton group, the current one when called on
    /// one (`any()` is sticky), as NIO's own hook does. Same assumptions as NIO's: the hook's type
    /// and its thin function pointer's layout; false when another hook is already set.
    private static func installHook() -> Bool {
        typealias Hook = @convention(thin) (UnownedJob, @convention(thin) (UnownedJob) -> Void) -> Void
        let slot = SwiftRuntimeHooks.enqueueGlobal
        guard slot.load(as: UnsafeRawPointer?.self) == nil else { return false }
        let function = withUnsafeTemporaryAllocation(of: Hook.self, capacity: 1) { buffer -> UnsafeRawPointer in
            buffer.baseAddress!.initialize(to: { job, _ in
                MultiThreadedEventLoopGroup.singleton.any().executor.enqueue(ExecutorJob(job))
            })
            return buffer.baseAddress!.withMemoryRebound(to: UnsafeRawPointer.self, capacity: 1) { $0.pointee }
        }
        slot.storeBytes(of: function, as: UnsafeRawPointer.self)
        return true
    }

    /// Whether `runTasksOnEventLoops` took over Swift's global executor in this process (the
    /// sidecar's start line says so: `tasks_on_event_loops`).
    public static var tasksOnEventLoops: Bool { tasksOnEventLoopsState.load(ordering: .relaxed) }
    private static let tasksOnEventLoopsState = Atomic<Bool>(false)

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
