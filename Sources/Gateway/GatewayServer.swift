import Audit
import Foundation
import Hummingbird
import Logging
import PostgresNIO
import ServiceLifecycle
import SocketHTTP
import Store
import VaultCrypto
import VaultOpen

/// `vault gateway`: the gateway adapter (docs/threat-model.md). Its own process and Unix socket;
/// the only process that holds secret keys and opens envelopes. It disables core dumps for itself
/// before loading a key, and answers only peers on its allow-list (by default its own uid; in
/// production the sidecar's).
public struct GatewayServer: Sendable {
    public struct Configuration: Sendable {
        public var socketPath = "gateway.sock"
        public var socketMode: mode_t = 0o600
        public var socketGroup: gid_t?
        /// A directory of `*.key` files (and optionally `fingerprint.fk`); nil: `$CREDENTIALS_DIRECTORY`.
        public var keysDirectory: String?
        /// The key ring description (`ring.json`): nil uses `<keys>/ring.json` when it exists;
        /// without one, every key held opens.
        public var ringPath: String?
        /// A file holding the passphrase of protected secret keys; nil uses the credential
        /// `passphrase` in `$CREDENTIALS_DIRECTORY` when there is one.
        public var passphraseFile: String?
        public var processor = ProcessorChoice.sandbox
        /// The store that holds the processor ledger (docs/configuration.md "The store"): a SQLite
        /// file (embedded default), or a PostgreSQL store shared by any number of gateways (a
        /// payment id is charged at most once whichever gateway gets it).
        public var store = StoreLocation.sqlite(path: "gateway-ledger.sqlite")
        /// How often the background settler runs (`LedgerSettler`).
        public var settleInterval: Duration = .seconds(2)
        /// uids allowed to call (default: this process's own). Root may always ask `GET /v1/keys`
        /// (kids only), so `vault keys rotate --gateway` works as root.
        public var allowedUIDs: Set<UInt32> = [getuid()]
        /// The audit log (docs/audit-log.md); nil: none.
        public var auditLogPath: String?
        /// Log each request at info level (route template, status, duration); off by default.
        public var logRequests = false
        /// The guessing limit (DESIGN §9): distinct cards per truncation group whose fingerprints
        /// are answered in `fingerprintGuessWindow` seconds; past it a new card's is withheld.
        public var fingerprintGuessLimit = 20
        public var fingerprintGuessWindow = 86_400
        public init() {}
    }

    public enum ProcessorChoice: Sendable, Equatable {
        case sandbox
        /// A real processor through a relay template (RelayTemplate).
        case relay(templatePath: String)
    }

    public let configuration: Configuration
    public let logger: Logger

