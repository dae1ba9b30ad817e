import GatewayAPI
import Hummingbird
import SocketHTTP

/// `GET /v1/health` (liveness, with the processor's name), `GET /v1/health/ready` (readiness:
/// `GatewayReadiness`) and `GET /metrics`: not audited.
struct HealthController: Sendable {
    let processorName: String
    let metrics: GatewayMetrics
    let readiness: Readiness

    static let endpoints: [GatewayEndpoint<Self>] = [
        .init(GatewayRoute(.get, "/v1/health")) { c, _, _ in JSONOut.response(.ok, "{\"status\":\"ok\",\"processor\":\"\(c.processorName)\"}") },
        .init(GatewayRoute(.get, "/v1/health/ready")) { c, _, _ in await c.readiness.response() },
        .init(GatewayRoute(.get, "/metrics")) { c, _, _ in .prometheus(c.metrics.exposition()) },
    ]

    func addRoutes<Context: RequestContext>(to group: RouterGroup<Context>) { group.add(Self.endpoints, controller: self) }
}

/// `GET /v1/keys`: the kids this gateway opens now. `vault keys rotate` waits for the new kid here
/// before it promotes it, so nothing is sealed to a key the gateway cannot open yet.
struct KeyController: Sendable {
    let openers: Openers

    static let endpoints: [GatewayEndpoint<Self>] = [
        .init(GatewayRoute(.get, "/v1/keys")) { c, _, _ in
            let ring = c.openers.current.ring
            return JSONOut.response(.ok, KeysAnswer.json(primary: ring.pinned?.primary.rawValue, opens: ring.openingKids.map(\.rawValue)))
        }
    ]

    func addRoutes<Context: RequestContext>(to group: RouterGroup<Context>) { group.add(Self.endpoints, controller: self) }
}
