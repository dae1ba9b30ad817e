import Foundation
import Gateway
import Hummingbird
import HummingbirdTesting
import SocketHTTP
import Testing

/// The gateway's one route table (`GatewayRoutes.table`, made of its controllers' endpoints): the
/// documented routes are the routed ones, and the audited actions are those of docs/audit-log.md.
@Suite struct GatewayRouteTableTests {
    @Test func documentedRoutesAreRoutedAndAuditedActionsComeFromTheTable() async throws {
        #expect(GatewayRoutes.auditedActions == [
            "POST /v1/authorize": "authorize", "GET /v1/authorizations/{payment}": "payment_read",
            "POST /v1/authorizations/{payment}/confirm": "confirm", "POST /v1/fingerprints": "fingerprint",
            "POST /v1/operations": "operate", "GET /v1/operations/{operation}": "operation_read",
        ])
        #expect(Set(GatewayRoutes.documentedRoutes) == [
            "POST /v1/authorize", "GET /v1/authorizations/{payment}", "POST /v1/authorizations/{payment}/confirm",
            "POST /v1/sandbox/acs/{transaction}", "POST /v1/fingerprints", "GET /v1/keys", "GET /v1/health", "GET /v1/health/ready", "GET /metrics",
            "POST /v1/operations", "GET /v1/operations/{operation}",
        ])
        let f = try GatewayRouteTests.Fixture()
        defer { f.remove() }
        try await f.withApp { client in
            // Every documented route is really routed: an answer other than the router's bare 404.
            for route in GatewayRoutes.table {
                let path = route.path.replacingOccurrences(of: "{payment}", with: "pay_none").replacingOccurrences(of: "{transaction}", with: "none")
                    .replacingOccurrences(of: "{operation}", with: "re_none")
                try await client.execute(uri: path, method: route.method, headers: [.contentType: "application/json"], body: ByteBuffer(string: "{}")) { r in
                    let body = String(buffer: r.body)
                    #expect(!(r.status == .notFound && !body.contains("_NOT_FOUND")), "\(route.documented) is not routed: \(body)")
                }
            }
            try await client.execute(uri: "/v1/nothing", method: .get) { r in #expect(r.status == .notFound) }
        }
    }

    /// `GET /v1/health/ready`: the ledger's store answers, the ring opens a kid, a processor is set.
    @Test func readyChecksTheLedgerKeysAndProcessor() async throws {
        let f = try GatewayRouteTests.Fixture()
        defer { f.remove() }
        try await f.withApp { client in
            try await client.execute(uri: "/v1/health/ready", method: .get) { r in
                let body = String(buffer: r.body)
                #expect(r.status == .ok, "\(body)")
                #expect(body.hasPrefix(#"{"status":"ready","checks":{"store":{"status":"ok"},"keys":{"status":"ok","detail":"opens "#), "\(body)")
                #expect(body.hasSuffix(#"; fingerprint key absent"},"processor":{"status":"ok","detail":"sandbox"}}}"#), "\(body)")
            }
        }
    }
}
