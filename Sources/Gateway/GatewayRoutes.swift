import Store
import Audit
import Foundation
import Hummingbird
import Logging
import GatewayAPI
import SocketHTTP
import VaultOpen

/// The gateway adapter's API, for the sidecar only (its own Unix socket, docs/threat-model.md);
/// one controller per resource (Sources/Gateway/Controllers), the wire types in GatewayAPI:
///
/// `POST /v1/authorize` `{"payment_id":"pay_…","amount":1000,"currency":"EUR","envelope":{…v1…}}`
/// → 200 `{"status":"succeeded|declined|requires_action","reference","decline_code","next_action"}`.
/// The envelope is opened here and nowhere else, its metadata re-derived and checked, the card
/// handed to the processor, and the plaintext wiped when the call returns. Answers carry the
/// outcome only, never card data.
///
/// When the outcome is not known (docs/errors.md "Unknown outcomes"):
/// - 503 `GATEWAY_UNAVAILABLE`: nothing was charged (no connection was made on the payment id's
///   first send, or a 5xx from a processor whose template says `server_errors: not_charged`);
///   the ledger has no row for it, the same payment id may be sent again.
/// - 504 `GATEWAY_UNAVAILABLE`: sent, the answer lost or unclear (a timeout, a dropped
///   connection, a 5xx, a 3xx, an unreadable answer) and not settled within the call: the
///   gateway settles it (status query, re-send on a re-post, deadline); ask
///   `GET /v1/authorizations/{payment_id}`.
/// - 504 `AUTHORIZATION_IN_PROGRESS`: another call (on any gateway of the store) is sending it or
///   asking about it now; never sent twice at once.
/// - 504 `AUTHORIZATION_PENDING`: being settled, nothing to do with this call now (the body is
///   the pending state below).
/// - 200 `{"status":"unknown",…}`: the settlement deadline passed (the shape below).
///
/// `POST /v1/operations`, `GET /v1/operations/{id}`: capture, void and refund by the
/// authorization's reference (`OperationController`).
///
/// `GET /v1/authorizations/{payment_id}`: what the gateway knows of a payment id.
/// - 200 `{"status":"succeeded|declined|requires_action",…}`: the outcome (as `POST /v1/authorize`
///   answers it).
/// - 404 `AUTHORIZATION_NOT_FOUND`: no ledger row: never sent, or the processor said it never
///   received it. Nothing was charged.
/// - 409 `AUTHORIZATION_PENDING`: sent, outcome not known yet, being settled:
///   `{"error":{"code":"AUTHORIZATION_PENDING","message"},"status":"pending","resend":true|false,
///   "status_query":true|false,"in_flight":true|false,"attempts":N,"next_try_at":"<ISO 8601>",
///   "deadline_at":"<ISO 8601>","reason":"…"}`. With `resend` true, re-posting the payment
///   (`POST /v1/authorize`, same payment id, amount, currency and envelope, once `next_try_at` has
///   passed and `in_flight` is false) re-sends it with the same processor idempotency key: how a
///   template without a status query settles. With `status_query`, the gateway asks the processor
///   by itself: just ask again later.
/// - 200 `{"status":"unknown","reason":"…","attempts":N,"deadline_at":"<ISO 8601>"}`: still not
///   known at the deadline: an operator settles it (`vault payments settle`).
public struct GatewayRoutes: Sendable {
    public static let maxBodyBytes = GatewayAPI.maxBodyBytes
    /// Most envelopes one `POST /v1/fingerprints` takes.
    public static let maxFingerprintBatch = GatewayAPI.maxFingerprintBatch

    /// Every route served, from the controllers' endpoints (what `register(on:)` adds).
    public static let table: [GatewayRoute] =
        HealthController.endpoints.map(\.route) + KeyController.endpoints.map(\.route) + AuthorizationController.endpoints.map(\.route)
        + FingerprintController.endpoints.map(\.route) + SandboxACSController.endpoints.map(\.route)
        + OperationController.endpoints.map(\.route)

