import Store
import Audit
import CardRules
import Events
import Foundation
import Hummingbird
import Logging
import NIOCore
import Payments
import ServiceLifecycle
import SocketHTTP
import Tokenizer
import VaultCrypto

/// `vault serve`: the tokenizing sidecar on a Unix socket. Holds public keys only; refuses to
/// start when given a secret key or the fingerprint key (the gateway computes fingerprints).
public struct SidecarServer: Sendable {
    /// Settings, each with an embedded default.
    public struct Configuration: Sendable {
        public var socketPath = "vault.sock"
        /// File mode of the socket (who may connect is also checked per request: `PeerPolicy`).
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
        /// The gateway adapter's socket (payments); nil: payments answer 503.
        public var gatewaySocket: String? = "gateway.sock"
        /// A payment still `processing` after this long is reconciled with the gateway.
        public var reconcileAfter: Duration = .seconds(60)
        /// How long an authorization (`capture: false`) waits for its capture before it expires.
        public var authorizationTTL: TimeInterval = PaymentService.defaultAuthorizationTTL
        /// Failed payment attempts a checkout session allows before it is closed
        /// (`SESSION_ATTEMPTS_EXCEEDED`): the limit on card testing through sessions.
        public var sessionMaxAttempts = SessionService.defaultMaxAttempts
        /// Most CVCs held in memory at once (`HeldCVCs`; setting `sidecar.held_cvcs_max`).
        public var heldCVCsMax = HeldCVCs.defaultCapacity
        /// Velocity limits (docs/velocity.md): the defaults unless configured; empty: none.
        public var velocity = VelocityRule.defaults
        /// Lookups of tokens that do not exist, per caller (`sidecar.token_lookup_misses`); nil: no limit.
        public var lookupMisses: VelocityRule? = try? VelocityRule.lookupMisses(VelocityRule.defaultLookupMisses)
        /// A customer reference names at most one customer of the store.
        public var customerReferenceUnique = false
        /// Webhook delivery of events (docs/events.md); nil: events are kept for `GET /v1/events` only.
        public var webhook: WebhookDispatcher.Configuration?
        /// How long events are kept, delivered or not.
        public var eventRetention: TimeInterval = 30 * 86_400
        /// The audit log (docs/audit-log.md); nil: none.
        public var auditLogPath: String?
        /// Log each request (method, route, status, duration) at info level; off by default.
        public var logRequests = false
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
        if let gid = configuration.socketGroup { try SocketFile.checkCanChown(to: gid) }
        let keys = try SidecarKeys.load(directory: configuration.keysDirectory, logger: logger)
        let audit = try configuration.auditLogPath.map { (path) throws(VaultError) in try AuditLog.open(path, process: "sidecar") }
        defer { audit?.close() }
        // One database for every table (tokens, payments, sessions, customers, mandates), migrated
        // once; on PostgreSQL its client runs for as long as the sidecar serves.
        try await configuration.store.withDatabase(logger: logger, server: true) { db in try await serve(db, keys: keys, audit: audit) }
    }

