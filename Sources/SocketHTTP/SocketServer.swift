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
    /// per `sync_interval`, does run on them. `vault gateway` does this too (`VaultCommand.prepareExecutor`;
    /// its key reload's Argon2id runs on a dispatch thread).
    ///
    /// NIO finds Swift's hook with `dlsym`, which finds nothing in a binary linked with a static
    /// Swift runtime (its `--exclude-libs ALL` hides the runtime's symbols): then the hook's address
    /// is taken at link time instead (`installHook`). Which of the two took it over is
    /// `takeover` (`nio`, `link`, or `none`).
    @discardableResult
    public static func runTasksOnEventLoops() -> Bool {
        let how: UInt8 = NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor() ? 1 : installHook() ? 2 : 0
        takeoverState.store(how, ordering: .relaxed)
        return how != 0
    }

    /// How `runTasksOnEventLoops` took over Swift's global executor in this process: `nio` (NIO's
    /// own `dlsym`), `link` (the address from the link), `none`.
    public static var takeover: String { ["none", "nio", "link"][Int(takeoverState.load(ordering: .relaxed))] }
    private static let takeoverState = Atomic<UInt8>(0)

    /// Whether a task started now runs on one of NIO's event loops (what the takeover is for): the
    /// sidecar's start line says so (`tasks_on_event_loops`).
    public static func tasksRunOnEventLoops() async -> Bool {
        await Task.detached { MultiThreadedEventLoopGroup.currentEventLoop != nil }.value
    }

    /// Sets how many event-loop threads NIO's singleton group (the servers', and with the takeover
    /// Swift's tasks') starts: `VAULT_EVENT_LOOPS` (1…64) when set, else one fewer than the cores
    /// NIO counts (affinity and cgroup quota), at least one. Call first thing in `main`, before
    /// anything uses NIO: the group is made once. The core left is the one a request's other
    /// threads run on: the store's writer (its COMMIT waits for the disk there), the gateway's
    /// fingerprint calls, and on a small box the gateway and the application. Issue 16 measured on
    /// 2 cores, against one loop per core: tokenize at c=8 +12 %, with a fifth less sidecar CPU
    /// per token (fewer wake-ups across cores); c=64 +10 % (docs/benchmarks.md).
    @discardableResult
    public static func chooseEventLoops() -> Int {
        let environment = Self.environment()
        eventLoopSettingRefused.store(eventLoopSettingProblem(environment: environment) != nil, ordering: .relaxed)
        // NIO's own variable, when set, is the operator's choice: NIO reads it itself.
        if getenv("NIO_SINGLETON_GROUP_LOOP_COUNT") != nil { return NIOSingletons.groupLoopCountSuggestion }
        let count = eventLoopCount(environment: environment, cores: System.coreCount)
        NIOSingletons.groupLoopCountSuggestion = count
        return count
    }

    /// `chooseEventLoops`'s count: `VAULT_EVENT_LOOPS` when it is a whole number from 1 to 64,
    /// else `cores - 1`, at least 1. Another value is refused (`eventLoopSettingProblem`): the
    /// count is then only what the process runs with until it stops.
    public static func eventLoopCount(environment: [String: String], cores: Int) -> Int {
        if let text = environment["VAULT_EVENT_LOOPS"], let n = Int(text), (1...64).contains(n) { return n }
        return max(1, cores - 1)
    }

    /// What is wrong with `VAULT_EVENT_LOOPS`: nil when it is unset, empty, or a whole number from
    /// 1 to 64. The value itself is not repeated.
    public static func eventLoopSettingProblem(environment: [String: String]) -> String? {
        guard let text = environment["VAULT_EVENT_LOOPS"], !text.isEmpty else { return nil }
        if let n = Int(text), (1...64).contains(n) { return nil }
        return eventLoopSettingRule
    }

    /// The refusal's message.
    public static let eventLoopSettingRule = "VAULT_EVENT_LOOPS must be a whole number from 1 to 64"

    /// Whether `chooseEventLoops` found `VAULT_EVENT_LOOPS` set to a value it refuses: the
    /// sidecar then stops at once with `CONFIG_INVALID` (`eventLoopSettingProblem`).
    public static var eventLoopSettingIsRefused: Bool { eventLoopSettingRefused.load(ordering: .relaxed) }
    private static let eventLoopSettingRefused = Atomic<Bool>(false)

    private static func environment() -> [String: String] {
        guard let v = getenv("VAULT_EVENT_LOOPS") else { return [:] }
        return ["VAULT_EVENT_LOOPS": String(cString: v)]
    }

    /// The event-loop threads NIO's singleton group has (after `chooseEventLoops`, or its default).
    public static var eventLoops: Int { NIOSingletons.groupLoopCountSuggestion }

    /// What NIO's takeover does once it has found the hook, with the hook's address taken at link
    /// time (`SwiftRuntimeHooks.enqueueGlobal`). Each job Swift would hand to its global pool goes
    /// to an event loop of NIO's singleton group, the current one when called on one (`any()` is
    /// sticky), as NIO's own hook does. Same assumptions as NIO's (the hook's type and its thin
    /// function pointer's layout), so only for the compilers NIO makes them for; false when
    /// another hook is set. A plain store, where NIO swaps atomically: it runs first thing in
    /// `main`, and an aligned pointer's store is not torn.
    private static func installHook() -> Bool {
        #if compiler(<6.6)
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
        #else
        return false
        #endif
    }

    /// The open-file limit a server runs with: its hard limit. Each client connection holds a
    /// file descriptor, and systemd starts services with a soft limit of 1,024 (hard 524,288):
    /// a thousand idle or slow connections from local callers would otherwise leave the server
    /// unable to accept one more, or to open its store's files. Nil when the soft limit is the
    /// hard one already.
    public static func raisedOpenFileLimit(_ current: rlimit) -> rlimit? {
        guard current.rlim_cur < current.rlim_max else { return nil }
        return rlimit(rlim_cur: current.rlim_max, rlim_max: current.rlim_max)
    }

    /// Sets `raisedOpenFileLimit` for this process (at a server's start); a refusal is logged.
    public static func raiseOpenFileLimit(logger: Logger) {
        var current = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &current) == 0, var raised = raisedOpenFileLimit(current) else { return }
        if setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &raised) != 0 {
            logger.warning("cannot raise the open-file limit", metadata: ["soft": "\(current.rlim_cur)", "hard": "\(current.rlim_max)"])
        }
    }

    public static func run<Responder: HTTPResponderBuilder>(
        _ router: Responder, socketPath: String, mode: mode_t, group: gid_t?, serverName: String, services: [any Service],
        logger: Logger, listening: @escaping @Sendable () -> Void
    ) async throws where Responder.Responder.Context: InitializableFromSource<ApplicationRequestContextSource> {
        raiseOpenFileLimit(logger: logger)
        try SocketFile.prepare(socketPath)
        let bindPath = try SocketFile.privateBindPath(for: socketPath)
        defer { SocketFile.discard(bindPath) }
        let app = Application(
            router: router,
            server: .http1(configuration: .init(additionalChannelHandlers: [PeerCredentialsHandler(), ParserRefusalBodyHandler(), ConnectRefusalHandler()])),
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
