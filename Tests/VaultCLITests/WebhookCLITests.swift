import Foundation
import Testing

/// Events and webhooks with the real binaries (docs/events.md): `vault serve --webhook` delivers
/// every event of a payment's lifecycle, signed, to a receiver on loopback HTTP that verifies each
/// signature (Tests/Interop/webhook_receiver.py); `GET /v1/events` lists them with their delivery
/// state; a receiver answering 500 gets the event again with the same id; bad webhook settings
/// stop the start with `CONFIG_INVALID` (exit 11). The kill -9 and outage drill is
/// scripts/webhook-drill.
@Suite(.serialized, .ownThread) struct WebhookCLITests {
    typealias Stack = PaymentsCLITests.Stack

    static func json(_ text: String) -> [String: Any] { (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:] }

    static func secret(_ s: Stack, _ name: String = "webhook.secret", mode: Int = 0o600, bytes: Int = 48) -> String {
        let path = s.dir + "/" + name
        try? FileManager.default.removeItem(atPath: path)
        _ = FileManager.default.createFile(
            atPath: path, contents: Data((String(repeating: "x", count: bytes) + "\n").utf8), attributes: [.posixPermissions: mode])
        return path
    }

    /// The receiver's verified deliveries (its record file), in arrival order.
    static func received(_ path: String) -> [[String: Any]] {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").map { json(String($0)) }
    }

