import Hummingbird
import SocketHTTP

/// `GET /v1/health` (liveness: the process answers), `GET /v1/health/ready` (readiness:
/// `SidecarReadiness`), `GET /metrics` and `GET /openapi.json`: any listed peer (the two health
/// routes also the sidecar's own uid and root, for probes: `PeerAuthorizationMiddleware`), not
/// audited.
struct SystemController: Sendable {
    let metrics: SidecarMetrics
    let readiness: Readiness

    static let endpoints: [SidecarEndpoint<Self>] = [
        .init(SidecarRoute(.get, "/v1/health", access: nil)) { _, _, _ in JSONOut.response(.ok, "{\"status\":\"ok\"}") },
        .init(SidecarRoute(.get, "/v1/health/ready", access: nil)) { c, _, _ in await c.readiness.response() },
        .init(SidecarRoute(.get, "/metrics", access: nil)) { c, _, _ in .prometheus(c.metrics.exposition()) },
        .init(SidecarRoute(.get, "/openapi.json", access: nil)) { _, _, _ in JSONOut.response(.ok, SidecarRoutes.openAPIDocument) },
    ]

    func addRoutes<Context: RequestContext>(to group: RouterGroup<Context>) { group.add(Self.endpoints, controller: self) }
}
