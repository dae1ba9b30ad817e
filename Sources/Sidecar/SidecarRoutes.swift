import CardRules
import Events
import Foundation
import HTTPTypes
import Hummingbird
import Payments
import SocketHTTP
import VaultCrypto
import Tokenizer

/// A route of the sidecar: method, path, audit action, and the roles that may call it (nil: any
/// listed peer; `PeerAuthorizationMiddleware`).
public typealias SidecarRoute = Route<Set<PeerPolicy.Role>?>
/// A sidecar route and the controller method answering it.
typealias SidecarEndpoint<Controller: Sendable> = Endpoint<Controller, Set<PeerPolicy.Role>?>

/// The sidecar's HTTP API (README "The sidecar", openapi.json): one controller per resource
/// (Sources/Sidecar/Controllers), and one route table made of their endpoints, from which come the
/// documented routes, the audited actions, the metrics labels and the roles each route needs.
public struct SidecarRoutes: Sendable {
    /// Largest request body accepted (a card or an envelope fits many times over).
    public static let maxBodyBytes = JSONBody.maxBytes

    let tokenizer: Tokenizer
    let validator: CardValidator
    let metrics: SidecarMetrics
    let payments: PaymentService?
    let customers: CustomerService?
    let sessions: SessionService?
    let mandates: MandateService?
    let readiness: Readiness
    let events: EventStore?
    /// Velocity limits of tokenize and validate (payments have theirs in `PaymentService`); nil: none.
    public var velocity: VelocityLimiter?
    /// Lookups of tokens that do not exist, per caller (`sidecar.token_lookup_misses`).
    public var lookups: VelocityLimiter?

    /// Routes over a tokenizer; `metrics` is what `GET /metrics` serves; without `payments` (no
    /// gateway configured) the payment routes answer 503 `GATEWAY_UNAVAILABLE`. `readiness` is
    /// what `GET /v1/health/ready` checks (nil: `SidecarReadiness` over the tokenizer's store and
    /// keys and the payments' gateway).
    public init(
        tokenizer: Tokenizer, validator: CardValidator = CardValidator(), metrics: SidecarMetrics = SidecarMetrics(),
        payments: PaymentService? = nil, customers: CustomerService? = nil, sessions: SessionService? = nil,
        mandates: MandateService? = nil, readiness: Readiness? = nil, events: EventStore? = nil
    ) {
        self.events = events
        self.readiness = readiness ?? SidecarReadiness.make(tokenizer: tokenizer, gateway: payments?.gateway)
        self.sessions = sessions
        self.mandates = mandates
        self.tokenizer = tokenizer
        self.validator = validator
        self.metrics = metrics
        self.payments = payments
        self.customers = customers
    }

    /// Every route served, from the controllers' endpoints (what `register(on:)` adds).
    public static let table: [SidecarRoute] =
        SystemController.endpoints.map(\.route) + TokenController.endpoints.map(\.route) + PaymentController.endpoints.map(\.route)
        + SandboxController.endpoints.map(\.route) + CustomerController.endpoints.map(\.route)
        + SessionController.endpoints.map(\.route) + MandateController.endpoints.map(\.route) + RefundController.endpoints.map(\.route)
        + ListController.endpoints.map(\.route) + EventController.endpoints.map(\.route)

    /// Every route served, as `METHOD /path` in OpenAPI notation; a test checks it against
    /// `openapi.json` and the router.
    public static let documentedRoutes = table.documentedRoutes()

    /// The audit log's action for each route that touches cards, tokens, payments or customers
    /// (docs/audit-log.md); health, metrics, the spec and validate are not audited.
    public static let auditedActions = table.auditedActions()

    /// The OpenAPI 3.1 document (Sources/Sidecar/Resources/openapi.json).
    public static let openAPIDocument: String = {
        guard let url = Bundle.module.url(forResource: "openapi", withExtension: "json"),
              let text = try? String(contentsOf: url, encoding: .utf8)
        else { return "{}" }
        return text
    }()

    /// Adds every route of `table` to `router`.
    public func register<Context: RequestContext>(on router: Router<Context>) {
        let group = router.group()
        SystemController(metrics: metrics, readiness: readiness).addRoutes(to: group)
        TokenController(tokenizer: tokenizer, validator: validator, metrics: metrics, velocity: velocity, lookups: lookups).addRoutes(to: group)
        PaymentController(payments: payments, metrics: metrics).addRoutes(to: group)
        SandboxController(payments: payments).addRoutes(to: group)
        CustomerController(customers: customers).addRoutes(to: group)
        SessionController(sessions: sessions, tokenizer: tokenizer, metrics: metrics).addRoutes(to: group)
        MandateController(mandates: mandates, metrics: metrics).addRoutes(to: group)
        RefundController(payments: payments).addRoutes(to: group)
        ListController(tokenizer: tokenizer, payments: payments, customers: customers).addRoutes(to: group)
        EventController(store: events).addRoutes(to: group)
    }

    /// A service this sidecar may lack: without a gateway, 503 `GATEWAY_UNAVAILABLE`.
    static func needGateway<Service>(_ service: Service?) throws(APIError) -> Service {
        guard let service else {
            throw APIError(.gatewayUnavailable, "this sidecar has no gateway (vault serve --gateway PATH)")
        }
        return service
    }

    /// `2026-11-23T12:50:59Z` (UTC, whole seconds).
    static func iso(_ d: Date) -> String { JSONOut.iso(d) }
}

/// A POST that creates something (a customer, a session, a mandate) under an optional
/// idempotency key (`CreateClaim`).
enum IdempotentCreate {
    /// The key of the request: the `Idempotency-Key` header's, the body's `idempotency_key`, both
    /// if equal (`IDEMPOTENCY_KEY_CONFLICT` if not), or nil when neither is given.
    static func key(header: String?, body: String?) throws(APIError) -> String? {
        guard header != nil || body != nil else { return nil }
        do throws(VaultError) { return try RequestFields.idempotencyKey(header: header, body: body) } catch { throw APIError(error) }
    }

    /// 201 with what was made, or 200 with what a replayed key made (`Idempotent-Replayed: true`).
    static func response(_ json: String, replayed: Bool) -> Response {
        guard replayed else { return JSONOut.response(.created, json) }
        var response = JSONOut.response(.ok, json)
        response.headers[.idempotentReplayed] = "true"
        return response
    }
}

extension HTTPField.Name {
    /// Set on the answer to a replayed idempotency key.
    static let idempotentReplayed = Self("Idempotent-Replayed")!
}
