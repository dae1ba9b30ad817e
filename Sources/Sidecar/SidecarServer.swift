import CardRules
import Foundation
import Hummingbird
import Logging
import NIOCore
import PostgresNIO
import ServiceLifecycle
import Tokenizer
import VaultCrypto

/// `vault serve`: the tokenizing sidecar on a Unix socket. Holds public keys and the
/// fingerprint key only; refuses to start when given a secret key.
public struct SidecarServer: Sendable {
    /// Settings, each with an embedded default.
    public struct Configuration: Sendable {
        public var socketPath = "vault.sock"
        /// File mode of the socket (who may connect is also checked per connection, next issue).
        public var socketMode: mode_t = 0o660
        /// Group owning the socket (nil: the process's group); with mode 0660 its members may connect.
        public var socketGroup: gid_t?
        public var store = StoreLocation.sqlite(path: "vault.sqlite")
        public var keysDirectory = "Keys"
        public var policy = TokenPolicy()
        /// How often expired tokens and CVCs are purged.
        public var sweepInterval: Duration = .seconds(30)
        /// Who may connect and do what (default: this process's own uid, every role).
        public var peers = PeerPolicy.ownerOnly
        public init() {}
    }

    public let configuration: Configuration
    public let logger: Logger

    public init(configuration: Configuration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    /// Loads keys, opens the store, binds the socket and serves until SIGTERM/SIGINT (graceful drain).
    public func run() async throws {
        // Files this process creates (socket, SQLite and its WAL) start private; the socket then
        // gets its configured mode and group once bound.
        umask(0o077)
        if let gid = configuration.socketGroup { try Self.checkCanChown(to: gid) }
        let keys = try SidecarKeys.load(directory: configuration.keysDirectory, logger: logger)
        var services: [any Service] = []
        let store: any TokenStore
        switch configuration.store {
        case .sqlite(let path):
            store = try SQLiteTokenStore(path: path)
        case .postgres(let location):
            let pgConfiguration = try location.configuration()
            try await location.probe(logger: logger)
            let client = PostgresClient(configuration: pgConfiguration, backgroundLogger: logger)
            let pgStore = PostgresTokenStore(client: client, logger: logger)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await client.run() }
                try await pgStore.migrate()
                group.cancelAll()
            }
            let serving = PostgresClient(configuration: pgConfiguration, backgroundLogger: logger)
            services.append(serving)
            store = PostgresTokenStore(client: serving, logger: logger)
        }
        let metrics = SidecarMetrics()
        services.append(TokenSweeper(store: store, interval: configuration.sweepInterval, logger: logger, metrics: metrics))
        let tokenizer = Tokenizer(
            store: store, primaryKey: keys.primary, otherKeys: keys.all, fingerprintKey: keys.fingerprintKey, policy: configuration.policy)
        let router = Router(context: VaultRequestContext.self)
        router.add(middleware: MetricsMiddleware(metrics: metrics))
        router.add(middleware: PeerAuthorizationMiddleware(policy: configuration.peers))
        SidecarRoutes(tokenizer: tokenizer, metrics: metrics).register(on: router)
        try Self.prepareSocketPath(configuration.socketPath)
        let socketPath = configuration.socketPath, mode = configuration.socketMode, group = configuration.socketGroup
        let logger = self.logger
        let app = Application(
            router: router,
            server: .http1(additionalChannelHandlers: [PeerCredentialsHandler()]),
            configuration: .init(address: .unixDomainSocket(path: socketPath), serverName: "vault"),
            services: services,
            onServerRunning: { channel in
                if let group, chown(socketPath, uid_t.max, group) != 0 {
                    logger.critical("cannot give the socket to its group", metadata: ["gid": "\(group)", "errno": "\(errno)"])
                    try? await channel.close()
                    return
                }
                chmod(socketPath, mode)
                logger.notice("vault sidecar listening", metadata: [
                    "socket": "\(socketPath)", "primary_kid": "\(keys.primary.kid)", "keys": "\(keys.all.count)",
                ])
            },
            logger: logger)
        try await app.runService()
    }

    /// Resolves `--socket-group` (a name or a number).
    /// - Throws: `SOCKET_GROUP_UNKNOWN`.
    public static func groupID(_ text: String) throws(VaultError) -> gid_t {
        if let gid = gid_t(text) { return gid }
        guard let entry = getgrnam(text) else {
            throw VaultError(.socketGroupUnknown, "no group named \(JSONReader.printable(text))")
        }
        return entry.pointee.gr_gid
    }

    /// Only root may give a file to a group it is not in: refuse before binding anything.
    static func checkCanChown(to gid: gid_t) throws(VaultError) {
        if geteuid() == 0 || getegid() == gid { return }
        var groups = [gid_t](repeating: 0, count: Int(getgroups(0, nil)))
        let n = getgroups(Int32(groups.count), &groups)
        guard n >= 0, groups.prefix(Int(n)).contains(gid) else {
            throw VaultError(.socketGroupUnknown, "this process is not in group \(gid), so it cannot give the socket to it")
        }
    }

    /// Removes a stale socket file (nothing listening); refuses when a server is still there.
    static func prepareSocketPath(_ path: String) throws {
        var st = stat()
        guard lstat(path, &st) == 0 else { return }
        guard (st.st_mode & S_IFMT) == S_IFSOCK else {
            throw VaultError(.socketPathInUse, "\(path) exists and is not a socket")
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        _ = withUnsafeMutableBytes(of: &addr.sun_path) { buf in path.utf8CString.withUnsafeBytes { buf.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0.prefix(buf.count - 1))) } }
        let connected = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        } == 0
        if connected { throw VaultError(.socketPathInUse, "a server is already listening on \(path)") }
        unlink(path)
    }
}

extension VaultError.Code {
    /// The socket path belongs to a running server or is not a socket.
    public static let socketPathInUse = VaultError.Code(rawValue: "SOCKET_PATH_IN_USE")
    /// `--socket-group` names no group, or one this process may not give files to.
    public static let socketGroupUnknown = VaultError.Code(rawValue: "SOCKET_GROUP_UNKNOWN")
}
