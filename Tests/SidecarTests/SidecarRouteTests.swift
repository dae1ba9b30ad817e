import CardRules
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Sidecar
import Testing
import Tokenizer
import VaultCrypto

/// The sidecar's routes through the router (no socket): coded answers, nothing stored on error.
@Suite struct SidecarRouteTests {
    let publicKey = try! PublicKey(rawBytes: Array(repeating: 9, count: 32))

    func withApp(_ body: @escaping @Sendable (any TestClientProtocol, any TokenStore) async throws -> Void) async throws {
        let dir = NSTemporaryDirectory() + "vault-sidecar-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try await sqliteTokenStore(dir + "/t.sqlite")
        let tokenizer = Tokenizer(
            store: store, primaryKey: publicKey)
        let router = Router()
        SidecarRoutes(tokenizer: tokenizer).register(on: router)
        try await Application(router: router).test(.router) { client in try await body(client, store) }
    }

    static let json: HTTPFields = [.contentType: "application/json"]

    func post(_ client: any TestClientProtocol, _ uri: String, _ body: String, headers: HTTPFields = json) async throws -> (HTTPResponse.Status, [String: Any], String) {
        try await client.execute(uri: uri, method: .post, headers: headers, body: ByteBuffer(string: body)) { r in
            let text = String(buffer: r.body)
            return (r.status, (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:], text)
        }
    }

