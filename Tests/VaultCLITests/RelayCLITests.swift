import Foundation
import Testing

/// The relay processor with the templates shipped in deploy/relay/, against a real local HTTP
/// server that records what arrives (Tests/Interop/fake_processor.py): the card reaches the
/// processor in the body, nowhere else; declines, 5xx and timeouts map as documented (a 5xx or a
/// timeout is an unknown outcome, re-sent with the same idempotency key within the call).
@Suite(.serialized, .ownThread) struct RelayCLITests {
    final class FakeProcessor: @unchecked Sendable {
        let process = Process()
        let log: String
        let port: Int

        init(dir: String) throws {
            log = dir + "/processor-requests.jsonl"
            _ = FileManager.default.createFile(atPath: log, contents: nil)
            port = try startStandIn(process, script: "fake_processor.py", [log])
        }

        /// The requests received, as decoded JSON lines.
        func requests() -> [[String: Any]] {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        }

        func stop() {
            guard process.isRunning else { return }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }

        deinit { stop() }
    }

    /// A copy of a shipped template with a short timeout (the 7777 case waits 10 s) and a short
    /// in-call retry window; with `loopback`, it opts in to http to the loopback stand-in
    /// (`request.allow_http_loopback`).
    static func template(_ name: String, dir: String, loopback: Bool = true) throws -> String {
        let source = repositoryRoot.appendingPathComponent("deploy/relay/\(name).json").path
        var json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: source))) as? [String: Any])
        json["timeout_seconds"] = 1.5
        var settle = try #require(json["settle"] as? [String: Any])
        settle["retry_within_seconds"] = 1
        json["settle"] = settle
        if loopback {
            var request = try #require(json["request"] as? [String: Any])
            request["allow_http_loopback"] = true
            json["request"] = request
        }
        let path = "\(dir)/\(name).json"
        try JSONSerialization.data(withJSONObject: json).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test(arguments: ["stripe-style", "cashfree-style"])
    func relayReachesARealServerWithTheCardInTheBodyOnly(style: String) throws {
        let s = try PaymentsCLITests.Stack()
        let fake = try FakeProcessor(dir: s.dir)
        defer { fake.stop() }
        #expect(fake.port > 0)
        let env = [
            "RELAY_BASE_URL": "http://127.0.0.1:\(fake.port)", "STRIPE_SECRET_KEY": "sk_test_vault",
            "CASHFREE_CLIENT_ID": "cf_id", "CASHFREE_CLIENT_SECRET": "cf_secret",
        ]
        try s.startGateway(processor: ["--processor", "relay:" + (try Self.template(style, dir: s.dir)), "--ledger", s.dir + "/relay.sqlite"], environment: env)
        try s.startSidecar()

        // Approved: the whole card reaches the processor, in the body.
        let card = #"{"card":{"number":"5555555555554444","exp_month":7,"exp_year":2031,"cvc":"737","name":"Ada O'Neil & Co"}}"#
        let (created, tokenBody) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", card)
        #expect(created == 201, "\(tokenBody)")
        let token = (try JSONSerialization.jsonObject(with: Data(tokenBody.utf8)) as? [String: Any])?["token"] as? String ?? ""
        let key = "order-" + UUID().uuidString
        let (status, json, body) = try s.pay(token, key: key, amount: 1999, currency: "EUR")
        #expect(status == 201 && json["status"] as? String == "succeeded", "\(body)")
        // The processor's idempotency key is the payment id; the caller's key is never sent.
        let paymentID = try #require(json["id"] as? String)
        #expect((json["reference"] as? String)?.isEmpty == false)
        let sent = try #require(fake.requests().last)
        let sentBody = sent["body"] as? String ?? ""
        let headers = sent["headers"] as? [String: String] ?? [:]
        if style == "stripe-style" {
            let form = Dictionary(uniqueKeysWithValues: sentBody.split(separator: "&").map { pair -> (String, String) in
                let kv = pair.split(separator: "=", maxSplits: 1).map { String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "" }
                return (kv[0], kv.count > 1 ? kv[1] : "")
            })
            #expect(form["payment_method_data[card][number]"] == "5555555555554444")
            #expect(form["payment_method_data[card][cvc]"] == "737")
            #expect(form["payment_method_data[card][exp_month]"] == "07" && form["payment_method_data[card][exp_year]"] == "2031")
            #expect(form["payment_method_data[billing_details][name]"] == "Ada O'Neil & Co")
            #expect(form["amount"] == "1999" && form["currency"] == "eur")
            #expect(headers["Authorization"] == "Bearer sk_test_vault")
            #expect(headers["Idempotency-Key"] == paymentID)
        } else {
            let doc = try #require(try JSONSerialization.jsonObject(with: Data(sentBody.utf8)) as? [String: Any])
            let cardDoc = (doc["payment_method"] as? [String: Any])?["card"] as? [String: Any] ?? [:]
            #expect(cardDoc["card_number"] as? String == "5555555555554444")
            #expect(cardDoc["card_cvv"] as? String == "737" && cardDoc["card_expiry_mm"] as? String == "07" && cardDoc["card_expiry_yy"] as? String == "31")
            #expect(cardDoc["card_holder_name"] as? String == "Ada O'Neil & Co")
            #expect((doc["order_amount"] as? NSNumber)?.doubleValue == 19.99 && doc["order_currency"] as? String == "EUR")
            #expect(headers["x-client-secret"] == "cf_secret" && headers["x-idempotency-key"] == paymentID)
        }
        #expect(!(sentBody + headers.description + (sent["path"] as? String ?? "")).contains(key), "the caller's idempotency key reached the processor")
        // The card is in the body and nowhere else: not in the path, not in a header.
        #expect(!containsPAN((sent["path"] as? String ?? "") + headers.description))

        // Declined by the processor: a decline code; the token stays (without its CVC).
        let declinedToken = try s.tokenize("4000000000000002")
        let (d, dJSON, dBody) = try s.pay(declinedToken, key: "order-" + UUID().uuidString)
        #expect(d == 201 && dJSON["status"] as? String == "declined", "\(dBody)")
        #expect(dJSON["decline_code"] as? String == (style == "stripe-style" ? "generic_decline" : "card_declined"))

        // A 5xx: these templates say "server_errors": "unknown" (the default), so the outcome is
        // unknown, never "nothing charged": the gateway re-sends it with the same idempotency key
        // within the call's retry window, then answers 504 and settles it later; the sidecar
        // answers 202 with the payment `processing` (settled later, never "nothing charged").
        let flaky = try s.tokenize("4242424242424242")
        let before = fake.requests().count
        let (e, eJSON, eBody) = try s.pay(flaky, key: "order-5xx", amount: 5000)
        #expect(e == 202 && eJSON["status"] as? String == "processing", "\(eBody)")
        let sends = fake.requests().dropFirst(before)
        #expect(sends.count >= 2, "the 5xx was not re-sent within the call")
        let keys = Set(sends.map { ($0["headers"] as? [String: String] ?? [:]).first { $0.key.lowercased().hasSuffix("idempotency-key") }?.value ?? "" })
        #expect(keys.count == 1, "every re-send carries the same idempotency key: \(keys)")
        #expect(try s.curl(s.sidecarSocket, "GET", "/v1/tokens/\(flaky)").0 == 200)

        // A timeout: the outcome unknown too: 202, the payment `processing` until settled.
        let slow = try s.tokenize("4242424242424242")
        let (t, tJSON, tBody) = try s.pay(slow, key: "order-timeout", amount: 7777)
        #expect(t == 202 && tJSON["status"] as? String == "processing", "\(tBody)")
        #expect(try s.curl(s.sidecarSocket, "GET", "/v1/tokens/\(slow)").0 == 200)

        s.stop(s.sidecar)
        s.stop(s.gateway)
        s.collectLogs()
        #expect(!containsPAN(s.logs), "a PAN in the sidecar's or the gateway's log")
        for f in ["tokens.sqlite", "tokens.sqlite-wal", "relay.sqlite"] {
            let data = FileManager.default.contents(atPath: "\(s.dir)/\(f)") ?? Data()
            #expect(!containsPAN(String(decoding: data, as: UTF8.self)), "\(f) holds a PAN")
        }
    }

    @Test func templatesThatPutCardDataInHeadersOrURLsAreRefused() throws {
        let s = try PaymentsCLITests.Stack()
        let bad = s.dir + "/bad.json"
        try #"{"request":{"url":"https://p.example/charge?card={{pan}}","form":[["a","b"]]},"response":{"status":"s","succeeded":["ok"]}}"#
            .write(toFile: bad, atomically: true, encoding: .utf8)
        let r = try run(vaultBinary, ["gateway", "--socket", s.gatewaySocket, "--keys", s.dir + "/gateway-keys", "--processor", "relay:" + bad])
        #expect(r.status != 0 && r.stderr.contains("RELAY_TEMPLATE_INVALID") && r.stderr.contains("body only"), "\(r.stderr)")
    }

    /// A shipped template pointed at an http base URL: refused when the gateway starts unless the
    /// template opts in to http, and then only to a loopback host (RELAY_URL_NOT_ALLOWED).
    @Test(arguments: [("http://127.0.0.1:9", false), ("http://192.0.2.10:8080", true), ("http://processor.example", true)])
    func httpRelayURLsAreRefusedAtStart(base: String, optIn: Bool) throws {
        let s = try PaymentsCLITests.Stack()
        let template = try Self.template("stripe-style", dir: s.dir, loopback: optIn)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: vaultBinary)
        p.arguments = ["gateway", "--socket", s.gatewaySocket, "--keys", s.dir + "/gateway-keys", "--processor", "relay:" + template,
                       "--ledger", s.dir + "/relay.sqlite"]
        p.environment = ProcessInfo.processInfo.environment.merging(["RELAY_BASE_URL": base, "STRIPE_SECRET_KEY": "sk_test_vault"]) { $1 }
        let err = Pipe()
        p.standardError = err
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        // A gateway that started would serve: give it 15 s to refuse, then stop it (a failure).
        for _ in 0..<300 where p.isRunning { usleep(50_000) }
        let refused = !p.isRunning
        if !refused { kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(refused && p.terminationStatus != 0, "the gateway started with \(base)")
        #expect(stderr.contains("RELAY_URL_NOT_ALLOWED"), "\(stderr)")
        #expect(!FileManager.default.fileExists(atPath: s.gatewaySocket))
    }
}
