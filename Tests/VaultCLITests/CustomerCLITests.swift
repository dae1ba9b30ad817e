import Foundation
import Testing

/// Customers end to end with the real binaries: idempotent creation, update, and erasure through
/// the API and through `vault customers delete` on the store.
@Suite(.serialized, .ownThread) struct CustomerCLITests {
    @Test func customersAreIdempotentUpdatableAndErasable() throws {
        var s = try ServeCLITests.Sidecar()
        defer { s.process?.terminate(); s.remove() }
        try s.start(extra: ["--customer-reference-unique"])
        func json(_ text: String) throws -> [String: Any] {
            try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "not an object: \(text)")
        }
        let (made, body) = try s.curl("POST", "/v1/customers", #"{"reference":"crm-7","idempotency_key":"make-crm-7"}"#)
        #expect(made == 201, "\(body)")
        let id = try #require(try json(body)["id"] as? String)
        let (replayed, again) = try s.curl("POST", "/v1/customers", #"{"reference":"crm-7","idempotency_key":"make-crm-7"}"#)
        let againID = try json(again)["id"] as? String
        #expect(replayed == 200 && againID == id, "\(again)")
        let (reused, reusedBody) = try s.curl("POST", "/v1/customers", #"{"reference":"crm-8","idempotency_key":"make-crm-7"}"#)
        #expect(reused == 409 && reusedBody.contains("IDEMPOTENCY_KEY_REUSED"), "\(reusedBody)")
        let (taken, takenBody) = try s.curl("POST", "/v1/customers", #"{"reference":"crm-7"}"#)
        #expect(taken == 409 && takenBody.contains("CUSTOMER_REFERENCE_TAKEN"), "\(takenBody)")
        let (pan, panBody) = try s.curl("POST", "/v1/customers/\(id)", #"{"reference":"4242 4242 4242 4242"}"#)
        #expect(pan == 422 && panBody.contains("REQUEST_FIELD_CARD_NUMBER") && !containsPAN(panBody), "\(panBody)")

        var instruments: [String] = []
        for number in ["4242424242424242", "5555555555554444"] {
            let (_, tokenBody) = try s.curl("POST", "/v1/tokens", #"{"card":{"number":"\#(number)","exp_month":12,"exp_year":2031,"cvc":"123"}}"#)
            let token = try #require(try json(tokenBody)["token"] as? String)
            let (attached, instrumentBody) = try s.curl("POST", "/v1/customers/\(id)/instruments", #"{"token":"\#(token)"}"#)
            #expect(attached == 201, "\(instrumentBody)")
            instruments.append(try #require(try json(instrumentBody)["id"] as? String))
        }
        let (updated, updatedBody) = try s.curl("POST", "/v1/customers/\(id)", #"{"reference":"crm-7b","default_instrument":"\#(instruments[1])"}"#)
        #expect(updated == 200, "\(updatedBody)")
        let customer = try json(updatedBody)
        #expect(customer["reference"] as? String == "crm-7b" && customer["default_instrument"] as? String == instruments[1])
        // crm-7 was given up by the update.
        #expect(try s.curl("POST", "/v1/customers", #"{"reference":"crm-7"}"#).0 == 201)

        // Erased on the store while the sidecar runs: what was erased is printed; the API no longer has it.
        let store = "sqlite:\(s.dir)/tokens.sqlite"
        let erased = try vault("customers", "delete", id, "--store", store, "--audit-log", s.dir + "/cli-audit.jsonl")
        #expect(erased.status == 0, "\(erased.stderr)")
        for instrument in instruments { #expect(erased.out.contains("erased instrument \(instrument)"), "\(erased.out)") }
        #expect(erased.out.contains("deleted customer \(id): 2 instruments erased, 0 mandates cancelled"), "\(erased.out)")
        #expect(try s.curl("GET", "/v1/customers/\(id)").0 == 404)
        // A retry of the request that made it: the key's customer is gone, 404 (openapi.json lists it).
        let (retried, retriedBody) = try s.curl("POST", "/v1/customers", #"{"reference":"crm-7","idempotency_key":"make-crm-7"}"#)
        #expect(retried == 404 && retriedBody.contains("CUSTOMER_NOT_FOUND"), "\(retriedBody)")
        let twice = try vault("customers", "delete", id, "--store", store)
        #expect(twice.status == 1 && twice.stderr.contains("CUSTOMER_NOT_FOUND"), "\(twice.stderr)")
        let audit = try String(contentsOfFile: s.dir + "/cli-audit.jsonl", encoding: .utf8)
        #expect(audit.contains(#""action":"customer_delete""#) && audit.contains(#""instruments":2"#), "\(audit)")
        // The line names the customer erased (an id, never card data).
        let line = try #require(audit.split(separator: "\n").first { $0.contains(#""action":"customer_delete""#) })
        #expect(line.contains(#""customer":"\#(id)""#), "\(line)")

        // Through the API: erased in the answer, gone afterwards.
        let (_, otherBody) = try s.curl("POST", "/v1/customers", "{}")
        let other = try #require(try json(otherBody)["id"] as? String)
        let (deleted, deletedBody) = try s.curl("DELETE", "/v1/customers/\(other)")
        #expect(deleted == 200 && deletedBody == #"{"id":"\#(other)","deleted":true,"erased":{"instruments":[],"mandates_cancelled":[]}}"#, "\(deletedBody)")
        #expect(try s.curl("DELETE", "/v1/customers/\(other)").0 == 404)
    }
}
