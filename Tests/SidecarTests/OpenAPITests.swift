import Foundation
import Hummingbird
import HummingbirdTesting
import Sidecar
import Testing
import Tokenizer
import VaultCrypto

/// The OpenAPI document kept in the repository matches the routes the sidecar serves.
@Suite struct OpenAPITests {
    @Test func documentMatchesTheRoutes() async throws {
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(SidecarRoutes.openAPIDocument.utf8)) as? [String: Any])
        #expect(doc["openapi"] as? String == "3.1.0")
        let paths = try #require(doc["paths"] as? [String: [String: Any]])
        var documented: Set<String> = []
        for (path, ops) in paths {
            for method in ["get", "post", "put", "delete", "patch"] where ops[method] != nil {
                documented.insert("\(method.uppercased()) \(path)")
            }
        }
        #expect(documented == Set(SidecarRoutes.documentedRoutes))

        // Every documented route is really routed: an answer other than the router's bare 404.
        let dir = NSTemporaryDirectory() + "vault-openapi-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let tokenizer = Tokenizer(
            store: try await sqliteTokenStore(dir + "/t.sqlite"), primaryKey: try PublicKey(rawBytes: Array(repeating: 1, count: 32)))
        let router = Router()
        SidecarRoutes(tokenizer: tokenizer).register(on: router)
        try await Application(router: router).test(.router) { client in
            for route in SidecarRoutes.documentedRoutes {
                let parts = route.split(separator: " ")
                let path = parts[1].replacingOccurrences(of: "{token}", with: "tok_aaaaaaaaaaaaaaaaaaaaaaaaaa")
                let method = HTTPRequest.Method(rawValue: String(parts[0]))!
                try await client.execute(uri: path, method: method, headers: [.contentType: "application/json"], body: ByteBuffer(string: "{}")) { r in
                    let body = String(buffer: r.body)
                    #expect(!(r.status == .notFound && !body.contains("TOKEN_NOT_FOUND")), "\(route) is not routed")
                }
            }
            try await client.execute(uri: "/v1/nothing", method: .get) { r in #expect(r.status == .notFound) }
        }
    }
}
