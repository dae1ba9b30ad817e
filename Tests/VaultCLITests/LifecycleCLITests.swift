import Foundation
import Testing

/// The payment lifecycle end to end with the real binaries (`vault serve` → `vault gateway`,
/// sandbox): authorize only, capture part, refund twice, a refund over the captured amount
/// refused; a void and a capture after it refused; idempotent replays that reach the processor
/// once; the refund test cards (failed, pending); an authorization that expires.
@Suite(.serialized, .ownThread) struct LifecycleCLITests {
    typealias Stack = PaymentsCLITests.Stack

    static func json(_ text: String) -> [String: Any] { (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:] }

    /// Authorizes `amount` on a fresh token of `pan` with `capture: false`; the payment's id.
    static func authorize(_ s: Stack, _ pan: String = "4242424242424242", amount: Int = 5000) throws -> String {
        let token = try s.tokenize(pan)
        let (status, body) = try s.curl(
            s.sidecarSocket, "POST", "/v1/payments",
            #"{"token":"\#(token)","amount":\#(amount),"currency":"EUR","capture":false,"idempotency_key":"auth-\#(UUID().uuidString)"}"#)
        #expect(status == 201, "\(body)")
        let p = json(body)
        #expect(p["status"] as? String == "requires_capture", "\(body)")
        #expect(p["capture_method"] as? String == "manual" && p["amount_captured"] as? Int == 0, "\(body)")
        #expect(p["authorization_expires_at"] is String, "\(body)")
        return p["id"] as? String ?? ""
    }

    /// The sandbox's operations recorded in the gateway's ledger (read with Python's sqlite3).
    static func ledgerOperations(_ s: Stack, _ paymentID: String) throws -> Int {
        let query = "SELECT COUNT(*) FROM vault_ledger_operations WHERE payment_id = '\(paymentID)'"
        let r = try run("/usr/bin/env", ["python3", "-c", "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchone()[0])", s.ledger, query])
        return Int(r.out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    @Test func authorizeCapturePartRefundTwiceAndRefuseMore() throws {
        let s = try Stack()
        try s.startGateway()
        try s.startSidecar()
        let id = try Self.authorize(s)

        // A capture above the authorization is refused; a partial capture succeeds.
        let (over, overBody) = try s.curl(s.sidecarSocket, "POST", "/v1/payments/\(id)/capture", #"{"amount":5001}"#)
        #expect(over == 422 && overBody.contains("CAPTURE_EXCEEDS_AUTHORIZED"), "\(overBody)")
        let captureBody = #"{"amount":3000,"idempotency_key":"cap-\#(id)"}"#
        let (captured, capturedText) = try s.curl(s.sidecarSocket, "POST", "/v1/payments/\(id)/capture", captureBody)
        let p = Self.json(capturedText)
        #expect(captured == 200 && p["status"] as? String == "succeeded" && p["amount_captured"] as? Int == 3000, "\(capturedText)")
        // The same key and request: the same answer, the processor asked once.
        let (replayed, replayedText) = try s.curl(s.sidecarSocket, "POST", "/v1/payments/\(id)/capture", captureBody)
        #expect(replayed == 200 && Self.json(replayedText)["amount_captured"] as? Int == 3000, "\(replayedText)")
        #expect(try Self.ledgerOperations(s, id) == 1)
        // A second capture (another key) is refused: captured already.
        let (again, againBody) = try s.curl(s.sidecarSocket, "POST", "/v1/payments/\(id)/capture", "{}")
        #expect(again == 409 && againBody.contains("PAYMENT_NOT_CAPTURABLE"), "\(againBody)")

        // Two partial refunds; the second replayed with its key.
        let (r1, r1Text) = try s.curl(s.sidecarSocket, "POST", "/v1/refunds", #"{"payment":"\#(id)","amount":1000}"#)
        let refund1 = Self.json(r1Text)
        #expect(r1 == 201 && refund1["status"] as? String == "succeeded" && (refund1["id"] as? String ?? "").hasPrefix("re_"), "\(r1Text)")
        let refundBody = #"{"payment":"\#(id)","amount":1500,"idempotency_key":"ref-\#(id)"}"#
        let (r2, r2Text) = try s.curl(s.sidecarSocket, "POST", "/v1/refunds", refundBody)
        #expect(r2 == 201 && Self.json(r2Text)["status"] as? String == "succeeded", "\(r2Text)")
        let (r2Again, r2AgainText) = try s.curl(s.sidecarSocket, "POST", "/v1/refunds", refundBody)
        #expect(r2Again == 200 && Self.json(r2AgainText)["id"] as? String == Self.json(r2Text)["id"] as? String, "\(r2AgainText)")
        #expect(try Self.ledgerOperations(s, id) == 3, "a capture and two refunds, each sent once")
        // The same key for another request is refused.
        let (reused, reusedText) = try s.curl(s.sidecarSocket, "POST", "/v1/refunds", #"{"payment":"\#(id)","amount":1,"idempotency_key":"ref-\#(id)"}"#)
        #expect(reused == 409 && reusedText.contains("IDEMPOTENCY_KEY_REUSED"), "\(reusedText)")
        // 3000 captured, 2500 refunded: 501 is over, 500 is what is left.
        let (tooMuch, tooMuchText) = try s.curl(s.sidecarSocket, "POST", "/v1/refunds", #"{"payment":"\#(id)","amount":501}"#)
        #expect(tooMuch == 422 && tooMuchText.contains("REFUND_EXCEEDS_CAPTURED"), "\(tooMuchText)")
        let (got, gotText) = try s.curl(s.sidecarSocket, "GET", "/v1/payments/\(id)")
        #expect(got == 200 && Self.json(gotText)["amount_refunded"] as? Int == 2500, "\(gotText)")
        let (read, readText) = try s.curl(s.sidecarSocket, "GET", "/v1/refunds/\(refund1["id"] as? String ?? "")")
        #expect(read == 200 && Self.json(readText)["amount"] as? Int == 1000, "\(readText)")
        #expect(try s.curl(s.sidecarSocket, "GET", "/v1/refunds/re_doesnotexist").0 == 404)
        // The rest, without an amount.
        let (rest, restText) = try s.curl(s.sidecarSocket, "POST", "/v1/refunds", #"{"payment":"\#(id)"}"#)
        #expect(rest == 201 && Self.json(restText)["amount"] as? Int == 500, "\(restText)")
    }

    @Test func voidThenCaptureRefusedAndRefundTestCards() throws {
        let s = try Stack()
        try s.startGateway()
        try s.startSidecar()
        let id = try Self.authorize(s)
        let (voided, voidedText) = try s.curl(s.sidecarSocket, "POST", "/v1/payments/\(id)/cancel", #"{"idempotency_key":"void-\#(id)"}"#)
        let p = Self.json(voidedText)
        #expect(voided == 200 && p["status"] as? String == "canceled" && p["cancellation_reason"] as? String == "requested", "\(voidedText)")
        let (replay, _) = try s.curl(s.sidecarSocket, "POST", "/v1/payments/\(id)/cancel", #"{"idempotency_key":"void-\#(id)"}"#)
        #expect(replay == 200)
        #expect(try Self.ledgerOperations(s, id) == 1)
        let (capture, captureText) = try s.curl(s.sidecarSocket, "POST", "/v1/payments/\(id)/capture", "{}")
        #expect(capture == 409 && captureText.contains("PAYMENT_NOT_CAPTURABLE"), "\(captureText)")
        let (refund, refundText) = try s.curl(s.sidecarSocket, "POST", "/v1/refunds", #"{"payment":"\#(id)"}"#)
        #expect(refund == 409 && refundText.contains("PAYMENT_NOT_REFUNDABLE"), "\(refundText)")

        // The refund test cards, paid at once (capture: true, the default).
        for (pan, status, code) in [("4000000000005126", "failed", "refund_failed"), ("4000000000007726", "pending", nil)] as [(String, String, String?)] {
            let (paid, json, body) = try s.pay(try s.tokenize(pan), key: PaymentsCLITests.key())
            #expect(paid == 201 && json["status"] as? String == "succeeded", "\(body)")
            let pid = json["id"] as? String ?? ""
            let (made, madeText) = try s.curl(s.sidecarSocket, "POST", "/v1/refunds", #"{"payment":"\#(pid)","amount":500}"#)
            let r = Self.json(madeText)
            #expect(made == 201 && r["status"] as? String == status && r["failure_code"] as? String == code, "\(madeText)")
            let (got, gotText) = try s.curl(s.sidecarSocket, "GET", "/v1/payments/\(pid)")
            #expect(got == 200 && Self.json(gotText)["amount_refunded"] as? Int == 0, "\(gotText)")
        }
        s.stop(s.sidecar)
        s.stop(s.gateway)
        s.collectLogs()
        #expect(!containsPAN(s.logs), "a PAN in a log")
    }

    @Test func anAuthorizationExpires() throws {
        let s = try Stack()
        try s.startGateway()
        try s.startSidecar(extra: ["--authorization-ttl", "1"])
        let id = try Self.authorize(s)
        // Past its TTL: read as canceled (expired), and a capture is refused with its code.
        var status = ""
        for _ in 0..<100 where status != "canceled" {
            usleep(100_000)
            status = Self.json(try s.curl(s.sidecarSocket, "GET", "/v1/payments/\(id)").1)["status"] as? String ?? ""
        }
        let (_, gotText) = try s.curl(s.sidecarSocket, "GET", "/v1/payments/\(id)")
        #expect(Self.json(gotText)["status"] as? String == "canceled" && Self.json(gotText)["cancellation_reason"] as? String == "expired", "\(gotText)")
        let (capture, captureText) = try s.curl(s.sidecarSocket, "POST", "/v1/payments/\(id)/capture", "{}")
        #expect(capture == 409 && captureText.contains("AUTHORIZATION_EXPIRED"), "\(captureText)")
        #expect(try Self.ledgerOperations(s, id) == 0, "nothing was sent")
    }

    /// Crash safety: a gateway that cannot be reached leaves nothing recorded (503, the key may be
    /// sent again); an operation the gateway did but whose outcome the sidecar never recorded (the
    /// state a kill -9 between the two leaves: the intent `processing` in the sidecar's store, the
    /// row done in the ledger) is settled by the reconciler after a restart, without a second send.
    @Test func operationsSettleAfterAnOutageAndAKill() throws {
        let s = try Stack()
        try s.startGateway()
        try s.startSidecar(extra: ["--reconcile-after", "1"])
        let id = try Self.authorize(s)
        s.stop(s.gateway)
        let body = #"{"amount":1000,"idempotency_key":"cap-outage-\#(id)"}"#
        let (down, downText) = try s.curl(s.sidecarSocket, "POST", "/v1/payments/\(id)/capture", body)
        #expect(down == 503 && downText.contains("GATEWAY_UNAVAILABLE"), "\(downText)")
        try s.startGateway()
        let (up, upText) = try s.curl(s.sidecarSocket, "POST", "/v1/payments/\(id)/capture", body)
        #expect(up == 200 && Self.json(upText)["amount_captured"] as? Int == 1000, "the same key once the gateway is back: \(upText)")
        #expect(try Self.ledgerOperations(s, id) == 1)

        // A refund the gateway made, its outcome never recorded by the sidecar (killed).
        let refundID = "re_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let (sent, sentText) = try s.curl(
            s.gatewaySocket, "POST", "/v1/operations",
            #"{"operation_id":"\#(refundID)","kind":"refund","payment_id":"\#(id)","amount":400,"currency":"EUR"}"#)
        #expect(sent == 200 && sentText.contains(#""status":"succeeded""#), "\(sentText)")
        kill(s.sidecar?.processIdentifier ?? 0, SIGKILL)
        s.sidecar?.waitUntilExit()
        let insert = """
            INSERT INTO vault_payment_operations (id, payment_id, kind, scope, idempotency_key, request, amount, currency, status,
                created_at, updated_at) VALUES ('\(refundID)', '\(id)', 'refund', 'uid:\(getuid())', 'killed-\(id)',
                'refund=\(id)&amount=400', 400, 'EUR', 'processing', 0, 0)
            """
        let r = try run("/usr/bin/env", ["python3", "-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(sys.argv[2]); c.commit()", s.dir + "/tokens.sqlite", insert])
        #expect(r.status == 0, "\(r.stderr)")
        try s.startSidecar(extra: ["--reconcile-after", "1"])
        var refund: [String: Any] = [:]
        for _ in 0..<200 where refund["status"] as? String != "succeeded" {
            usleep(100_000)
            refund = Self.json(try s.curl(s.sidecarSocket, "GET", "/v1/refunds/\(refundID)").1)
        }
        #expect(refund["status"] as? String == "succeeded", "\(refund)")
        #expect(Self.json(try s.curl(s.sidecarSocket, "GET", "/v1/payments/\(id)").1)["amount_refunded"] as? Int == 400)
        // The same key replays it; the processor was asked once.
        let (replay, replayText) = try s.curl(s.sidecarSocket, "POST", "/v1/refunds", #"{"payment":"\#(id)","amount":400,"idempotency_key":"killed-\#(id)"}"#)
        #expect(replay == 200 && Self.json(replayText)["id"] as? String == refundID, "\(replayText)")
        #expect(try Self.ledgerOperations(s, id) == 2)
    }
}
