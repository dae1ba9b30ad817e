import Foundation
import Testing

/// The payment lifecycle through the relay with the templates shipped in deploy/relay/, end to end
/// with the real binaries (`vault serve` → `vault gateway --processor relay:…` → the recording
/// stand-in, Tests/Interop/fake_processor.py): authorize only, capture part, refund twice, a refund
/// over the captured amount refused, a void; every operation sent by the processor's reference
/// with the operation id as its idempotency key, and no card data in any of them.
@Suite(.serialized, .ownThread) struct RelayLifecycleCLITests {
    typealias Stack = PaymentsCLITests.Stack
    static let json = LifecycleCLITests.json

    static let environment = [
        "STRIPE_SECRET_KEY": "sk_test_vault", "CASHFREE_CLIENT_ID": "cf_id", "CASHFREE_CLIENT_SECRET": "cf_secret",
    ]

    static func start(_ style: String, sidecar extra: [String] = []) throws -> (Stack, RelayCLITests.FakeProcessor) {
        let s = try Stack()
        let fake = try RelayCLITests.FakeProcessor(dir: s.dir)
        var env = environment
        env["RELAY_BASE_URL"] = "http://127.0.0.1:\(fake.port)"
        try s.startGateway(
            processor: ["--processor", "relay:" + (try RelayCLITests.template(style, dir: s.dir)), "--ledger", s.ledger], environment: env)
        try s.startSidecar(extra: extra)
        return (s, fake)
    }

    /// The operation requests the stand-in received.
    static func operations(_ fake: RelayCLITests.FakeProcessor) -> [[String: Any]] {
        fake.requests().filter {
            guard let path = $0["path"] as? String else { return false }
            return path.hasSuffix("/capture") || path.hasSuffix("/cancel") || path.hasSuffix("/refunds") || path.hasSuffix("/authorization")
        }
    }

    static func expectNoCardData(_ requests: [[String: Any]], pan: String) throws {
        for r in requests {
            let text = String(decoding: try JSONSerialization.data(withJSONObject: r), as: UTF8.self)
            #expect(!text.contains(pan) && !text.contains("cvc") && !text.contains("card_number"), "\(text)")
        }
    }

