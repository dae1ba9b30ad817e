import Foundation
import Hummingbird
import HummingbirdTesting
import Sidecar
import SocketHTTP
import Testing
import Tokenizer
import VaultCrypto

/// Issue 14 item 6, the API's conventions (`ConventionsMiddleware`, `JSONBody.isJSON`): a
/// `Request-Id` on every answer, `Retry-After` on 503, coded 404/405/415 answers.
@Suite struct ConventionsTests {
    func withApp(_ body: @escaping @Sendable (any TestClientProtocol) async throws -> Void) async throws {
        let dir = NSTemporaryDirectory() + "vault-conventions-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let tokenizer = Tokenizer(
            store: try await sqliteTokenStore(dir + "/t.sqlite"), primaryKey: try PublicKey(rawBytes: Array(repeating: 3, count: 32)))
        let router = Router()
        router.add(middleware: ConventionsMiddleware(routes: SidecarRoutes.table.methodsAndPaths()))
        SidecarRoutes(tokenizer: tokenizer).register(on: router)
        try await Application(router: router).test(.router) { client in try await body(client) }
    }

    static func code(_ r: TestResponse) -> String? {
        let json = try? JSONSerialization.jsonObject(with: Data(String(buffer: r.body).utf8)) as? [String: Any]
        return (json?["error"] as? [String: Any])?["code"] as? String
    }

    @Test func unknownRouteAndWrongMethodGetCodedAnswers() async throws {
        try await withApp { client in
            try await client.execute(uri: "/v1/nothing", method: .get) { r in
                #expect(r.status == .notFound)
                #expect(Self.code(r) == "ROUTE_NOT_FOUND")
                #expect(r.headers[.contentType] == "application/json")
                #expect(r.headers[.allow] == nil)
            }
            try await client.execute(uri: "/v1/tokens", method: .put) { r in
                #expect(r.status == .methodNotAllowed)
                #expect(Self.code(r) == "METHOD_NOT_ALLOWED")
                #expect(Set((r.headers[.allow] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }) == ["POST", "GET"])
            }
            try await client.execute(uri: "/v1/tokens/tok_abc", method: .post) { r in
                #expect(r.status == .methodNotAllowed)
                #expect(Set((r.headers[.allow] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }) == ["GET", "DELETE"])
            }
        }
    }

    @Test func everyAnswerHasARequestIdAndUnavailableOnesRetryAfter() async throws {
        try await withApp { client in
            var ids: Set<String> = []
            for (uri, method) in [("/v1/health", HTTPRequest.Method.get), ("/v1/nothing", .get), ("/v1/tokens", .put), ("/v1/tokens/tok_abc", .get)] {
                try await client.execute(uri: uri, method: method, headers: [.requestID: "caller-chosen"]) { r in
                    let id = try #require(r.headers[.requestID])
                    #expect(id.wholeMatch(of: /[0-9a-f]{16,32}/) != nil, "\(uri): \(id)")
                    #expect(r.headers[.retryAfter] == nil)
                    ids.insert(id)
                }
            }
            #expect(ids.count == 4)
            // No gateway: 503 GATEWAY_UNAVAILABLE, with Retry-After.
            try await client.execute(
                uri: "/v1/payments", method: .post, headers: [.contentType: "application/json"],
                body: ByteBuffer(string: #"{"token":"tok_abc","amount":100,"currency":"EUR","idempotency_key":"k-one"}"#)
            ) { r in
                #expect(r.status == .serviceUnavailable)
                #expect(Self.code(r) == "GATEWAY_UNAVAILABLE")
                #expect(r.headers[.retryAfter] == "2")
                #expect(r.headers[.requestID] != nil)
            }
        }
    }

    @Test func onlyApplicationJSONWithAnOptionalUTF8Charset() async throws {
        for ok in ["application/json", "Application/JSON", "APPLICATION/JSON", " application/json ", "application/json; charset=utf-8", "application/json;charset=UTF-8", #"application/json; charset="utf-8""#] {
            #expect(JSONBody.isJSON(ok), "\(ok)")
        }
        for refused in [nil, "", "text/plain", "application/jso", "application/jsonx", "application/jsoN\u{0}", "application/json\u{e9}", "application/json-patch+json", "application/json; charset=latin1", "application/json; charset=utf-8; x=1", "application/json; boundary=x"] {
            #expect(!JSONBody.isJSON(refused), "\(refused ?? "nil")")
        }
        try await withApp { client in
            let card = #"{"number":"4242424242424242"}"#
            try await client.execute(uri: "/v1/validate", method: .post, headers: [.contentType: "application/json; charset=utf-8"], body: ByteBuffer(string: card)) { r in
                #expect(r.status == .ok)
            }
            try await client.execute(uri: "/v1/validate", method: .post, headers: [.contentType: "application/jsonx"], body: ByteBuffer(string: card)) { r in
                #expect(r.status == .unsupportedMediaType)
                #expect(Self.code(r) == "UNSUPPORTED_MEDIA_TYPE")
                #expect(r.headers[.requestID] != nil)
            }
        }
    }

    /// The `Idempotency-Key` header or the body's `idempotency_key`: either, or both if equal.
    @Test func idempotencyKeyFromTheHeaderOrTheBody() throws {
        #expect(try RequestFields.idempotencyKey(header: "k-1", body: nil) == "k-1")
        #expect(try RequestFields.idempotencyKey(header: nil, body: "k-2") == "k-2")
        #expect(try RequestFields.idempotencyKey(header: "k-3", body: "k-3") == "k-3")
        #expect(throws: VaultError.self) { try RequestFields.idempotencyKey(header: "k-4", body: "k-5") }
        do { _ = try RequestFields.idempotencyKey(header: "k-4", body: "k-5") } catch { #expect(error.code == .idempotencyKeyConflict) }
        do { _ = try RequestFields.idempotencyKey(header: nil, body: nil) } catch {
            #expect(error.code == .requestFieldMissing && error.field == "idempotency_key")
        }
        for bad in ["", "has space", "4242 4242 4242 4242", String(repeating: "k", count: 256)] {
            #expect(throws: VaultError.self) { try RequestFields.idempotencyKey(bad, reservedPrefix: "mandate:", field: "Idempotency-Key") }
        }
    }
}