    /// Every route served, as `METHOD /path` in OpenAPI notation.
    public static let documentedRoutes = table.documentedRoutes()
    /// The audit log's action per route (docs/audit-log.md).
    public static let auditedActions = table.auditedActions()

    let openers: Openers
    /// What `GET /metrics` serves.
    public let metrics: GatewayMetrics
    let processor: any PaymentProcessor
    let readiness: Readiness
    /// The guessing limit of `POST /v1/fingerprints` (nil: none, for tests of other routes).
    let guesses: GuessLimit?

    /// Routes over one opener; `GET /metrics` serves the relay's metrics (its settlement counters)
    /// when the processor is a relay.
    public init(opener: EnvelopeOpener, processor: any PaymentProcessor) {
        self.init(openers: Openers(opener), processor: processor, metrics: (processor as? RelayProcessor)?.metrics ?? GatewayMetrics())
    }

    /// Routes over a reloadable opener (SIGHUP swaps the keys and the key ring); readiness
    /// changes are logged to `logger`.
    public init(openers: Openers, processor: any PaymentProcessor, metrics: GatewayMetrics = GatewayMetrics(), logger: Logger? = nil) {
        self.init(openers: openers, processor: processor, metrics: metrics, logger: logger, guesses: nil)
    }

    /// Routes whose fingerprints meet the guessing limit (DESIGN §9): at most `limit` distinct
    /// cards per truncation group in `windowSeconds`, counted in `store`; withheld ones are
    /// audited in `audit`.
    public init(
        openers: Openers, processor: any PaymentProcessor, metrics: GatewayMetrics, logger: Logger, guessStore: Database, limit: Int, windowSeconds: Int,
        audit: AuditLog?, now: @escaping @Sendable () -> Date = Date.init
    ) {
        let guesses = GuessLimit(
            store: FingerprintGuesses(database: guessStore), limit: limit, window: windowSeconds, metrics: metrics, audit: audit, logger: logger, now: now)
        self.init(openers: openers, processor: processor, metrics: metrics, logger: logger, guesses: guesses)
    }

    init(openers: Openers, processor: any PaymentProcessor, metrics: GatewayMetrics, logger: Logger?, guesses: GuessLimit?) {
        self.openers = openers
        self.metrics = metrics
        self.processor = processor
        self.readiness = GatewayReadiness.make(openers: openers, processor: processor, logger: logger)
        self.guesses = guesses
    }

    /// Adds every route of `table` to `router`.
    public func register<Context: RequestContext>(on router: Router<Context>) {
        let group = router.group()
        HealthController(processorName: processor.name, metrics: metrics, readiness: readiness).addRoutes(to: group)
        KeyController(openers: openers).addRoutes(to: group)
        AuthorizationController(openers: openers, processor: processor, metrics: metrics).addRoutes(to: group)
        FingerprintController(openers: openers, metrics: metrics, guesses: guesses).addRoutes(to: group)
        SandboxACSController(sandbox: processor as? SandboxProcessor).addRoutes(to: group)
        OperationController(processor: processor, metrics: metrics).addRoutes(to: group)
    }
}

/// A route of the gateway: method, path and audit action (who may call is one list of uids for
/// every route: `UIDAllowListMiddleware`).
public typealias GatewayRoute = Route<Void>
/// A gateway route and the controller method answering it.
typealias GatewayEndpoint<Controller: Sendable> = Endpoint<Controller, Void>

/// The gateway's opener as one value that a reload swaps whole (requests in flight keep theirs).
public final class Openers: @unchecked Sendable {
    private let lock = NSLock()
    private var opener: EnvelopeOpener

    public init(_ opener: EnvelopeOpener) { self.opener = opener }

    /// The opener now.
    public var current: EnvelopeOpener {
        lock.lock()
        defer { lock.unlock() }
        return opener
    }

    /// Swaps in a new opener.
    public func replace(with opener: EnvelopeOpener) {
        lock.lock()
        self.opener = opener
        lock.unlock()
    }
}
