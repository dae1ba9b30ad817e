import Foundation
import Gateway
import GatewayAPI
import HummingbirdTesting
import NIOCore
import Store
import Testing
import VaultCrypto

/// Capture, void and refund through the relay, against the local recording stand-in for a
/// processor (Tests/Interop/fake_processor.py, Stripe-style and Cashfree-style answers): by the
/// processor's reference, never the card; the operation id as the processor's idempotency key;
/// the ledger row written before sending; an unknown outcome (a timeout) left `unknown` and settled
/// by sending again under the same key; only the template's hosts, never a redirect. A template
/// without a section refuses that operation before anything is sent.
@Suite(.serialized) struct RelayOperationTests {
    typealias Fixture = GatewayRouteTests.Fixture
    typealias StandIn = RelayProcessorTests.StandIn

    @Test(arguments: OperationRequest.Kind.allCases)
    func aTemplateWithoutTheSectionRefusesTheOperationBeforeSending(kind: OperationRequest.Kind) async throws {
        let f = try Fixture()
        defer { f.remove() }
        let relay = try await RelayProcessorTests.load(RelayProcessorTests.template(url: "https://processor.invalid/v1/charges"), dir: f.dir)
        let request = OperationRequest(operationID: "re_" + RandomID.make(prefix: "").lowercased(), kind: kind, paymentID: "pay_x", amount: 100, currency: "EUR")
        await #expect(throws: ProcessorError.refused(.operationNotSupported, "the relay processor cannot send a \(kind.rawValue): its template has no such request; nothing was sent")) {
            try await relay.operate(request)
        }
        #expect(try await relay.operation(request.operationID) == nil)
    }

    /// A Stripe-style template with the three sections, sending to `base` (the stand-in).
    static func template(base: String, timeout: Double = 5, retryWithin: Double = 0, extraHeaders: [[String]] = []) -> [String: Any] {
        let headers = [["Idempotency-Key", "{{idempotency_key}}"], ["Authorization", "Bearer {{env:PROCESSOR_SECRET}}"]] + extraHeaders
        let errors: [String: Any] = ["failed_http_statuses": [400, 402, 404], "error_failure_code": "error.code"]
        func section(_ path: String, form: [[String]]?, response: [String: Any]) -> [String: Any] {
            var s: [String: Any] = ["method": "POST", "url": base + path, "headers": headers, "response": response.merging(errors) { a, _ in a }]
            if let form { s["form"] = form }
            return s
        }
        return [
            "name": "ops", "timeout_seconds": timeout,
            "request": [
                "method": "POST", "url": base + "/v1/payment_intents", "allow_http_loopback": true, "headers": headers,
                "form": [["amount", "{{amount}}"], ["capture_method", "{{capture_method}}"], ["payment_method_data[card][number]", "{{pan}}"],
                         ["payment_method_data[card][cvc]", "{{cvc}}"]],
            ] as [String: Any],
            "response": [
                "status": "status", "succeeded": ["succeeded"], "requires_capture": ["requires_capture"], "declined": ["failed"],
                "reference": "id", "declined_http_statuses": [402], "error_decline_code": "error.decline_code",
            ] as [String: Any],
            "settle": ["resend": true, "retry_within_seconds": retryWithin],
            "capture": section("/v1/payment_intents/{{reference}}/capture", form: [["amount_to_capture", "{{amount}}"]],
                               response: ["status": "status", "succeeded": ["succeeded"], "pending": ["processing"], "reference": "id"]),
            "void": section("/v1/payment_intents/{{reference}}/cancel", form: nil,
                            response: ["status": "status", "succeeded": ["canceled"], "reference": "id"]),
            "refund": section("/v1/refunds", form: [["payment_intent", "{{reference}}"], ["amount", "{{amount}}"]],
                              response: ["status": "status", "succeeded": ["succeeded"], "pending": ["pending"], "failed": ["failed", "canceled"],
                                         "failure_code": "failure_reason", "reference": "id"]),
        ]
    }

    static let environment = ["PROCESSOR_SECRET": "sk_test_relay_ops"]

    /// Authorizes `amount` on a test card through the gateway's route (`capture` false: held only).
    static func authorize(_ f: Fixture, _ relay: RelayProcessor, amount: Int, capture: Bool = false) async throws -> (String, String) {
        let envelope = try f.envelope("4242424242424242")
        let payment = RandomID.make(prefix: "pay_")
        try await RelayProcessorTests.withApp(f, relay) { client in
            let body = AuthorizeRequest.json(paymentID: payment, amount: amount, currency: "EUR", envelopeJSON: envelope.json, capture: capture)
            let (status, json, text) = try await GatewayRouteTests.authorize(client, body)
            #expect(status == 200 && json["status"] as? String == (capture ? "succeeded" : "requires_capture"), "\(text)")
        }
        // The processor's reference, as the ledger recorded it.
        switch try await relay.authorization(of: payment) {
        case .outcome(.authorized(let reference))?, .outcome(.succeeded(let reference))?: return (payment, reference)
        case let other: Issue.record("not authorized: \(String(describing: other))"); return (payment, "")
        }
    }

    static func op(_ kind: OperationRequest.Kind, _ payment: String, amount: Int) -> OperationRequest {
        let prefix = ["capture": "cap_", "void": "void_", "refund": "re_"][kind.rawValue]!
        return OperationRequest(operationID: RandomID.make(prefix: prefix).lowercased(), kind: kind, paymentID: payment, amount: amount, currency: "EUR")
    }

    /// The operations the stand-in received (capture, cancel, refund paths), as recorded.
    static func operations(_ s: StandIn) -> [[String: Any]] {
        s.requests().filter { ($0["path"] as? String).map { $0.hasSuffix("/capture") || $0.hasSuffix("/cancel") || $0 == "/v1/refunds" } == true }
    }

    /// No recorded operation request carries card data: not the PAN, not the CVC, anywhere.
    static func expectNoCardData(_ s: StandIn) throws {
        for r in operations(s) {
            let text = String(decoding: try JSONSerialization.data(withJSONObject: r), as: UTF8.self)
            #expect(!text.contains("4242424242424242") && !text.contains("cvc"), "\(text)")
        }
    }

    @Test(arguments: LedgerBackend.available)
    func authorizeCapturePartRefundTwiceThenRefuseMore(_ backend: LedgerBackend) async throws {
        let f = try Fixture()
        defer { f.remove() }
        let (ledger, _, cleanup) = try await backend.make(dir: f.dir)
        defer { Task { await cleanup() } }
        let s = try StandIn(dir: f.dir, name: "processor")
        defer { s.stop() }
        let relay = try await RelayProcessorTests.load(
            Self.template(base: "http://127.0.0.1:\(s.port)"), dir: f.dir, environment: Self.environment, ledger: ledger)
        let (payment, reference) = try await Self.authorize(f, relay, amount: 5000 - 1)
        #expect(reference.hasPrefix("pi_"))
        #expect(s.requests().first?["body"].map { "\($0)".contains("capture_method=manual") } == true)

        // Partial capture, through the gateway's route.
        let capture = Self.op(.capture, payment, amount: 3000)
        try await RelayProcessorTests.withApp(f, relay) { client in
            try await client.execute(uri: "/v1/operations", method: .post, headers: [.contentType: "application/json"], body: ByteBuffer(string: capture.json)) { r in
                let text = String(buffer: r.body)
                #expect(r.status.code == 200, "\(text)")
                #expect(GatewayOperationOutcome(json: text) == GatewayOperationOutcome(status: "succeeded", reference: reference), "\(text)")
            }
        }
        let sent = try #require(Self.operations(s).last)
        #expect(sent["path"] as? String == "/v1/payment_intents/\(reference)/capture")
        #expect(sent["body"] as? String == "amount_to_capture=3000")
        #expect((sent["headers"] as? [String: String])?["Idempotency-Key"] == capture.operationID)
        // A repeat answers the recorded outcome and sends nothing.
        #expect(try await relay.operate(capture).status == "succeeded")
        #expect(Self.operations(s).count == 1)

        // Two refunds, each its own key; the third over what is left is refused by the ledger, unsent.
        let r1 = try await relay.operate(Self.op(.refund, payment, amount: 1000))
        let r2 = try await relay.operate(Self.op(.refund, payment, amount: 1500))
        #expect(r1.status == "succeeded" && r2.status == "succeeded" && r1.reference != r2.reference && r1.reference?.hasPrefix("re_") == true)
        let refunds = Self.operations(s).filter { $0["path"] as? String == "/v1/refunds" }
        #expect(refunds.map { $0["body"] as? String } == ["payment_intent=\(reference)&amount=1000", "payment_intent=\(reference)&amount=1500"])
        await #expect(throws: ProcessorError.refused(.refundExceedsCaptured, "the refunds would exceed the captured amount (500 left)")) {
            try await relay.operate(Self.op(.refund, payment, amount: 501))
        }
        #expect(Self.operations(s).count == 3)
        try Self.expectNoCardData(s)
    }

    @Test func voidThenCaptureRefused() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let s = try StandIn(dir: f.dir, name: "processor")
        defer { s.stop() }
        let relay = try await RelayProcessorTests.load(Self.template(base: "http://127.0.0.1:\(s.port)"), dir: f.dir, environment: Self.environment)
        let (payment, reference) = try await Self.authorize(f, relay, amount: 2500)
        let void = try await relay.operate(Self.op(.void, payment, amount: 2500))
        #expect(void == GatewayOperationOutcome(status: "succeeded", reference: reference))
        let sent = try #require(Self.operations(s).last)
        #expect(sent["path"] as? String == "/v1/payment_intents/\(reference)/cancel" && sent["body"] as? String == "")
        await #expect(throws: ProcessorError.refused(.paymentNotCapturable, "the authorization was captured or voided already")) {
            try await relay.operate(Self.op(.capture, payment, amount: 2500))
        }
        #expect(Self.operations(s).count == 1)
        try Self.expectNoCardData(s)
    }

    /// The processor's refusals are `failed` with its code (a 4xx it documents, or a failed
    /// status); a 5xx is an unknown outcome, never `failed`.
    @Test func processorRefusalsAndFailures() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let s = try StandIn(dir: f.dir, name: "processor")
        defer { s.stop() }
        let relay = try await RelayProcessorTests.load(Self.template(base: "http://127.0.0.1:\(s.port)"), dir: f.dir, environment: Self.environment)
        let (payment, _) = try await Self.authorize(f, relay, amount: 9000, capture: true)
        // A refund the processor declines (status failed, its reason).
        let declined = try await relay.operate(Self.op(.refund, payment, amount: 666))
        #expect(declined.status == "failed" && declined.failureCode == "expired_or_canceled_card", "\(declined)")
        // A 4xx the template lists: failed with the processor's error code (here a capture of an
        // intent the processor does not know: 404 resource_missing).
        var wrongPath = Self.template(base: "http://127.0.0.1:\(s.port)")
        var capture = wrongPath["capture"] as! [String: Any]
        capture["url"] = "http://127.0.0.1:\(s.port)/v1/payment_intents/{{payment_id}}/capture"
        wrongPath["capture"] = capture
        let other = try await RelayProcessorTests.load(wrongPath, dir: f.dir, environment: Self.environment)
        let (unknownToIt, _) = try await Self.authorize(f, other, amount: 100)
        let refusedByIt = try await other.operate(Self.op(.capture, unknownToIt, amount: 100))
        #expect(refusedByIt.status == "failed" && refusedByIt.failureCode == "resource_missing", "\(refusedByIt)")
        let (held, _) = try await Self.authorize(f, relay, amount: 9000)
        // A 5xx: unknown, the row left unknown, GET answers pending.
        let failing = Self.op(.capture, held, amount: 5000)
        await #expect(throws: ProcessorError.outcomeUnknown("the processor answered 500")) { try await relay.operate(failing) }
        let row = try #require(try await relay.operation(failing.operationID))
        #expect(row.state == .unknown && row.reason == "the processor answered 500", "\(row)")
        try Self.expectNoCardData(s)
    }

    /// A timeout: the processor acted but its answer never came. The row is left `unknown`; the
    /// next post of the same operation (the sidecar's reconciler) takes it over and sends again
    /// under the same idempotency key; the processor answers the first result and acts once.
    @Test(arguments: LedgerBackend.available)
    func aTimeoutIsAnUnknownOutcomeSettledBySendingAgain(_ backend: LedgerBackend) async throws {
        let f = try Fixture()
        defer { f.remove() }
        let (ledger, _, cleanup) = try await backend.make(dir: f.dir)
        defer { Task { await cleanup() } }
        let s = try StandIn(dir: f.dir, name: "processor")
        defer { s.stop() }
        var timing = RelayProcessor.Timing()
        timing.margin = 0.2
        let relay = try await RelayProcessorTests.load(
            Self.template(base: "http://127.0.0.1:\(s.port)", timeout: 1, extraHeaders: [["X-Hang-Seconds", "3"]]), dir: f.dir,
            environment: Self.environment, ledger: ledger, timing: timing)
        let (payment, reference) = try await Self.authorize(f, relay, amount: 9000)
        let capture = Self.op(.capture, payment, amount: 7777)
        await #expect(throws: ProcessorError.outcomeUnknown("the processor did not answer within 1 s")) { try await relay.operate(capture) }
        let left = try #require(try await relay.operation(capture.operationID))
        #expect(left.state == .unknown && left.status == nil, "\(left)")
        // Another capture of the payment is refused meanwhile: this one may have captured.
        await #expect(throws: ProcessorError.refused(.paymentNotCapturable, "the authorization was captured or voided already")) {
            try await relay.operate(Self.op(.capture, payment, amount: 100))
        }
        // Settled: sent again with the same key, the first result answered, captured once.
        let settled = try await relay.operate(capture)
        #expect(settled == GatewayOperationOutcome(status: "succeeded", reference: reference))
        let sends = Self.operations(s)
        #expect(sends.count == 2 && sends.allSatisfy { ($0["headers"] as? [String: String])?["Idempotency-Key"] == capture.operationID })
        #expect(sends.filter { $0["charged"] as? Bool == true }.count == 1, "\(sends)")
        let row = try #require(try await relay.operation(capture.operationID))
        #expect(row.state == .done && row.status == "succeeded" && row.reference == reference)
        try Self.expectNoCardData(s)
    }

    /// Past the settlement deadline an unknown operation is not sent again (the processor may have
    /// forgotten its idempotency key): 504, for an operator to settle; nothing more is sent.
    @Test func pastTheDeadlineAnUnknownOperationIsNotSentAgain() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let s = try StandIn(dir: f.dir, name: "processor")
        defer { s.stop() }
        let clock = SettlementTests.Clock()
        let relay = try await RelayProcessorTests.load(
            Self.template(base: "http://127.0.0.1:\(s.port)", timeout: 1, extraHeaders: [["X-Hang-Seconds", "2"]]), dir: f.dir,
            environment: Self.environment, now: clock.now)
        let (payment, _) = try await Self.authorize(f, relay, amount: 9000, capture: true)
        let refund = Self.op(.refund, payment, amount: 7777)
        await #expect(throws: ProcessorError.outcomeUnknown("the processor did not answer within 1 s")) { try await relay.operate(refund) }
        clock.advance(86400 + 60)
        do {
            _ = try await relay.operate(refund)
            Issue.record("answered past the deadline")
        } catch {
            #expect(error.code == .gatewayUnavailable && error.reason.contains("past the settlement deadline"), "\(error)")
        }
        #expect(Self.operations(s).count == 1)
        #expect(try await relay.operation(refund.operationID)?.state == .unknown)
    }

    /// Within the template's retry window the call itself sends again, under the same key.
    @Test func aTimeoutIsSettledInTheCallWithinTheRetryWindow() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let s = try StandIn(dir: f.dir, name: "processor")
        defer { s.stop() }
        let relay = try await RelayProcessorTests.load(
            Self.template(base: "http://127.0.0.1:\(s.port)", timeout: 1, retryWithin: 8, extraHeaders: [["X-Hang-Seconds", "3"]]), dir: f.dir,
            environment: Self.environment)
        let (payment, _) = try await Self.authorize(f, relay, amount: 9000, capture: true)
        let refund = Self.op(.refund, payment, amount: 7777)
        #expect(try await relay.operate(refund).status == "succeeded")
        let sends = Self.operations(s)
        #expect(sends.count >= 2 && sends.filter { $0["charged"] as? Bool == true }.count == 1, "\(sends)")
    }

    /// An authorization whose answer gave no reference (a template without `response.reference`)
    /// has nothing for `{{reference}}`: refused before sending, nothing recorded.
    @Test func noReferenceNoOperation() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let s = try StandIn(dir: f.dir, name: "processor")
        defer { s.stop() }
        var template = Self.template(base: "http://127.0.0.1:\(s.port)")
        var response = template["response"] as! [String: Any]
        response.removeValue(forKey: "reference")
        template["response"] = response
        let relay = try await RelayProcessorTests.load(template, dir: f.dir, environment: Self.environment)
        let (payment, reference) = try await Self.authorize(f, relay, amount: 800)
        #expect(reference == "")
        let capture = Self.op(.capture, payment, amount: 800)
        await #expect(throws: ProcessorError.refused(
            .operationNotSupported, "the authorization left no processor reference (the template's response.reference); nothing was sent")) {
            try await relay.operate(capture)
        }
        #expect(try await relay.operation(capture.operationID) == nil)
        #expect(Self.operations(s).isEmpty)
    }

    /// A processor reference that would climb the path (`..`) or break a header (a control
    /// character) is never sent back: refused before sending, nothing recorded.
    @Test func aReferenceThatIsADotSegmentOrHoldsAControlCharacterIsNotSent() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let s = try StandIn(dir: f.dir, name: "processor")
        defer { s.stop() }
        let path = "\(f.dir)/relay-ledger.sqlite"
        let relay = try await RelayProcessorTests.load(
            Self.template(base: "http://127.0.0.1:\(s.port)"), dir: f.dir, environment: Self.environment, ledger: try await LedgerBackend.sqlite(path))
        let db = try Database(sqlitePath: path)
        for bad in ["..", ".", "pi_1\r\nX-Injected: 1"] {
            let (payment, reference) = try await Self.authorize(f, relay, amount: 800)
            #expect(!reference.isEmpty)
            _ = try await db.write("UPDATE vault_ledger SET reference = ? WHERE payment_id = ?", [bad, payment])
            let capture = Self.op(.capture, payment, amount: 800)
            do {
                _ = try await relay.operate(capture)
                Issue.record("a reference \(bad.debugDescription) was sent back")
            } catch {
                #expect(error == .refused(
                    .operationNotSupported,
                    "the processor reference of this authorization cannot be sent back (a dot segment or a control character); nothing was sent"))
            }
            #expect(try await relay.operation(capture.operationID) == nil)
        }
        #expect(Self.operations(s).isEmpty, "nothing reached the processor")
    }

    /// A redirect is never followed (nothing reaches where it points) and is an unknown outcome.
    @Test func aRedirectIsRefusedAndIsAnUnknownOutcome() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let s = try StandIn(dir: f.dir, name: "processor")
        let elsewhere = try StandIn(dir: f.dir, name: "elsewhere")
        defer { s.stop(); elsewhere.stop() }
        var template = Self.template(base: "http://127.0.0.1:\(s.port)")
        var refund = template["refund"] as! [String: Any]
        refund["url"] = "http://127.0.0.1:\(s.port)/redirect/307"
        refund["headers"] = (refund["headers"] as! [[String]]) + [["X-Redirect-To", "http://127.0.0.1:\(elsewhere.port)/v1/refunds"]]
        template["refund"] = refund
        let relay = try await RelayProcessorTests.load(template, dir: f.dir, environment: Self.environment)
        let (payment, _) = try await Self.authorize(f, relay, amount: 900, capture: true)
        let op = Self.op(.refund, payment, amount: 900)
        await #expect(throws: ProcessorError.outcomeUnknown("the processor answered a redirect (307), not followed")) { try await relay.operate(op) }
        #expect(elsewhere.requests().isEmpty, "\(elsewhere.requests())")
        #expect(try await relay.operation(op.operationID)?.state == .unknown)
    }

    /// An operation URL naming another host than the charge's does not load; one whose host
    /// depends on the operation is refused before sending (nothing recorded).
    @Test func anotherHostIsRefused() async throws {
        let f = try Fixture()
        defer { f.remove() }
        var template = Self.template(base: "https://api.processor.test")
        var capture = template["capture"] as! [String: Any]
        capture["url"] = "https://elsewhere.test/v1/capture"
        template["capture"] = capture
        var request = template["request"] as! [String: Any]
        request.removeValue(forKey: "allow_http_loopback")
        template["request"] = request
        let refused = await RelayProcessorTests.refusal(template, dir: f.dir, environment: Self.environment)
        #expect(refused.map { $0.contains("RELAY_URL_NOT_ALLOWED") && $0.contains("capture.url") } == true, "\(refused ?? "loaded")")

        let s = try StandIn(dir: f.dir, name: "processor")
        defer { s.stop() }
        var perOperation = Self.template(base: "http://127.0.0.1:\(s.port)")
        var req = perOperation["request"] as! [String: Any]
        req["allowed_hosts"] = ["127.0.0.1"]
        perOperation["request"] = req
        var refund = perOperation["refund"] as! [String: Any]
        refund["url"] = "http://{{currency_lower}}.example:\(s.port)/v1/refunds"
        perOperation["refund"] = refund
        let relay = try await RelayProcessorTests.load(perOperation, dir: f.dir, environment: Self.environment)
        let (payment, _) = try await Self.authorize(f, relay, amount: 900, capture: true)
        let op = Self.op(.refund, payment, amount: 900)
        do {
            _ = try await relay.operate(op)
            Issue.record("sent to a host the template does not name")
        } catch {
            #expect(error.code == .relayURLNotAllowed, "\(error)")
        }
        #expect(try await relay.operation(op.operationID) == nil)
        #expect(Self.operations(s).isEmpty)
    }

    /// Card placeholders, and a section without the processor's idempotency key, do not load.
    @Test func operationSectionsCarryNoCardDataAndAnIdempotencyKey() async throws {
        let f = try Fixture()
        defer { f.remove() }
        var withCard = Self.template(base: "https://api.processor.test")
        var refund = withCard["refund"] as! [String: Any]
        refund["form"] = [["amount", "{{amount}}"], ["card", "{{pan}}"]]
        withCard["refund"] = refund
        let refused = await RelayProcessorTests.refusal(withCard, dir: f.dir, environment: Self.environment)
        #expect(refused.map { $0.contains("RELAY_TEMPLATE_INVALID") && $0.contains("{{pan}}") } == true, "\(refused ?? "loaded")")
        var withoutKey = Self.template(base: "https://api.processor.test")
        var void = withoutKey["void"] as! [String: Any]
        void["headers"] = [["Authorization", "Bearer {{env:PROCESSOR_SECRET}}"]]
        withoutKey["void"] = void
        let refused2 = await RelayProcessorTests.refusal(withoutKey, dir: f.dir, environment: Self.environment)
        #expect(refused2.map { $0.contains("RELAY_TEMPLATE_INVALID") && $0.contains("idempotency") } == true, "\(refused2 ?? "loaded")")
    }
}
