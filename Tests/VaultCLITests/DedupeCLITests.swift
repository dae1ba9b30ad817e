import Foundation
import Testing

/// Dedupe (docs/dedupe.md) end to end with the real binaries, on SQLite and on PostgreSQL:
/// `"dedupe": true` answers the existing reusable token (200) and `vault tokenize --dedupe` too;
/// an attach of a card the customer holds answers its instrument (200), updated for a new
/// expiry; searching instruments by fingerprint across customers is the admin's.
@Suite(.serialized, .ownThread) struct DedupeCLITests {
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

        // A reusable token, then the same one (200) through the CLI, then with a CVC (held for it).
        let (made, madeBody) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", #"{\#(card()),"dedupe":true}"#)
        #expect(made == 201, "\(madeBody)")
        let first = Self.json(madeBody)
        let token = try #require(first["token"] as? String)
        #expect(first["single_use"] as? Bool == false)
        let fingerprint = try #require((first["card"] as? [String: Any])?["fingerprint"] as? String, "\(madeBody)")
        let cli = try run(vaultBinary, ["tokenize", "--socket", s.sidecarSocket, "--dedupe"], input: Data(#"{"number":"4242424242424242","exp_month":12,"exp_year":2030}"#.utf8))
        #expect(cli.status == 0 && Self.json(cli.out)["token"] as? String == token, "\(cli.out) \(cli.stderr)")
        let (again, againBody) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", #"{\#(card(cvc: true)),"dedupe":true}"#)
        #expect(again == 200 && Self.json(againBody)["token"] as? String == token && Self.json(againBody)["has_cvc"] as? Bool == true, "\(againBody)")
        // While its CVC is held, that token is its caller's: another dedupe gets a new one.
        let (fresh, freshBody) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", #"{\#(card()),"dedupe":true}"#)
        #expect(fresh == 201 && Self.json(freshBody)["token"] as? String != token && Self.json(freshBody)["has_cvc"] as? Bool == false, "\(freshBody)")
        // Another expiry: a new token; dedupe with single_use true is refused, nothing stored.
        let (other, otherBody) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", #"{\#(card(month: 1, year: 2031)),"dedupe":true}"#)
        #expect(other == 201 && Self.json(otherBody)["token"] as? String != token, "\(otherBody)")
        let (refused, refusedBody) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", #"{\#(card()),"dedupe":true,"single_use":true}"#)
        #expect(refused == 422 && refusedBody.contains("REQUEST_FIELD_INVALID") && refusedBody.contains(#""field":"dedupe""#), "\(refusedBody)")
        let (listed, listBody) = try s.curl(s.sidecarSocket, "GET", "/v1/tokens?fingerprint=\(fingerprint)&limit=100")
        #expect(listed == 200 && (Self.json(listBody)["data"] as? [Any])?.count == 3, "\(listBody)")
        let metrics = try s.curl(s.sidecarSocket, "GET", "/metrics").1
        #expect(metrics.contains("vault_tokens_reused_total 2"), "\(metrics.split(separator: "\n").filter { $0.contains("reused") })")

        // Attach: the card again is the instrument held (200), a reissue updates it (200, new expiry).
        let (_, customerBody) = try s.curl(s.sidecarSocket, "POST", "/v1/customers", "{}")
        let customer = try #require(Self.json(customerBody)["id"] as? String)
        func attach(_ cardJSON: String) throws -> (Int, [String: Any]) {
            let (_, t) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", "{\(cardJSON)}")
            let tok = try #require(Self.json(t)["token"] as? String, "\(t)")
            let (status, body) = try s.curl(s.sidecarSocket, "POST", "/v1/customers/\(customer)/instruments", #"{"token":"\#(tok)"}"#)
            #expect(try s.curl(s.sidecarSocket, "GET", "/v1/tokens/\(tok)").0 == 404, "a single-use token is consumed either way")
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
        // The older card typed again: the instrument held, its expiry kept.
        let (older, olderBody) = try attach(card())
        #expect(older == 200 && (olderBody["card"] as? [String: Any])?["exp_year"] as? Int == 2034, "\(olderBody)")
        let (newCard, _) = try attach(card("5555555555554444"))
        #expect(newCard == 201)
        // A reusable token (dedupe may have answered it to others) stays when attached.
        let (attachedReusable, _) = try s.curl(s.sidecarSocket, "POST", "/v1/customers/\(customer)/instruments", #"{"token":"\#(token)"}"#)
        #expect(attachedReusable == 200)
        #expect(try s.curl(s.sidecarSocket, "GET", "/v1/tokens/\(token)").0 == 200)
        let (_, shown) = try s.curl(s.sidecarSocket, "GET", "/v1/customers/\(customer)")
        #expect((Self.json(shown)["instruments"] as? [Any])?.count == 2, "\(shown)")
        let (_, events) = try s.curl(s.sidecarSocket, "GET", "/v1/events?object=\(id)")
        #expect(events.contains("instrument.updated") && events.contains("instrument.created"), "\(events)")

        // The instrument can pay, with its new expiry.
        let (paid, payBody) = try s.curl(
            s.sidecarSocket, "POST", "/v1/payments", #"{"customer":"\#(customer)","amount":1999,"currency":"EUR","idempotency_key":"\#(PaymentsCLITests.key())"}"#)
        #expect(paid == 201 && Self.json(payBody)["status"] as? String == "succeeded", "\(payBody)")

        // Search by fingerprint: the admin across customers; a pay caller within one customer only
        // (CI runs as root, where a second uid reaches the socket; as another user this part is skipped).
        let (searched, searchBody) = try s.curl(s.sidecarSocket, "GET", "/v1/instruments?fingerprint=\(fingerprint)")
        #expect(searched == 200 && searchBody.contains(id), "\(searchBody)")
        guard getuid() == 0 else { return }
        for across in ["/v1/instruments?fingerprint=\(fingerprint)", "/v1/instruments"] {
            let (status, body) = try PaymentsCLITests.asNobody(s, "GET", across)
            #expect(status == 403 && body.contains("PEER_NOT_ALLOWED"), "\(body)")
        }
        let (within, withinBody) = try PaymentsCLITests.asNobody(s, "GET", "/v1/instruments?fingerprint=\(fingerprint)&customer=\(customer)")
        #expect(within == 200 && withinBody.contains(id), "\(withinBody)")
        #expect(try PaymentsCLITests.asNobody(s, "POST", "/v1/tokens", #"{\#(card()),"dedupe":true}"#).0 == 200)

        // A tokenize-only caller (a checkout page) may not ask for dedupe: 200 or 201 would tell it
        // whether the vault holds a card.
        s.stop(s.sidecar)
        try s.startSidecar(extra: store + ["--socket-mode", "666", "--allow", "uid:0=admin", "--allow", "uid:65534=tokenize"])
        let (refusedPeer, refusedPeerBody) = try PaymentsCLITests.asNobody(s, "POST", "/v1/tokens", #"{\#(card()),"dedupe":true}"#)
        #expect(refusedPeer == 403 && refusedPeerBody.contains("PEER_NOT_ALLOWED") && !refusedPeerBody.contains("4242424242424242"), "\(refusedPeerBody)")
        #expect(try PaymentsCLITests.asNobody(s, "POST", "/v1/tokens", "{\(card())}").0 == 201)
    }
}
