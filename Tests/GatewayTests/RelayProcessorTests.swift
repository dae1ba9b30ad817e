import Foundation
import Gateway
import Hummingbird
import Logging
import HummingbirdTesting
import Store
import Testing
import VaultCrypto
import VaultOpen

/// The relay processor's hardening, against a real local HTTP stand-in for a processor
/// (Tests/Interop/fake_processor.py): redirects are never followed (a 3xx is an unknown outcome),
/// it sends only over https or to an allowed loopback, only to the template's hosts, once per
/// payment id even under concurrent calls, with the payment id as the processor's idempotency key.
@Suite(.serialized) struct RelayProcessorTests {
    typealias Fixture = GatewayRouteTests.Fixture

    /// The stand-in on a free 127.0.0.1 port, recording every request it receives.
    final class StandIn: @unchecked Sendable {
        let process = Process()
        let log: String
        let port: Int

        init(dir: String, name: String) throws {
            // processor-requests.jsonl: the leak scan of scripts/test knows these hold test cards.
            try FileManager.default.createDirectory(atPath: "\(dir)/\(name)", withIntermediateDirectories: true)
            log = "\(dir)/\(name)/processor-requests.jsonl"
            _ = FileManager.default.createFile(atPath: log, contents: nil)
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("Interop/fake_processor.py").path
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", script, log]
            let out = Pipe()
            process.standardOutput = out
            process.standardError = FileHandle.nullDevice
            process.standardInput = FileHandle.nullDevice
            try process.run()
            var line = Data()
            while let byte = try out.fileHandleForReading.read(upToCount: 1), !byte.isEmpty, byte != Data("\n".utf8) { line += byte }
            port = Int(String(decoding: line, as: UTF8.self)) ?? 0
        }

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

    static let idempotencyHeader = ["Idempotency-Key", "{{idempotency_key}}"]

    /// A form template (Stripe-like answers) for `url`; `request` adds or replaces request settings.
    static func template(url: String, request extra: [String: Any] = [:], headers: [[String]] = [idempotencyHeader]) -> [String: Any] {
        var request: [String: Any] = [
            "method": "POST", "url": url, "headers": headers,
            "form": [["amount", "{{amount}}"], ["card[number]", "{{pan}}"], ["card[cvc]", "{{cvc}}"], ["card[name]", "{{name}}"]],
        ]
        for (k, v) in extra { request[k] = v }
        return [
            "name": "test", "request": request, "timeout_seconds": 5.0,
            "response": ["status": "status", "succeeded": ["succeeded"], "declined": ["failed"], "reference": "id"] as [String: Any],
        ]
    }

