import Foundation
import Hummingbird
import HummingbirdTesting
import Store
import Testing
import VaultCrypto

/// Metadata through the routes (README "Metadata"): returned in every answer of a token and a
/// customer (create, GET, list), searched with `metadata[key]=value`, merged by a customer
/// update; its bounds refused with `METADATA_INVALID` and a card number in a key or a value with
/// `REQUEST_FIELD_CARD_NUMBER`, neither echoing the value nor storing anything.
@Suite struct MetadataRouteTests {
    static let card = #""card":{"number":"4242424242424242","exp_month":12,"exp_year":2030,"cvc":"123"}"#

    static func get(_ client: any TestClientProtocol, _ uri: String) async throws -> (HTTPResponse.Status, [String: Any], String) {
        try await client.execute(uri: uri, method: .get) { r in
            let text = String(buffer: r.body)
            return (r.status, (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:], text)
        }
    }

    static func metadataRows(_ db: Database) async throws -> Int { try await db.query("SELECT COUNT(*) FROM vault_metadata").first?.int(0) ?? -1 }

    @Test func tokensAndCustomersAnswerAndFindTheirMetadata() async throws {
        try await FreeTextCardNumberTests().withApp { client, db in
            let (status, token, _) = try await FreeTextCardNumberTests.post(client, "/v1/tokens", #"{\#(Self.card),"metadata":{"order":"A-1","empty":""}}"#)
            #expect(status == .created)
            #expect(token["metadata"] as? [String: String] == ["order": "A-1"], "an empty value stores nothing on a create")
            let id = try #require(token["token"] as? String)
            let (_, plain, _) = try await FreeTextCardNumberTests.post(client, "/v1/tokens", "{\(Self.card)}")
            #expect(plain["metadata"] as? [String: String] == [:], "always there, empty when none")
            let (_, read, _) = try await Self.get(client, "/v1/tokens/\(id)")
            #expect(read["metadata"] as? [String: String] == ["order": "A-1"])
            let (listed, list, _) = try await Self.get(client, "/v1/tokens?metadata%5Border%5D=A-1")
            #expect(listed == .ok)
            let data = try #require(list["data"] as? [[String: Any]])
            #expect(data.map { $0["token"] as? String } == [id] && data.first?["metadata"] as? [String: String] == ["order": "A-1"])

            let (made, customer, _) = try await FreeTextCardNumberTests.post(client, "/v1/customers", #"{"reference":"r-1","metadata":{"tier":"vip","crm":"7"}}"#)
            #expect(made == .created && customer["metadata"] as? [String: String] == ["tier": "vip", "crm": "7"])
            let cid = try #require(customer["id"] as? String)
            let (updated, changed, _) = try await FreeTextCardNumberTests.post(client, "/v1/customers/\(cid)", #"{"metadata":{"tier":"","region":"eu"}}"#)
            #expect(updated == .ok && changed["metadata"] as? [String: String] == ["crm": "7", "region": "eu"])
            let (_, found, _) = try await Self.get(client, "/v1/customers?metadata[region]=eu&limit=5")
            #expect((found["data"] as? [[String: Any]])?.map { $0["id"] as? String } == [cid])
            let (_, gone, _) = try await Self.get(client, "/v1/customers?metadata[tier]=vip")
            #expect((gone["data"] as? [[String: Any]])?.isEmpty == true)
        }
    }

    @Test func boundsAreRefusedWithACodeAndNothingIsStored() async throws {
        let tooMany = (0...Metadata.maxKeys).map { "\"k\($0)\":\"v\"" }.joined(separator: ",")
        let bodies: [(String, String)] = [
            (#"{\#(Self.card),"metadata":{"\#(String(repeating: "k", count: 41))":"v"}}"#, "metadata"),
            (#"{\#(Self.card),"metadata":{"":"v"}}"#, "metadata"),
            (#"{\#(Self.card),"metadata":{"k":"\#(String(repeating: "v", count: 501))"}}"#, "metadata[k]"),
            (#"{\#(Self.card),"metadata":{"k":1}}"#, "metadata[k]"),
            (#"{\#(Self.card),"metadata":["k"]}"#, "metadata"),
            (#"{\#(Self.card),"metadata":{\#(tooMany)}}"#, "metadata"),
            // Control characters (U+0000 would fail in PostgreSQL) are refused with the code.
            (#"{\#(Self.card),"metadata":{"k":"a\u0000b"}}"#, "metadata[k]"),
            (#"{\#(Self.card),"metadata":{"k\u0007":"v"}}"#, "metadata"),
        ]
        try await FreeTextCardNumberTests().withApp { client, db in
            for (body, field) in bodies {
                let (status, answer, _) = try await FreeTextCardNumberTests.post(client, "/v1/tokens", body)
                let error = answer["error"] as? [String: Any]
                #expect(status == .unprocessableContent && error?["code"] as? String == "METADATA_INVALID" && error?["field"] as? String == field, "\(field)")
            }
            for route in ["/v1/payments", "/v1/refunds"] {
                let (status, answer, _) = try await FreeTextCardNumberTests.post(client, route, #"{"metadata":{"k":"\#(String(repeating: "v", count: 501))"}}"#)
                #expect(status == .unprocessableContent && (answer["error"] as? [String: Any])?["code"] as? String == "METADATA_INVALID", "\(route)")
            }
            let (_, customer, _) = try await FreeTextCardNumberTests.post(client, "/v1/customers", #"{"metadata":{"a":"1"}}"#)
            let cid = try #require(customer["id"] as? String)
            let fifty = (0..<Metadata.maxKeys).map { "\"k\($0)\":\"v\"" }.joined(separator: ",")
            let (full, answer, _) = try await FreeTextCardNumberTests.post(client, "/v1/customers/\(cid)", #"{"metadata":{\#(fifty)}}"#)
            #expect(full == .unprocessableContent && (answer["error"] as? [String: Any])?["code"] as? String == "METADATA_INVALID", "51 after the merge")
            let (_, after, _) = try await Self.get(client, "/v1/customers/\(cid)")
            #expect(after["metadata"] as? [String: String] == ["a": "1"])
            #expect(try await db.query("SELECT COUNT(*) FROM vault_tokens").first?.int(0) == 0)
            #expect(try await Self.metadataRows(db) == 1)
            let (search, refused, _) = try await Self.get(client, "/v1/payments?metadata[\(String(repeating: "k", count: 41))]=v")
            #expect(search == .unprocessableContent && (refused["error"] as? [String: Any])?["code"] as? String == "METADATA_INVALID")
        }
    }

    @Test func aCardNumberInMetadataIsRefusedNotEchoedNotStored() async throws {
        try await FreeTextCardNumberTests().withApp { client, db in
            let (_, customer, _) = try await FreeTextCardNumberTests.post(client, "/v1/customers", "")
            let cid = try #require(customer["id"] as? String)
            for pan in FreeTextCardNumberTests.pans {
                let digits = pan.filter(\.isNumber)
                let cases: [(String, String, String)] = [
                    ("/v1/tokens", #"{\#(Self.card),"metadata":{"note":"\#(pan)"}}"#, "metadata[note]"),
                    ("/v1/tokens", #"{\#(Self.card),"metadata":{"\#(pan)":"x"}}"#, "metadata"),
                    ("/v1/payments", #"{"token":"tok_aaaaaaaaaaaaaaaaaaaaaaaaaa","amount":1,"currency":"EUR","metadata":{"note":"\#(pan)"}}"#, "metadata[note]"),
                    ("/v1/refunds", #"{"payment":"pay_aaaa","metadata":{"note":"\#(pan)"}}"#, "metadata[note]"),
                    ("/v1/customers", #"{"metadata":{"note":"\#(pan)"}}"#, "metadata[note]"),
                    ("/v1/customers/\(cid)", #"{"metadata":{"\#(pan)":"x"}}"#, "metadata"),
                ]
                for (route, body, field) in cases {
                    let (status, answer, text) = try await FreeTextCardNumberTests.post(client, route, body)
                    let error = answer["error"] as? [String: Any]
                    #expect(status == .unprocessableContent && error?["code"] as? String == "REQUEST_FIELD_CARD_NUMBER", "\(route) \(field)")
                    #expect(error?["field"] as? String == field)
                    #expect(!text.filter(\.isNumber).contains(digits) && !text.contains(pan), "never echoed")
                }
                let (status, answer, text) = try await Self.get(client, "/v1/tokens?metadata[note]=\(pan.replacingOccurrences(of: " ", with: "%20"))")
                #expect(status == .unprocessableContent && (answer["error"] as? [String: Any])?["code"] as? String == "REQUEST_FIELD_CARD_NUMBER")
                #expect(!text.filter(\.isNumber).contains(digits))
            }
            #expect(try await Self.metadataRows(db) == 0)
            #expect(try await db.query("SELECT COUNT(*) FROM vault_tokens").first?.int(0) == 0)
            let stored = try await db.query("SELECT COALESCE(metadata, '') FROM vault_customers").map { (r) throws(StoreError) in try r.string(0) }
            #expect(stored == [""])
        }
    }
}
