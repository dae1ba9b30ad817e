import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Payments
import Sidecar
import Store
import Testing
import Tokenizer
import VaultCrypto

/// Card numbers in fields that are not card fields (issue item 6): every free-text field and id
/// the sidecar accepts refuses one with `REQUEST_FIELD_CARD_NUMBER` naming the field, never
/// echoes it, and stores nothing; ordinary values pass.
@Suite struct FreeTextCardNumberTests {
    let publicKey = try! PublicKey(rawBytes: Array(repeating: 9, count: 32))

    /// Every service over one SQLite file; the gateway socket does not exist (nothing here may reach it).
    func withApp(_ body: @escaping @Sendable (any TestClientProtocol, Database) async throws -> Void) async throws {
        let dir = NSTemporaryDirectory() + "vault-freetext-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let db = try await openSQLite(dir + "/t.sqlite")
        let tokenizer = Tokenizer(store: SQLTokenStore(database: db), primaryKey: publicKey)
        let paymentStore = SQLPaymentStore(database: db)
        let customerStore = SQLCustomerStore(database: db)
        let customers = CustomerService(tokenizer: tokenizer, customers: customerStore)
        let payments = PaymentService(
            tokenizer: tokenizer, payments: paymentStore, gateway: GatewayClient(socketPath: dir + "/no-gateway.sock"), customers: customers,
            logger: Logger(label: "test"))
        let router = Router()
        SidecarRoutes(
            tokenizer: tokenizer, payments: payments, customers: customers,
            sessions: SessionService(sessions: paymentStore, payments: payments, tokenizer: tokenizer),
            mandates: MandateService(mandates: customerStore, customers: customers, payments: payments)
        ).register(on: router)
        try await Application(router: router).test(.router) { client in try await body(client, db) }
    }

    static func post(_ client: any TestClientProtocol, _ uri: String, _ body: String) async throws -> (HTTPResponse.Status, [String: Any], String) {
        try await client.execute(uri: uri, method: .post, headers: [.contentType: "application/json"], body: ByteBuffer(string: body)) { r in
            let text = String(buffer: r.body)
            return (r.status, (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:], text)
        }
    }

    static func rows(_ db: Database) async throws -> [String: Int] {
        var out: [String: Int] = [:]
        for table in ["payments", "sessions", "customers", "instruments", "mandates", "tokens"] {
            out[table] = try await db.query("SELECT COUNT(*) FROM vault_\(table)").first?.int(0) ?? -1
        }
        return out
    }

    /// The forms a card number takes in free text.
    static let pans = ["4242424242424242", "4242-4242-4242-4242", "4242 4242 4242 4242", "x4242424242424242y"]

    /// (route, body with `PAN` where the number goes, the field named in the error).
    static let fields: [(String, String, String)] = [
        ("/v1/payments", #"{"token":"tok_aaaaaaaaaaaaaaaaaaaaaaaaaa","amount":100,"currency":"EUR","idempotency_key":"PAN"}"#, "idempotency_key"),
        ("/v1/payments", #"{"token":"tok_PAN","amount":100,"currency":"EUR","idempotency_key":"k-1"}"#, "token"),
        ("/v1/payments", #"{"customer":"cus_PAN","amount":100,"currency":"EUR","idempotency_key":"k-1"}"#, "customer"),
        ("/v1/customers", #"{"reference":"PAN"}"#, "reference"),
        ("/v1/sessions", #"{"amount":100,"currency":"EUR","customer":"cus_PAN"}"#, "customer"),
        ("/v1/sessions/SESSION/pay", #"{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2030,"cvc":"123"},"idempotency_key":"PAN"}"#, "idempotency_key"),
        ("/v1/customers/CUSTOMER/instruments", #"{"token":"PAN"}"#, "token"),
        ("/v1/customers/CUSTOMER/default_instrument", #"{"instrument":"PAN"}"#, "instrument"),
        ("/v1/customers/CUSTOMER/mandates",
         #"{"instrument":"ins_PAN","amount":100,"max_amount":100,"currency":"EUR","interval":"month","max_cycles":3,"expires_at":"2030-01-01T00:00:00Z"}"#,
         "instrument"),
    ]

    @Test func everyFreeTextFieldRefusesACardNumber() async throws {
        try await withApp { client, db in
            let (_, session, _) = try await Self.post(client, "/v1/sessions", #"{"amount":100,"currency":"EUR"}"#)
            let sessionID = try #require(session["id"] as? String)
            let (_, customer, _) = try await Self.post(client, "/v1/customers", #"{"reference":"order-2024-11-24-0001"}"#)
            let customerID = try #require(customer["id"] as? String)
            let before = try await Self.rows(db)
            for (route, template, field) in Self.fields {
                for pan in Self.pans {
                    // ids have no spaces or dashes: a number in an id is written bare
                    let value = template.contains("_PAN") ? pan.filter(\.isNumber) : pan
                    let body = template.replacingOccurrences(of: "PAN", with: value)
                    let uri = route.replacingOccurrences(of: "SESSION", with: sessionID).replacingOccurrences(of: "CUSTOMER", with: customerID)
                    let (status, json, text) = try await Self.post(client, uri, body)
                    let error = json["error"] as? [String: Any]
                    #expect(status == .unprocessableContent && error?["code"] as? String == "REQUEST_FIELD_CARD_NUMBER", "\(uri) \(value): \(text)")
                    #expect(error?["field"] as? String == field, "\(uri): \(text)")
                    #expect(!text.contains("4242424242424242") && !text.contains("4242-4242") && !text.contains("4242 4242"), "\(text)")
                }
            }
            #expect(try await Self.rows(db) == before, "a refused request stored something")
            let after = try await client.execute(uri: "/v1/sessions/\(sessionID)", method: .get) { String(buffer: $0.body) }
            #expect(after.contains(#""status":"open""#) && after.contains(#""attempts":0"#), "\(after)")
        }
    }

    @Test func ordinaryValuesAreAccepted() async throws {
        try await withApp { client, db in
            for reference in ["order-2024-11-24-0001", "subscriber-9", "invoice 2024/11/24 #0001", "4242"] {
                let (status, json, text) = try await Self.post(client, "/v1/customers", "{\"reference\":\"\(reference)\"}")
                #expect(status == .created && json["reference"] as? String == reference, "\(text)")
            }
            // An ordinary key passes the check and goes on (to a gateway that is not there).
            for key in ["order-2024-11-24-0001", "order-1", "sess-6F1C2B4A-1111-4C1E-9E55-0B7F7A4C2D11"] {
                let (_, json, text) = try await Self.post(
                    client, "/v1/payments", "{\"token\":\"tok_aaaaaaaaaaaaaaaaaaaaaaaaaa\",\"amount\":100,\"currency\":\"EUR\",\"idempotency_key\":\"\(key)\"}")
                #expect((json["error"] as? [String: Any])?["code"] as? String == "TOKEN_NOT_FOUND", "\(text)")
            }
            #expect(try await Self.rows(db)["customers"] == 4)
        }
    }
}