    @Test func tokenizeReadDelete() async throws {
        try await withApp { client, store in
            let (status, body, text) = try await post(client, "/v1/tokens", #"{"card":{"number":"4242 4242 4242 4242","exp_month":12,"exp_year":2030,"cvc":"123"}}"#)
            #expect(status == .created, "\(text)")
            let token = try #require(body["token"] as? String)
            #expect(token.hasPrefix("tok_"))
            #expect(!text.contains("4242424242424242") && !text.contains("4242 4242 4242 4242"))
            let card = try #require(body["card"] as? [String: Any])
            #expect(card["brand"] as? String == "visa" && card["last4"] as? String == "4242" && card["bin"] as? String == "424242")
            #expect(body["has_cvc"] as? Bool == true)

            try await client.execute(uri: "/v1/tokens/\(token)", method: .get) { r in
                #expect(r.status == .ok)
                #expect(String(buffer: r.body).contains("\"last4\":\"4242\""))
            }
            try await client.execute(uri: "/v1/tokens/\(token)", method: .delete) { r in #expect(r.status == .noContent) }
            try await client.execute(uri: "/v1/tokens/\(token)", method: .get) { r in
                #expect(r.status == .notFound)
                #expect(String(buffer: r.body).contains("TOKEN_NOT_FOUND"))
            }
            #expect(try await store.count() == 0)
        }
    }

    @Test func acceptsEnvelopesSealedByCallers() async throws {
        try await withApp { client, store in
            let card = try CardData(number: SecureBytes(Array("5555555555554444".utf8)), expiry: CardExpiry(month: 1, year: 2031))
            let envelope = try CardEnvelope.seal(card, to: publicKey)
            let (status, body, _) = try await post(client, "/v1/tokens", "{\"envelope\":\(envelope.json)}")
            #expect(status == .created)
            #expect((body["card"] as? [String: Any])?["brand"] as? String == "mastercard")
            let other = try PublicKey(rawBytes: Array(repeating: 1, count: 32))
            let foreign = try CardEnvelope.seal(card, to: other)
            let (s2, b2, _) = try await post(client, "/v1/tokens", "{\"envelope\":\(foreign.json)}")
            #expect(s2 == .unprocessableContent)
            #expect((b2["error"] as? [String: Any])?["code"] as? String == "KEY_MISMATCH")
            #expect(try await store.count() == 1)
        }
    }

    @Test(arguments: [
        (#"{"card":{"number":"4242424242424241","exp_month":12,"exp_year":2030}}"#, 422, "LUHN_CHECK_FAILED", "card.number"),
        (#"{"card":{"number":"4242x","exp_month":12,"exp_year":2030}}"#, 422, "NON_DIGIT_CHARACTERS", "card.number"),
        (#"{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2030,"cvc":"12"}}"#, 422, "INVALID_CVC_LENGTH", "card.cvc"),
        (#"{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2030,"extra":1}}"#, 422, "CARD_FIELD_UNKNOWN", "card"),
        (#"{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2030},"x":1}"#, 422, "REQUEST_FIELD_UNKNOWN", nil),
        (#"{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2030}"#, 400, "REQUEST_MALFORMED", nil),
        (#"{"card":{"number":"4242\u0000424242424242","exp_month":12,"exp_year":2030}}"#, 422, "NON_DIGIT_CHARACTERS", "card.number"),
        (#"[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]"#, 400, "REQUEST_MALFORMED", nil),
        (#"{}"#, 422, "REQUEST_FIELD_MISSING", "card"),
        (#"{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2030},"envelope":{}}"#, 422, "REQUEST_AMBIGUOUS", "envelope"),
    ] as [(String, Int, String, String?)])
    func hostileInputGetsCodedErrorsAndStoresNothing(body: String, status: Int, code: String, field: String?) async throws {
        try await withApp { client, store in
            let (s, json, text) = try await post(client, "/v1/tokens", body)
            #expect(s.code == status, "\(text)")
            let error = json["error"] as? [String: Any]
            #expect(error?["code"] as? String == code, "\(text)")
            if let field { #expect(error?["field"] as? String == field) }
            #expect(!text.contains("4242424242424241") && !text.contains("4242424242424242"))
            #expect(try await store.count() == 0)
        }
    }

    @Test func bodyLimitsContentTypeAndHugeNames() async throws {
        try await withApp { client, store in
            let huge = String(repeating: "a", count: 1_000_000)
            let (s1, j1, _) = try await post(client, "/v1/tokens", #"{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2030,"name":""# + huge + "\"}}")
            #expect(s1 == .contentTooLarge)
            #expect((j1["error"] as? [String: Any])?["code"] as? String == "BODY_TOO_LARGE")
            let (s2, j2, _) = try await post(client, "/v1/tokens", #"{"card":{}}"#, headers: [.contentType: "text/plain"])
            #expect(s2 == .unsupportedMediaType)
            #expect((j2["error"] as? [String: Any])?["code"] as? String == "UNSUPPORTED_MEDIA_TYPE")
            let name = String(repeating: "n", count: 300)
            let (s3, j3, _) = try await post(client, "/v1/tokens", #"{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2030,"name":""# + name + "\"}}")
            #expect(s3 == .contentTooLarge)
            #expect((j3["error"] as? [String: Any])?["field"] as? String == "card.name")
            var invalidUTF8 = Array(#"{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2030,"name":"a"#.utf8)
            invalidUTF8 += [0xC3, 0x28] + Array("\"}}".utf8)
            let s4 = try await client.execute(uri: "/v1/tokens", method: .post, headers: Self.json, body: ByteBuffer(bytes: invalidUTF8)) { $0.status }
            #expect(s4 == .badRequest)
            #expect(try await store.count() == 0)
        }
    }

    @Test func validateStoresNothingAndNeverEchoes() async throws {
        try await withApp { client, store in
            let (s, j, text) = try await post(client, "/v1/validate", #"{"number":"4242 4242 4242 4242"}"#)
            #expect(s == .ok)
            #expect(j["valid"] as? Bool == true && j["brand"] as? String == "visa")
            #expect(!text.contains("4242424242424242"))
            let (_, p, _) = try await post(client, "/v1/validate", #"{"number":"2","partial":true}"#)
            #expect(Set(p["candidates"] as? [String] ?? []) == ["mastercard", "jcb", "mir"])
            try await client.execute(uri: "/v1/health", method: .get) { r in #expect(r.status == .ok) }
            #expect(try await store.count() == 0)
        }
    }
}
