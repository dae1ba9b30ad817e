import Hummingbird
import Sidecar
import SocketHTTP
import Testing

/// The sidecar's one route table (`SidecarRoutes.table`, made of the controllers' endpoints)
/// yields what used to be kept by hand: the audited actions and the roles of each route.
/// (`OpenAPITests` checks the documented routes against openapi.json and the router.)
@Suite struct RouteTableTests {
    @Test func auditedActionsAreThoseOfTheAuditLog() {
        #expect(SidecarRoutes.auditedActions == [
            "POST /v1/tokens": "tokenize", "GET /v1/tokens/{token}": "read", "DELETE /v1/tokens/{token}": "delete",
            "POST /v1/payments": "pay", "GET /v1/payments/{payment}": "payment_read", "POST /v1/payments/{payment}/confirm": "confirm",
            "POST /v1/customers": "customer_create", "GET /v1/customers/{customer}": "customer_read",
            "POST /v1/customers/{customer}": "customer_update", "DELETE /v1/customers/{customer}": "customer_delete",
            "POST /v1/customers/{customer}/instruments": "attach", "POST /v1/customers/{customer}/default_instrument": "set_default",
            "DELETE /v1/customers/{customer}/instruments/{instrument}": "detach",
            "POST /v1/sessions": "session_create", "GET /v1/sessions/{session}": "session_read", "POST /v1/sessions/{session}/pay": "pay",
            "POST /v1/customers/{customer}/mandates": "mandate_create", "GET /v1/mandates/{mandate}": "mandate_read",
            "DELETE /v1/mandates/{mandate}": "mandate_cancel", "POST /v1/mandates/{mandate}/charges": "pay",
            "POST /v1/payments/{payment}/capture": "capture", "POST /v1/payments/{payment}/cancel": "cancel",
            "POST /v1/refunds": "refund", "GET /v1/refunds/{refund}": "refund_read",
            "GET /v1/payments": "payment_list", "GET /v1/refunds": "refund_list", "GET /v1/customers": "customer_list",
            "GET /v1/instruments": "instrument_list", "GET /v1/tokens": "token_list",
            "GET /v1/events": "event_list", "GET /v1/events/{event}": "event_read",
        ])
    }

    /// The roles of docs/configuration.md ("Peer roles"): tokenize creates tokens, validates and
    /// pays the sessions it is given; pay handles payments (capture, cancel, refunds), customers, mandates and sessions;
    /// admin does everything; health, metrics and the spec need only a listed peer.
    @Test func eachRouteNeedsTheRolesOfThePeerPolicy() {
        for route in SidecarRoutes.table {
            let (method, path) = (route.method, route.path)
            let expected: Set<PeerPolicy.Role>? =
                switch (method, path) {
                case (.get, "/v1/health"), (.get, "/v1/health/ready"), (.get, "/openapi.json"), (.get, "/metrics"): nil
                // A pay caller saves cards too, and may dedupe them (docs/dedupe.md).
                case (.post, "/v1/tokens"): [.tokenize, .pay, .admin]
                case (.post, "/v1/validate"): [.tokenize, .admin]
                case (.get, "/v1/tokens/{token}"): [.tokenize, .pay, .admin]
                // The list shows every caller's tokens (BIN, last 4, fingerprint): never to a
                // tokenize-only caller, which may read only the tokens whose ids it holds.
                case (.get, "/v1/tokens"): [.pay, .admin]
                case (.get, "/v1/instruments"): [.pay, .admin]
                // Events carry every caller's payments, customers and tokens' metadata.
                case (.get, "/v1/events"), (.get, "/v1/events/{event}"): [.pay, .admin]
                case (_, _) where path.hasPrefix("/v1/payments") || path.hasPrefix("/v1/customers") || path.hasPrefix("/v1/mandates")
                    || path.hasPrefix("/v1/refunds"): [.pay, .admin]
                case (.post, "/v1/sandbox/3ds/{transaction}"): [.tokenize, .pay, .admin]
                case (.post, "/v1/sessions"): [.pay, .admin]
                case (.get, "/v1/sessions/{session}"), (.post, "/v1/sessions/{session}/pay"): [.tokenize, .pay, .admin]
                default: [.admin]
                }
            #expect(route.access == expected, "\(route.documented)")
        }
    }

    @Test func oneEntryPerRouteAndTheMetricsLabelIsTheTemplate() {
        #expect(Set(SidecarRoutes.documentedRoutes).count == SidecarRoutes.table.count)
        for route in SidecarRoutes.table {
            #expect(route.metricsLabel == route.path && !route.path.contains(":"), "\(route.documented)")
        }
    }
}
