import Foundation
import Testing

/// Dedupe (docs/dedupe.md) end to end with the real binaries, on SQLite and on PostgreSQL:
/// `"dedupe": true` answers the existing reusable token (200) and `vault tokenize --dedupe` too;
/// an attach of a card the customer holds answers its instrument (200), updated for a new
/// expiry; searching instruments by fingerprint across customers is the admin's.
@Suite(.serialized) struct DedupeCLITests {
    static var stores: [String] { GatewayCLITests.postgresSocket == nil ? ["sqlite"] : ["sqlite", "postgres"] }
    static func json(_ text: String) -> [String: Any] { PaymentsCLITests.json(text) }

    @Test(arguments: stores)
    func dedupeEndToEnd(_ backend: String) throws {
        let s = try PaymentsCLITests.Stack()
        try s.startGateway()
        let store = backend == "postgres" ? ["--store", try GatewayCLITests.postgresStore()] : []
        let peers = getuid() == 0 ? ["--socket-mode", "666", "--allow", "uid:0=admin", "--allow", "uid:65534=tokenize,pay"] : []
        try s.startSidecar(extra: store + peers)
        func card(_ number: String = "4242424242424242", month: Int = 12, year: Int = 2030, cvc: Bool = false) -> String {
            #""card":{"number":"\#(number)","exp_month":\#(month),"exp_year":\#(year)\#(cvc ? #","cvc":"123""# : "")}"#
        }

        // A reusable token, then the same one (200), also with a CVC (held for it); the CLI too.
        let (made, madeBody) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", #"{\#(card()),"dedupe":true}"#)
        #expect(made == 201, "\(madeBody)")
        let first = Self.json(madeBody)
        let token = try #require(first["token"] as? String)
        #expect(first["single_use"] as? Bool == false)
        let fingerprint = try #require((first["card"] as? [String: Any])?["fingerprint"] as? String, "\(madeBody)")
        let (again, againBody) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", #"{\#(card(cvc: true)),"dedupe":true}"#)
        #expect(again == 200 && Self.json(againBody)["token"] as? String == token && Self.json(againBody)["has_cvc"] as? Bool == true, "\(againBody)")
        let cli = try run(vaultBinary, ["tokenize", "--socket", s.sidecarSocket, "--dedupe"], input: Data(#"{"number":"4242424242424242","exp_month":12,"exp_year":2030}"#.utf8))
        #expect(cli.status == 0 && Self.json(cli.out)["token"] as? String == token, "\(cli.out) \(cli.stderr)")
        // Another expiry: a new token; dedupe with single_use true is refused, nothing stored.
        let (other, otherBody) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", #"{\#(card(month: 1, year: 2031)),"dedupe":true}"#)
        #expect(other == 201 && Self.json(otherBody)["token"] as? String != token, "\(otherBody)")
        let (refused, refusedBody) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", #"{\#(card()),"dedupe":true,"single_use":true}"#)
        #expect(refused == 422 && refusedBody.contains("REQUEST_FIELD_INVALID") && refusedBody.contains(#""field":"dedupe""#), "\(refusedBody)")
        let (listed, listBody) = try s.curl(s.sidecarSocket, "GET", "/v1/tokens?fingerprint=\(fingerprint)&limit=100")
        #expect(listed == 200 && (Self.json(listBody)["data"] as? [Any])?.count == 2, "\(listBody)")
        let metrics = try s.curl(s.sidecarSocket, "GET", "/metrics").1
        #expect(metrics.contains("vault_tokens_reused_total 2"), "\(metrics.split(separator: "\n").filter { $0.contains("reused") })")

        // Attach: the card again is the instrument held (200), a reissue updates it (200, new expiry).
        let (_, customerBody) = try s.curl(s.sidecarSocket, "POST", "/v1/customers", "{}")
        let customer = try #require(Self.json(customerBody)["id"] as? String)
        func attach(_ cardJSON: String) throws -> (Int, [String: Any]) {
            let (_, t) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", "{\(cardJSON)}")
            let tok = try #require(Self.json(t)["token"] as? String, "\(t)")
            let (status, body) = try s.curl(s.sidecarSocket, "POST", "/v1/customers/\(customer)/instruments", #"{"token":"\#(tok)"}"#)
            #expect(try s.curl(s.sidecarSocket, "GET", "/v1/tokens/\(tok)").0 == 404, "the token is consumed either way")
            return (status, Self.json(body))
        }
        let (created, instrument) = try attach(card())
        #expect(created == 201)
        let id = try #require(instrument["id"] as? String)
        let (same, sameBody) = try attach(card(cvc: true))
        #expect(same == 200 && sameBody["id"] as? String == id)
        let (reissued, reissuedBody) = try attach(card(month: 6, year: 2034))
        #expect(reissued == 200 && reissuedBody["id"] as? String == id)
        #expect((reissuedBody["card"] as? [String: Any])?["exp_year"] as? Int == 2034, "\(reissuedBody)")
        let (newCard, _) = try attach(card("5555555555554444"))
        #expect(newCard == 201)
        let (_, shown) = try s.curl(s.sidecarSocket, "GET", "/v1/customers/\(customer)")
        #expect((Self.json(shown)["instruments"] as? [Any])?.count == 2, "\(shown)")
        let (_, events) = try s.curl(s.sidecarSocket, "GET", "/v1/events?object=\(id)")
        #expect(events.contains("instrument.updated") && events.contains("instrument.created"), "\(events)")

        // The instrument can pay, with its new expiry.
        let (paid, payBody) = try s.curl(
            s.sidecarSocket, "POST", "/v1/payments", #"{"customer":"\#(customer)","amount":1999,"currency":"EUR","idempotency_key":"\#(PaymentsCLITests.key())"}"#)
        #expect(paid == 201 && Self.json(payBody)["status"] as? String == "succeeded", "\(payBody)")

        // Search by fingerprint: the admin across customers; a pay caller within one customer only.
        let (searched, searchBody) = try s.curl(s.sidecarSocket, "GET", "/v1/instruments?fingerprint=\(fingerprint)")
        #expect(searched == 200 && searchBody.contains(id), "\(searchBody)")
        if getuid() == 0 {
            let (across, acrossBody) = try PaymentsCLITests.asNobody(s, "GET", "/v1/instruments?fingerprint=\(fingerprint)")
            #expect(across == 403 && acrossBody.contains("PEER_NOT_ALLOWED"), "\(acrossBody)")
            let (within, withinBody) = try PaymentsCLITests.asNobody(s, "GET", "/v1/instruments?fingerprint=\(fingerprint)&customer=\(customer)")
            #expect(within == 200 && withinBody.contains(id), "\(withinBody)")
        }
    }
}