    @Test func aPaymentsLifecycleIsDeliveredSignedInOrderAndListed() throws {
        let s = try Stack()
        let secret = Self.secret(s)
        let receiver = Process()
        let record = s.dir + "/received.jsonl"
        let port = try startStandIn(receiver, script: "webhook_receiver.py", ["--secret-file", secret, "--port", "0", "--record", record])
        defer { kill(receiver.processIdentifier, SIGKILL); receiver.waitUntilExit() }
        #expect(port > 0)
        try s.startGateway()
        try s.startSidecar(extra: ["--webhook", "http://127.0.0.1:\(port)/hooks", "--webhook-secret-file", secret, "--webhook-max-backoff", "1"])
        #expect(s.sidecar?.isRunning == true, "\(s.sidecarLogText)")

        let token = try s.tokenize("4242424242424242")
        let (paid, payText) = try s.curl(
            s.sidecarSocket, "POST", "/v1/payments", #"{"token":"\#(token)","amount":5000,"currency":"EUR","capture":false,"idempotency_key":"wh-1"}"#)
        let id = Self.json(payText)["id"] as? String ?? ""
        #expect(paid == 201, "\(payText)")
        #expect(try s.curl(s.sidecarSocket, "POST", "/v1/payments/\(id)/capture", #"{"amount":3000}"#).0 == 200)
        let (refunded, refundText) = try s.curl(s.sidecarSocket, "POST", "/v1/refunds", #"{"payment":"\#(id)","amount":1000}"#)
        #expect(refunded == 201, "\(refundText)")
        let refund = Self.json(refundText)["id"] as? String ?? ""

        // Five events (the single-use token is consumed by the capture): objects are delivered in
        // parallel, each object's events in order.
        var got: [[String: Any]] = []
        for _ in 0..<200 {
            got = Self.received(record)
            if got.count >= 5 { break }
            usleep(50_000)
        }
        let types = got.map { $0["type"] as? String ?? "" }
        #expect(types.sorted() == ["payment.requires_capture", "payment.succeeded", "refund.succeeded", "token.created", "token.deleted"], "\(types)")
        #expect(types.filter { $0.hasPrefix("payment.") } == ["payment.requires_capture", "payment.succeeded"])
        #expect(types.filter { $0.hasPrefix("token.") } == ["token.created", "token.deleted"])
        #expect(got.allSatisfy { $0["id"] as? String == $0["header_id"] as? String }, "Vault-Event-Id names the body's event")
        #expect(!got.contains { containsPAN($0["body"] as? String ?? "") }, "no card number in a delivery")
        let succeeded = Self.json(got.first { $0["type"] as? String == "payment.succeeded" }?["body"] as? String ?? "")
        let object = (succeeded["data"] as? [String: Any])?["object"] as? [String: Any] ?? [:]
        #expect(object["id"] as? String == id && object["amount_captured"] as? Int == 3000 && object["status"] as? String == "succeeded", "\(object)")

        // The list: newest first, each delivered once with a 200; filters by type and object.
        let (listed, listText) = try s.curl(s.sidecarSocket, "GET", "/v1/events?limit=10")
        let data = Self.json(listText)["data"] as? [[String: Any]] ?? []
        #expect(listed == 200 && data.count == 5 && data.map { $0["type"] as? String ?? "" }.sorted() == types.sorted(), "\(listText)")
        #expect(data.map { $0["type"] as? String ?? "" }.last == "token.created", "newest first")
        for e in data {
            let d = e["delivery"] as? [String: Any] ?? [:]
            #expect(d["status"] as? String == "delivered" && d["attempts"] as? Int == 1 && d["last_status"] as? Int == 200, "\(d)")
        }
        let (byObject, byObjectText) = try s.curl(s.sidecarSocket, "GET", "/v1/events?object=\(id)")
        let ofPayment = (Self.json(byObjectText)["data"] as? [[String: Any]] ?? []).map { $0["type"] as? String ?? "" }
        #expect(byObject == 200 && ofPayment == ["payment.succeeded", "payment.requires_capture"], "\(byObjectText)")
        let (byType, byTypeText) = try s.curl(s.sidecarSocket, "GET", "/v1/events?type=refund.*")
        let refunds = Self.json(byTypeText)["data"] as? [[String: Any]] ?? []
        #expect(byType == 200 && refunds.count == 1, "\(byTypeText)")
        #expect(((refunds.first?["data"] as? [String: Any])?["object"] as? [String: Any])?["id"] as? String == refund)
        let first = data.last?["id"] as? String ?? "evt_none"
        let (one, oneText) = try s.curl(s.sidecarSocket, "GET", "/v1/events/\(first)")
        #expect(one == 200 && Self.json(oneText)["type"] as? String == "token.created", "\(oneText)")
        let (missing, missingText) = try s.curl(s.sidecarSocket, "GET", "/v1/events/evt_000000000000000000000000")
        #expect(missing == 404 && missingText.contains("EVENT_NOT_FOUND"), "\(missingText)")
        let (badType, badTypeText) = try s.curl(s.sidecarSocket, "GET", "/v1/events?type=4242424242424242.x")
        #expect(badType == 422 && badTypeText.contains("REQUEST_FIELD_INVALID") && !containsPAN(badTypeText), "\(badTypeText)")
    }

    @Test func aFailingReceiverGetsTheSameEventAgainAndTheAttemptsShow() throws {
        let s = try Stack()
        let secret = Self.secret(s)
        // A receiver whose signing secret differs: every delivery is refused (400), so retried.
        let wrong = s.dir + "/wrong.secret"
        _ = FileManager.default.createFile(atPath: wrong, contents: Data(String(repeating: "y", count: 48).utf8), attributes: [.posixPermissions: 0o600])
        let receiver = Process()
        let record = s.dir + "/received.jsonl"
        let port = try startStandIn(receiver, script: "webhook_receiver.py", ["--secret-file", wrong, "--port", "0", "--record", record])
        defer { kill(receiver.processIdentifier, SIGKILL); receiver.waitUntilExit() }
        try s.startGateway()
        try s.startSidecar(extra: ["--webhook", "http://127.0.0.1:\(port)/", "--webhook-secret-file", secret, "--webhook-max-backoff", "1"])
        _ = try s.tokenize("4242424242424242")
        var event: [String: Any] = [:]
        for _ in 0..<100 {
            let (_, text) = try s.curl(s.sidecarSocket, "GET", "/v1/events?type=token.created")
            event = (Self.json(text)["data"] as? [[String: Any]])?.first ?? [:]
            if ((event["delivery"] as? [String: Any])?["attempts"] as? Int ?? 0) >= 3 { break }
            usleep(100_000)
        }
        let d = event["delivery"] as? [String: Any] ?? [:]
        #expect(d["status"] as? String == "pending" && (d["attempts"] as? Int ?? 0) >= 3, "\(d)")
        #expect(d["last_status"] as? Int == 400 && d["last_error"] as? String == "the endpoint answered 400" && d["next_attempt_at"] is String, "\(d)")
        #expect(Self.received(record).isEmpty, "nothing verified with the wrong secret")
        let (_, metrics) = try s.curl(s.sidecarSocket, "GET", "/metrics")
        #expect(metrics.contains("vault_webhook_attempts_total{outcome=\"failed\"}") && metrics.contains("vault_webhook_lease_held 1"), "\(metrics)")
    }

    @Test func badWebhookSettingsStopTheStartWithConfigInvalid() throws {
        let s = try Stack()
        let base = ["serve", "--socket", s.sidecarSocket, "--keys", s.dir + "/sidecar-keys", "--store", "sqlite:\(s.dir)/t.sqlite"]
        let cases: [([String], String)] = [
            (["--webhook", "http://127.0.0.1:9/hooks"], "sidecar.webhook_secret_file"),
            (["--webhook", "http://example.com/hooks", "--webhook-secret-file", Self.secret(s)], "sidecar.webhook"),
            (["--webhook", "https://127.0.0.1/hooks", "--webhook-secret-file", Self.secret(s)], "sidecar.webhook"),
            (["--webhook", "unix:/tmp/h.sock", "--webhook-secret-file", Self.secret(s, "open.secret", mode: 0o644)], "at most 0640"),
            (["--webhook", "unix:/tmp/h.sock", "--webhook-secret-file", Self.secret(s, "short.secret", bytes: 16)], "shorter than 32 bytes"),
            (["--event-retention", "60"], "sidecar.event_retention"),
        ]
        for (extra, expected) in cases {
            let r = try vault(base + extra, input: Data())
            #expect(r.status == 11 && r.stderr.contains("CONFIG_INVALID") && r.stderr.contains(expected), "\(extra): \(r.status) \(r.stderr)")
            #expect(!r.stderr.contains("xxxxxxxx"), "the secret is never shown")
        }
    }
}