    /// Serves over the opened store until SIGTERM/SIGINT.
    private func serve(_ db: Database, keys: SidecarKeys, audit: AuditLog?) async throws {
        var services: [any Service] = []
        let store = SQLTokenStore(database: db)
        let paymentStore = SQLPaymentStore(database: db)
        let customerStore = SQLCustomerStore(database: db)
        let metrics = SidecarMetrics()
        metrics.server.primaryKey(kid: keys.primary.kid.rawValue, created: keys.primaryCreated)
        metrics.server.auditLog(audit)
        services.append(PaymentBacklog(payments: paymentStore, metrics: metrics, logger: logger))
        let sealing = SealingKeys(keys.sealing)
        let keysDirectory = configuration.keysDirectory, reloadLogger = logger
        services.append(ReloadOnHangup {
            do throws(VaultError) {
                let fresh = try SidecarKeys.load(directory: keysDirectory, logger: reloadLogger)
                sealing.replace(with: fresh.sealing)
                metrics.server.primaryKey(kid: fresh.primary.kid.rawValue, created: fresh.primaryCreated)
                metrics.server.reloaded(success: true)
                audit?.record(AuditEvent(action: "key_reload", uid: getuid(), kid: fresh.primary.kid.rawValue))
                reloadLogger.notice("keys reloaded", metadata: ["primary_kid": "\(fresh.primary.kid)", "kids": "\(fresh.sealing.statuses.count)"])
            } catch {
                metrics.server.reloaded(success: false)
                reloadLogger.error("key reload failed; keeping the keys in use", metadata: ["error": "\(error.code)", "reason": "\(error.message)"])
                audit?.record(AuditEvent(action: "key_reload", outcome: error.code.rawValue, uid: getuid()))
            }
        })
        let fingerprinter = configuration.gatewaySocket.map { GatewayFingerprinter(gatewaySocket: $0) }
        let tokenizer = Tokenizer(
            store: store, keys: sealing, fingerprinter: fingerprinter, policy: configuration.policy, cvcs: HeldCVCs(capacity: configuration.heldCVCsMax))
        let velocity = configuration.velocity.isEmpty
            ? nil : VelocityLimiter(rules: configuration.velocity, counters: VelocityCounters(database: db), metrics: metrics, logger: logger)
        var sweeper = TokenSweeper(tokenizer: tokenizer, interval: configuration.sweepInterval, logger: logger, metrics: metrics)
        sweeper.velocity = velocity
        services.append(sweeper)
        if fingerprinter != nil {
            services.append(FingerprintFiller(tokenizer: tokenizer, interval: configuration.sweepInterval, logger: logger, metrics: metrics))
        }
        let customers = CustomerService(tokenizer: tokenizer, customers: customerStore, uniqueReference: configuration.customerReferenceUnique)
        if configuration.customerReferenceUnique {
            let shared = try await customerStore.adoptUniqueReferences()
            if shared > 0 {
                logger.warning("customer references are unique from now on; existing customers share some", metadata: ["customers_sharing": "\(shared)"])
            }
        }
        let payments = configuration.gatewaySocket.map {
            var p = PaymentService(
                tokenizer: tokenizer, payments: paymentStore, gateway: GatewayClient(socketPath: $0), customers: customers, logger: self.logger,
                metrics: metrics, authorizationTTL: self.configuration.authorizationTTL)
            p.velocity = velocity
            return p
        }
        let events = EventStore(database: db)
        let webhookMetrics = WebhookMetrics(registry: metrics.registry)
        services.append(EventRetention(
            events: events, retention: configuration.eventRetention, metrics: webhookMetrics, countBacklog: configuration.webhook != nil, logger: logger))
        if let webhook = configuration.webhook {
            services.append(WebhookDispatcher(events: events, configuration: webhook, metrics: webhookMetrics, logger: logger))
        }
        if let payments {
            let age = configuration.reconcileAfter
            services.append(PaymentReconciler(payments: payments, interval: min(.seconds(15), age), age: age))
        }
        let router = Router(context: VaultRequestContext.self)
        // First, so it sees every answer: Request-Id, Retry-After, coded 404 and 405.
        router.add(middleware: ConventionsMiddleware(routes: SidecarRoutes.table.methodsAndPaths(), logRequests: configuration.logRequests))
        router.add(middleware: MetricsMiddleware(metrics: metrics.server, routes: SidecarRoutes.table.methodsAndPaths()))
        if let audit { router.add(middleware: AuditMiddleware(log: audit, actions: SidecarRoutes.auditedActions)) }
        router.add(middleware: PeerAuthorizationMiddleware(policy: configuration.peers))
        let sessions = payments.map { SessionService(sessions: paymentStore, payments: $0, tokenizer: tokenizer, maxAttempts: self.configuration.sessionMaxAttempts) }
        let mandates = payments.map { MandateService(mandates: customerStore, customers: customers, payments: $0) }
        let readiness = SidecarReadiness.make(
            tokenizer: tokenizer, gateway: configuration.gatewaySocket.map(GatewayClient.init(socketPath:)), logger: logger)
        var routes = SidecarRoutes(
            tokenizer: tokenizer, metrics: metrics, payments: payments, customers: customers, sessions: sessions, mandates: mandates,
            readiness: readiness, events: events)
        routes.velocity = velocity
        routes.lookups = configuration.lookupMisses.map {
            VelocityLimiter(rules: [$0], counters: VelocityCounters(database: db), metrics: metrics, logger: self.logger)
        }
        routes.register(on: router)
        let socketPath = configuration.socketPath, logger = self.logger
        // Last: the first to hear of a graceful shutdown, so its line comes before the drain.
        services.append(ShutdownNotice("vault sidecar", logger: logger))
        let onLoops = await SocketServer.tasksRunOnEventLoops()
        let webhookSummary = configuration.webhook.map { "\($0.endpoint)" } ?? "(none)"
        let storeSummary = configuration.store.summary, gateway = configuration.gatewaySocket ?? "(none: tokenizing only)"
        try await SocketServer.run(
            router, socketPath: socketPath, mode: configuration.socketMode, group: configuration.socketGroup, serverName: "vault",
            services: services, logger: logger
        ) {
            logger.notice("vault sidecar listening", metadata: [
                "version": "\(VaultVersion.string)", "socket": "\(socketPath)", "store": "\(storeSummary)", "gateway": "\(gateway)",
                "primary_kid": "\(keys.primary.kid)", "kids": "\(keys.sealing.statuses.count)", "webhook": "\(webhookSummary)",
                "velocity_rules": "\(velocity?.rules.count ?? 0)", "tasks_on_event_loops": "\(onLoops) (\(SocketServer.takeover))", "event_loops": "\(SocketServer.eventLoops)",
            ])
        }
        logger.notice("vault sidecar stopped")
    }
}