    @Test func stripeStyleAuthorizeCapturePartRefundTwiceAndVoid() throws {
        let (s, fake) = try Self.start("stripe-style")
        defer { fake.stop() }
        let pan = "5555555555554444"
        let id = try LifecycleCLITests.authorize(s, pan, amount: 4000)
        let authorization = try #require(fake.requests().first { $0["path"] as? String == "/v1/payment_intents" })
        #expect((authorization["body"] as? String)?.contains("capture_method=manual") == true)

        let (captured, capturedText) = try s.curl(s.sidecarSocket, "POST", "/v1/payments/\(id)/capture", #"{"amount":3000}"#)
        let p = Self.json(capturedText)
        #expect(captured == 200 && p["status"] as? String == "succeeded" && p["amount_captured"] as? Int == 3000, "\(capturedText)")
        // The processor's reference of the authorization (its payment intent), as the payment shows it.
        let reference = try #require(Self.json(try s.curl(s.sidecarSocket, "GET", "/v1/payments/\(id)").1)["reference"] as? String)
        #expect(reference.hasPrefix("pi_"))

        var refunds: [String] = []
        for amount in [1000, 1500] {
            let (made, madeText) = try s.curl(s.sidecarSocket, "POST", "/v1/refunds", #"{"payment":"\#(id)","amount":\#(amount)}"#)
            let r = Self.json(madeText)
            #expect(made == 201 && r["status"] as? String == "succeeded" && (r["reference"] as? String)?.hasPrefix("re_") == true, "\(madeText)")
            refunds.append(r["id"] as? String ?? "")
        }
        let (tooMuch, tooMuchText) = try s.curl(s.sidecarSocket, "POST", "/v1/refunds", #"{"payment":"\#(id)","amount":501}"#)
        #expect(tooMuch == 422 && tooMuchText.contains("REFUND_EXCEEDS_CAPTURED"), "\(tooMuchText)")
        let (got, gotText) = try s.curl(s.sidecarSocket, "GET", "/v1/payments/\(id)")
        #expect(got == 200 && Self.json(gotText)["amount_refunded"] as? Int == 2500, "\(gotText)")

        // What the processor got: by its reference, each under the operation's id as its key.
        let ops = Self.operations(fake)
        #expect(ops.count == 3, "\(ops)")
        #expect(ops.first?["path"] as? String == "/v1/payment_intents/\(reference)/capture" && ops.first?["body"] as? String == "amount_to_capture=3000")
        let refundBodies = ops.dropFirst().map { $0["body"] as? String ?? "" }
        #expect(refundBodies == zip([1000, 1500], refunds).map { "payment_intent=\(reference)&amount=\($0)&metadata%5Bvault_operation_id%5D=\($1)" }, "\(refundBodies)")
        #expect(ops.dropFirst().map { ($0["headers"] as? [String: String])?["Idempotency-Key"] } == refunds)

        // A void of another authorization.
        let other = try LifecycleCLITests.authorize(s, pan, amount: 700)
        let (voided, voidedText) = try s.curl(s.sidecarSocket, "POST", "/v1/payments/\(other)/cancel", "{}")
        #expect(voided == 200 && Self.json(voidedText)["status"] as? String == "canceled", "\(voidedText)")
        #expect(Self.operations(fake).last.map { ($0["path"] as? String)?.hasSuffix("/cancel") == true } == true)

        try Self.expectNoCardData(Self.operations(fake), pan: pan)
        s.stop(s.sidecar)
        s.stop(s.gateway)
        s.collectLogs()
        #expect(!containsPAN(s.logs), "a PAN in a log")
    }

    /// Cashfree-style: refunds of a paid order by the order id (the payment id), with
    /// `refund_id` the operation id; an authorization held for a capture is refused (Cashfree's
    /// pre-authorisation is an account setting, not a field of the request).
    @Test func cashfreeStyleRefundsTwice() throws {
        let (s, fake) = try Self.start("cashfree-style")
        defer { fake.stop() }
        let pan = "4242424242424242"
        let (paid, json, body) = try s.pay(try s.tokenize(pan), key: PaymentsCLITests.key(), amount: 5500)
        #expect(paid == 201 && json["status"] as? String == "succeeded", "\(body)")
        let id = try #require(json["id"] as? String)
        var refunds: [String] = []
        for amount in [1000, 2050] {
            let (made, madeText) = try s.curl(s.sidecarSocket, "POST", "/v1/refunds", #"{"payment":"\#(id)","amount":\#(amount)}"#)
            let r = Self.json(madeText)
            #expect(made == 201 && r["status"] as? String == "succeeded" && (r["reference"] as? String)?.hasPrefix("cfr_") == true, "\(madeText)")
            refunds.append(r["id"] as? String ?? "")
        }
        let ops = Self.operations(fake)
        #expect(ops.map { $0["path"] as? String } == ["/pg/orders/\(id)/refunds", "/pg/orders/\(id)/refunds"])
        let sent = ops.compactMap { ($0["body"] as? String).flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] } }
        #expect(sent.map { $0["refund_id"] as? String } == refunds)
        #expect(sent.map { ($0["refund_amount"] as? NSNumber)?.doubleValue } == [10.0, 20.5])
        #expect(ops.map { ($0["headers"] as? [String: String])?["x-idempotency-key"] } == refunds)

        let token = try s.tokenize(pan)
        let (held, heldText) = try s.curl(
            s.sidecarSocket, "POST", "/v1/payments",
            #"{"token":"\#(token)","amount":900,"currency":"EUR","capture":false,"idempotency_key":"auth-\#(UUID().uuidString)"}"#)
        #expect(held != 201 && heldText.contains("OPERATION_NOT_SUPPORTED"), "\(heldText)")
        try Self.expectNoCardData(Self.operations(fake), pan: pan)
    }

    /// A refund whose answer never comes (the stand-in acts, then answers after 10 s; the
    /// template's timeout is 1.5 s): the gateway leaves it unknown (504), the sidecar keeps the
    /// refund `processing`, and its reconciler posts it again: the gateway sends it again under the
    /// same idempotency key and the processor answers the first result. Refunded once.
    @Test func aRefundWhoseAnswerIsLostIsSettledByTheReconciler() throws {
        let (s, fake) = try Self.start("stripe-style", sidecar: ["--reconcile-after", "1"])
        defer { fake.stop() }
        let (paid, json, body) = try s.pay(try s.tokenize("5555555555554444"), key: PaymentsCLITests.key(), amount: 9000)
        #expect(paid == 201 && json["status"] as? String == "succeeded", "\(body)")
        let id = try #require(json["id"] as? String)
        let (made, madeText) = try s.curl(s.sidecarSocket, "POST", "/v1/refunds", #"{"payment":"\#(id)","amount":7777}"#)
        let first = Self.json(madeText)
        #expect(made == 201 || made == 202, "\(madeText)")
        #expect(first["status"] as? String == "processing", "\(madeText)")
        let refund = try #require(first["id"] as? String, "\(madeText)")
        var status = ""
        for _ in 0..<120 where status != "succeeded" {
            usleep(250_000)
            status = Self.json(try s.curl(s.sidecarSocket, "GET", "/v1/refunds/\(refund)").1)["status"] as? String ?? ""
        }
        #expect(status == "succeeded")
        let sends = Self.operations(fake)
        #expect(sends.count >= 2 && sends.allSatisfy { ($0["headers"] as? [String: String])?["Idempotency-Key"] == refund }, "\(sends)")
        #expect(sends.filter { $0["charged"] as? Bool == true }.count == 1, "refunded once: \(sends)")
        let (got, gotText) = try s.curl(s.sidecarSocket, "GET", "/v1/payments/\(id)")
        #expect(got == 200 && Self.json(gotText)["amount_refunded"] as? Int == 7777, "\(gotText)")
    }
}