    static func write(_ template: [String: Any], dir: String) throws -> String {
        let path = "\(dir)/template-\(UUID().uuidString).json"
        try JSONSerialization.data(withJSONObject: template).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// Loads a template file and makes a relay processor of it, as `vault gateway` does at start.
    static func load(
        _ template: [String: Any], dir: String, environment: [String: String] = [:], ledger: LedgerStore? = nil,
        timing: RelayProcessor.Timing = RelayProcessor.Timing(), logger: Logger = Logger(label: "test.relay"),
        now: @escaping @Sendable () -> Date = Date.init
    ) async throws -> RelayProcessor {
        var store = ledger
        if store == nil { store = try await LedgerBackend.sqlite("\(dir)/relay-\(UUID().uuidString).sqlite") }
        return try RelayProcessor(
            template: try RelayTemplate(path: try write(template, dir: dir)), ledger: store!, logger: logger, timing: timing, environment: environment,
            now: now)
    }

    /// Whether `load` refuses the template; the refusal as text.
    static func refusal(_ template: [String: Any], dir: String, environment: [String: String] = [:]) async -> String? {
        do { _ = try await load(template, dir: dir, environment: environment); return nil } catch { return "\(error)" }
    }

    static func withApp(_ f: Fixture, _ processor: RelayProcessor, _ body: @escaping @Sendable (any TestClientProtocol) async throws -> Void) async throws {
        let router = Router()
        GatewayRoutes(opener: EnvelopeOpener(ring: f.ring), processor: processor).register(on: router)
        try await Application(router: router).test(.router, body)
    }

    static func errorCode(_ json: [String: Any]) -> String? { (json["error"] as? [String: Any])?["code"] as? String }

    // MARK: - Item: redirects

    /// A processor (or whoever answers in its name) that redirects must not get the card re-posted
    /// anywhere: nothing reaches the second listener, and the payment's outcome is unknown (504,
    /// the ledger row stays `sent`), never recorded as a charge.
    @Test(arguments: [302, 307, 308])
    func aRedirectIsNeverFollowedAndIsAnUnknownOutcome(code: Int) async throws {
        let f = try Fixture()
        defer { f.remove() }
        let processor = try StandIn(dir: f.dir, name: "processor")
        let elsewhere = try StandIn(dir: f.dir, name: "elsewhere")
        defer { processor.stop(); elsewhere.stop() }
        let relay = try await Self.load(
            Self.template(
                url: "http://127.0.0.1:\(processor.port)/redirect/\(code)", request: ["allow_http_loopback": true],
                headers: [Self.idempotencyHeader, ["Authorization", "Bearer {{env:PROCESSOR_SECRET}}"],
                          ["X-Redirect-To", "http://127.0.0.1:\(elsewhere.port)/collect"]]),
            dir: f.dir, environment: ["PROCESSOR_SECRET": "sk_test_relay_secret"])
        let envelope = try f.envelope("4242424242424242")
        let payment = RandomID.make(prefix: "pay_")
        try await Self.withApp(f, relay) { client in
            let (status, json, text) = try await GatewayRouteTests.authorize(client, GatewayRouteTests.request(envelope, payment: payment))
            #expect(status == 504, "\(text)")
            #expect(Self.errorCode(json) == "GATEWAY_UNAVAILABLE", "\(text)")
            #expect(json["status"] == nil)
        }
        #expect(processor.requests().count == 1)
        #expect(elsewhere.requests().isEmpty, "the redirect was followed: \(elsewhere.requests())")
        // Not a charge: the gateway cannot say what happened (the sidecar keeps the payment open).
        let state = try await relay.authorization(of: payment)
        guard case .pending(let pending)? = state else { Issue.record("not pending: \(String(describing: state))"); return }
        #expect(pending.attempts == 1 && !pending.inFlight && !pending.resend && pending.reason.contains("redirect"), "\(pending)")
    }

    // MARK: - Item: where the relay may send

    @Test(arguments: [
        ("http://api.example.com/v1/charges", false),
        ("http://10.1.2.3:8080/charge", true),      // the development setting opens loopback only
        ("http://127.0.0.1:9/charge", false),       // loopback, but without the development setting
        ("http://localhost:9/charge", false),
        ("http://[::1]:9/charge", false),
        ("ftp://api.example.com/charge", false),
        ("https://user:pass@api.example.com/charge", false),
        ("https:///charge", false),
    ])
    func urlsTheRelayMayNotSendToAreRefusedAtLoad(url: String, allowLoopback: Bool) async throws {
        let f = try Fixture()
        defer { f.remove() }
        let refused1 = await Self.refusal(Self.template(url: url, request: ["allow_http_loopback": allowLoopback]), dir: f.dir)
        #expect(refused1.map { e in e.contains("RELAY_URL_NOT_ALLOWED") } == true, "\(refused1 ?? "loaded")")
    }

    /// A base URL from the environment is checked when the gateway starts, the same way.
    @Test func aBaseURLFromTheEnvironmentIsCheckedAtLoad() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let template = Self.template(url: "{{env:RELAY_BASE_URL}}/v1/charges")
        let refused2 = await Self.refusal(template, dir: f.dir, environment: ["RELAY_BASE_URL": "http://203.0.113.5"])
        #expect(refused2.map { e in e.contains("RELAY_URL_NOT_ALLOWED") } == true, "\(refused2 ?? "loaded")")
        let refused3 = await Self.refusal(template, dir: f.dir, environment: ["RELAY_BASE_URL": "http://127.0.0.1:9"])
        #expect(refused3.map { e in e.contains("RELAY_URL_NOT_ALLOWED") } == true, "\(refused3 ?? "loaded")")
        _ = try await Self.load(template, dir: f.dir, environment: ["RELAY_BASE_URL": "https://api.example.com"])
        _ = try await Self.load(
            Self.template(url: "{{env:RELAY_BASE_URL}}/v1/charges", request: ["allow_http_loopback": true]), dir: f.dir,
            environment: ["RELAY_BASE_URL": "http://127.0.0.1:9"])
        _ = try await Self.load(Self.template(url: "http://localhost:9/charge", request: ["allow_http_loopback": true]), dir: f.dir)
    }

    /// A host that depends on the payment must be one of allowed_hosts; another is refused before
    /// anything is sent (nothing charged, the ledger row gone).
    @Test func aFilledInURLWithAnotherHostIsRefusedBeforeSending() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let refused4 = await Self.refusal(Self.template(url: "https://{{currency_lower}}.pay.invalid/charge"), dir: f.dir)
        #expect(refused4.map { e in e.contains("RELAY_URL_NOT_ALLOWED") && e.contains("allowed_hosts") } == true, "\(refused4 ?? "loaded")")
        let relay = try await Self.load(
            Self.template(url: "https://{{currency_lower}}.pay.invalid/charge", request: ["allowed_hosts": ["eur.pay.invalid"]]), dir: f.dir)
        let envelope = try f.envelope("4242424242424242")
        let payment = RandomID.make(prefix: "pay_")
        try await Self.withApp(f, relay) { client in
            let (status, json, text) = try await GatewayRouteTests.authorize(client, GatewayRouteTests.request(envelope, payment: payment, currency: "USD"))
            #expect(status == 422, "\(text)")
            #expect(Self.errorCode(json) == "RELAY_URL_NOT_ALLOWED", "\(text)")
        }
        #expect(try await relay.authorization(of: payment) == nil)
    }