    public init(configuration: Configuration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    public func run() async throws {
        umask(0o077)
        guard ProcessHardening.disableCoreDumps() else {
            throw VaultError(.hardeningFailed, "cannot disable core dumps (prctl PR_SET_DUMPABLE / RLIMIT_CORE): refusing to load secret keys")
        }
        if let gid = configuration.socketGroup { try SocketFile.checkCanChown(to: gid) }
        let keys = try GatewayKeys.load(configuration, logger: logger)
        if keys.fingerprintKey == nil {
            logger.warning(
                "no fingerprint key: tokens get no fingerprint until one is here (vault keygen --fingerprint --out DIR, or vault keys move-fingerprint-key)")
        }
        // The template first: a template that cannot be used stops the start before the store is touched.
        let template: RelayTemplate?
        if case .relay(let templatePath) = configuration.processor {
            do throws(RelayTemplate.Invalid) { template = try RelayTemplate(path: templatePath) } catch {
                throw VaultError(error.code, error.message)
            }
        } else {
            template = nil
        }
        var services: [any Service] = []
        let database = try await Self.openStore(configuration.store, services: &services, logger: logger)
        let ledger = LedgerStore(database: database)
        let metrics = GatewayMetrics()
        if let primary = keys.primary { metrics.server.primaryKey(kid: primary.kid.rawValue, created: primary.created) }
        let processor: any PaymentProcessor
        if let template {
            do throws(RelayTemplate.Invalid) {
                processor = try RelayProcessor(template: template, ledger: ledger, metrics: metrics, logger: logger)
            } catch {
                throw VaultError(error.code, error.message)
            }
        } else {
            // The sandbox plays the 3DS server too: its result-signing key lives as long as this process.
            let threeDS = await ThreeDSValidator(apiKey: (0..<32).map { _ in UInt8.random(in: 0...255) }, issuer: "vault-sandbox-3ds")
            processor = SandboxProcessor(ledger: ledger, threeDS: threeDS)
        }
        services.append(LedgerSettler(ledger: ledger, processor: processor, metrics: metrics, interval: configuration.settleInterval, logger: logger))
        let audit = try configuration.auditLogPath.map { (path) throws(VaultError) in try AuditLog.open(path, process: "gateway") }
        defer { audit?.close() }
        metrics.server.auditLog(audit)
        let router = Router(context: VaultRequestContext.self)
        // First, as on the sidecar: Request-Id, Retry-After, coded 404 and 405.
        router.add(middleware: ConventionsMiddleware(routes: GatewayRoutes.table.methodsAndPaths(), logRequests: configuration.logRequests))
        router.add(middleware: MetricsMiddleware(metrics: metrics.server, routes: GatewayRoutes.table.methodsAndPaths()))
        if let audit { router.add(middleware: AuditMiddleware(log: audit, actions: GatewayRoutes.auditedActions)) }
        router.add(middleware: UIDAllowListMiddleware(allowed: configuration.allowedUIDs))
        let openers = Openers(EnvelopeOpener(ring: keys.ring, fingerprintKeys: keys.fingerprintKeys))
        GatewayRoutes(
            openers: openers, processor: processor, metrics: metrics, logger: logger, guessStore: database,
            limit: configuration.fingerprintGuessLimit, windowSeconds: configuration.fingerprintGuessWindow, audit: audit
        ).register(on: router)
        services.append(GuessPruner(store: FingerprintGuesses(database: database), windowSeconds: configuration.fingerprintGuessWindow, logger: logger))
        let configuration = self.configuration, reloadLogger = logger
        let reloader = ReloadOnHangup {
            do throws(VaultError) {
                // On a dispatch thread: a passphrase-protected key costs Argon2id (about a second),
                // and the gateway's tasks run on its event loops, which must not wait that long.
                let fresh = try await GatewayKeys.loadOffLoop(configuration, logger: reloadLogger)
                openers.replace(with: EnvelopeOpener(ring: fresh.ring, fingerprintKeys: fresh.fingerprintKeys))
                if let primary = fresh.primary { metrics.server.primaryKey(kid: primary.kid.rawValue, created: primary.created) }
                metrics.server.reloaded(success: true)
                audit?.record(AuditEvent(action: "key_reload", uid: getuid(), kid: fresh.ring.pinned?.primary.rawValue))
                reloadLogger.notice("keys reloaded", metadata: [
                    "opens": "\(fresh.ring.openingKids.map(\.rawValue).joined(separator: ","))", "fingerprint_keys": "\(fresh.fingerprintKids)",
                ])
            } catch {
                metrics.server.reloaded(success: false)
                reloadLogger.error("key reload failed; keeping the keys in use", metadata: ["error": "\(error.code)", "reason": "\(error.message)"])
                audit?.record(AuditEvent(action: "key_reload", outcome: error.code.rawValue, uid: getuid()))
            }
        }
        let socketPath = configuration.socketPath, logger = self.logger, storeSummary = configuration.store.summary
        let onLoops = await SocketServer.tasksRunOnEventLoops()
        try await SocketServer.run(
            router, socketPath: socketPath, mode: configuration.socketMode, group: configuration.socketGroup, serverName: "vault-gateway",
            services: services + [reloader, ShutdownNotice("vault gateway", logger: logger)], logger: logger
        ) {
            logger.notice("vault gateway listening", metadata: [
                "version": "\(VaultVersion.string)", "socket": "\(socketPath)", "opens": "\(keys.ring.openingKids.map(\.rawValue).joined(separator: ","))",
                "fingerprint_keys": "\(keys.fingerprintKids)", "processor": "\(processor.name)", "store": "\(storeSummary)",
                "tasks_on_event_loops": "\(onLoops) (\(SocketServer.takeover))", "event_loops": "\(SocketServer.eventLoops)",
            ])
        }
        logger.notice("vault gateway stopped")
    }
}

extension GatewayServer {
    /// Opens and migrates the ledger's store, as the gateway's zone (`Database.migrate(as:)`).
    /// PostgreSQL: probed first (a wrong address, password or certificate fails the start with its
    /// reason), migrated through a client of its own (under the store's advisory lock, so gateways
    /// and sidecars may start together; the gateway zone's steps only, its tables then held by
    /// the gateway's role), then served by a client that runs as a service of the gateway's
    /// ServiceGroup.
    /// - Throws: `STORE_UNAVAILABLE`, `STORE_TOO_NEW`, `STORE_TLS_INVALID`.
    static func openStore(_ location: StoreLocation, services: inout [any Service], logger: Logger) async throws -> Database {
        switch location {
        case .sqlite(let path):
            do throws(StoreError) {
                let database = try Database(sqlitePath: path, onCallingThread: true)
                try await database.migrate(as: .gateway)
                return database
            } catch {
                throw VaultError(store: error)
            }
        case .postgres(let location):
            let configuration = try location.configuration()
            try await location.probe(logger: logger)
            let migrating = PostgresClient(configuration: configuration, backgroundLogger: logger)
            do {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { await migrating.run() }
                    defer { group.cancelAll() }
                    try await Database(postgres: migrating, logger: logger).migrate(as: .gateway)
                }
            } catch let error as StoreError {
                throw VaultError(store: error)
            }
            let serving = PostgresClient(configuration: configuration, backgroundLogger: logger)
            services.append(serving)
            return Database(postgres: serving, logger: logger, preparedStatements: location.preparedStatements)
        }
    }
}