    @Test func aTemplateWithoutTheProcessorIdempotencyKeyDoesNotLoad() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let refused5 = await Self.refusal(Self.template(url: "https://api.example.com/charge", headers: []), dir: f.dir)
        #expect(refused5.map { e in e.contains("RELAY_TEMPLATE_INVALID") && e.contains("idempotency") } == true, "\(refused5 ?? "loaded")")
        // {{payment_id}} in the body carries it too.
        var withID = Self.template(url: "https://api.example.com/charge", headers: [])
        var request = withID["request"] as! [String: Any]
        request["form"] = [["order", "{{payment_id}}"], ["card[number]", "{{pan}}"]]
        withID["request"] = request
        _ = try await Self.load(withID, dir: f.dir)
    }

    @Test func aRedirectStatusCannotBeMappedToADecline() async throws {
        let f = try Fixture()
        defer { f.remove() }
        var template = Self.template(url: "https://api.example.com/charge")
        var response = template["response"] as! [String: Any]
        response["declined_http_statuses"] = [402, 302]
        template["response"] = response
        let refused6 = await Self.refusal(template, dir: f.dir)
        #expect(refused6.map { e in e.contains("RELAY_TEMPLATE_INVALID") } == true, "\(refused6 ?? "loaded")")
    }

    // MARK: - Item: one send per payment id

    /// Two concurrent authorizations of one payment id to a slow processor: one sends, the other
    /// answers 504 AUTHORIZATION_IN_PROGRESS (the sidecar keeps the payment processing); a later
    /// call gets the recorded outcome. Exactly one processor hit.
    @Test func concurrentAuthorizationsOfOnePaymentIDSendOnce() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let processor = try StandIn(dir: f.dir, name: "slow")
        defer { processor.stop() }
        let relay = try await Self.load(Self.template(url: "http://127.0.0.1:\(processor.port)/slow", request: ["allow_http_loopback": true]), dir: f.dir)
        let envelope = try f.envelope("4242424242424242")
        let payment = RandomID.make(prefix: "pay_")
        let body = GatewayRouteTests.request(envelope, payment: payment)
        try await Self.withApp(f, relay) { client in
            async let first = GatewayRouteTests.authorize(client, body)
            // The second once the processor holds the first (it answers after 2 s), however
            // slowly a loaded machine got the first there.
            for _ in 0..<200 where processor.requests().isEmpty { try await Task.sleep(for: .milliseconds(25)) }
            async let second = GatewayRouteTests.authorize(client, body)
            let results = [try await first, try await second]
            #expect(results.filter { $0.0 == 200 && $0.1["status"] as? String == "succeeded" }.count == 1, "\(results.map(\.2))")
            let other = try #require(results.first { $0.0 != 200 })
            #expect(other.0 == 504 && Self.errorCode(other.1) == "AUTHORIZATION_IN_PROGRESS", "\(other.2)")
            let reference = results.first { $0.0 == 200 }?.1["reference"] as? String
            // Afterwards the recorded outcome, without another send.
            let (again, json, text) = try await GatewayRouteTests.authorize(client, body)
            #expect(again == 200 && json["status"] as? String == "succeeded" && json["reference"] as? String == reference, "\(text)")
        }
        #expect(processor.requests().count == 1, "\(processor.requests().count) processor hits")
    }

    /// `{{idempotency_key}}` is the payment id; the caller's key (free text, scoped to the caller)
    /// reaches the processor nowhere.
    @Test func theProcessorIdempotencyKeyIsThePaymentID() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let processor = try StandIn(dir: f.dir, name: "processor")
        defer { processor.stop() }
        let relay = try await Self.load(
            Self.template(url: "http://127.0.0.1:\(processor.port)/v1/payment_intents", request: ["allow_http_loopback": true]), dir: f.dir)
        let envelope = try f.envelope("4242424242424242")
        let payment = RandomID.make(prefix: "pay_")
        let body = #"{"payment_id":"\#(payment)","amount":1050,"currency":"EUR","idempotency_key":"order-1-caller-key","envelope":\#(envelope.json)}"#
        try await Self.withApp(f, relay) { client in
            let (status, json, text) = try await GatewayRouteTests.authorize(client, body)
            #expect(status == 200 && json["status"] as? String == "succeeded", "\(text)")
        }
        let sent = try #require(processor.requests().last)
        let headers = sent["headers"] as? [String: String] ?? [:]
        #expect(headers["Idempotency-Key"] == payment)
        let everything = String(decoding: try JSONSerialization.data(withJSONObject: sent), as: UTF8.self)
        #expect(!everything.contains("order-1-caller-key"))
    }
}