/// The gateway's keys: every `*.key` (mode 0600) of a directory, `fingerprint.fk` if there, and
/// the key ring description that pins which of them open.
package struct GatewayKeys {
    package let ring: KeyRing
    /// `fingerprint.fk` (primary) and any `fingerprint-<fkid>.fk` (held during a rotation).
    package let fingerprintKeys: FingerprintKeys?
    package var fingerprintKey: FingerprintKey? { fingerprintKeys?.primary }
    /// The fingerprint kids held, the primary first ("none" without a key): for the logs.
    package var fingerprintKids: String { fingerprintKeys?.all.map(\.kid).joined(separator: ",") ?? "none" }
    /// The primary kid and when it was made (`vault_key_age_seconds`): the pinned ring's primary
    /// and its `created` time; without a ring, the one secret key held and its file's modification
    /// time; nil for several keys and no ring (none is primary).
    package var primary: (kid: KeyID, created: Date)?

    package static func load(_ configuration: GatewayServer.Configuration, logger: Logger) throws(VaultError) -> GatewayKeys {
        let credentials = ProcessInfo.processInfo.environment["CREDENTIALS_DIRECTORY"]
        guard let dir = configuration.keysDirectory ?? credentials else {
            throw VaultError(.keyFileNotFound, "give --keys DIR or run with systemd credentials ($CREDENTIALS_DIRECTORY)")
        }
        let names: [String]
        do { names = try FileManager.default.contentsOfDirectory(atPath: dir).sorted() } catch {
            throw VaultError(.keyFileNotFound, "cannot read the keys directory \(dir)", field: dir)
        }
        let paths = names.filter { $0.hasSuffix(".key") }.map { dir + "/" + $0 }
        guard !paths.isEmpty else {
            throw VaultError(.keyFileNotFound, "no secret key (*.key) in \(dir)", field: dir)
        }
        var passphrase: SecureBytes?
        if let file = configuration.passphraseFile {
            passphrase = try ProtectedKey.readPassphrase(path: file)
        } else if let credentials, FileManager.default.fileExists(atPath: credentials + "/passphrase") {
            passphrase = try ProtectedKey.readPassphrase(path: credentials + "/passphrase")
        }
        var ring = try KeyRing(paths: paths, passphrase: passphrase)
        let ringPath = configuration.ringPath ?? (names.contains(KeyRingFile.fileName) ? dir + "/" + KeyRingFile.fileName : nil)
        if let ringPath {
            let description = try KeyRingFile.load(path: ringPath)
            try ring.pin(to: description)
            for kid in ring.kids where description.status(of: kid) == nil {
                logger.warning("secret key not in the key ring: it opens nothing", metadata: ["kid": "\(kid)"])
            }
        }
        let fk = try FingerprintKeys.load(directory: dir, names: names)
        var primary: (kid: KeyID, created: Date)?
        if let pinned = ring.pinned, let entry = pinned.entries.first(where: { $0.kid == pinned.primary }) {
            primary = (entry.kid, entry.created)
        } else if ring.pinned == nil, paths.count == 1, let kid = ring.kids.first {
            let modified = (try? FileManager.default.attributesOfItem(atPath: paths[0]))?[.modificationDate] as? Date
            primary = (kid, modified ?? Date())
        }
        return GatewayKeys(ring: ring, fingerprintKeys: fk, primary: primary)
    }
}

/// Only the listed uids may call the gateway (403 `PEER_NOT_ALLOWED` otherwise); root may also
/// ask `GET /v1/keys`, and the gateway's own uid and root its health routes (probes).
struct UIDAllowListMiddleware: RouterMiddleware {
    typealias Context = VaultRequestContext
    let allowed: Set<UInt32>

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let rootMayAsk = request.method == .get && request.uri.path == "/v1/keys"
        // Probes (`vault health`) run as the gateway's own user or root: the health routes answer them.
        let probe = request.method == .get && Readiness.probePaths.contains(request.uri.path)
        guard let peer = context.peer,
              allowed.contains(peer.uid) || (peer.uid == 0 && (rootMayAsk || probe)) || (probe && peer.uid == getuid())
        else {
            context.logger.notice("peer refused", metadata: ["uid": "\(context.peer.map { String($0.uid) } ?? "?")"])
            throw APIError(.peerNotAllowed, "only the sidecar may call the gateway")
        }
        return try await next(request, context)
    }
}

extension GatewayKeys {
    /// `load` on a dispatch thread, off the event loops (a key reload while requests are served).
    static func loadOffLoop(_ configuration: GatewayServer.Configuration, logger: Logger) async throws(VaultError) -> GatewayKeys {
        let result = await withCheckedContinuation { (c: CheckedContinuation<Result<GatewayKeys, VaultError>, Never>) in
            DispatchQueue.global().async {
                do throws(VaultError) { c.resume(returning: .success(try load(configuration, logger: logger))) } catch {
                    c.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }
}
