import Foundation
import Gateway
import Hummingbird
import HummingbirdTesting
import InMemoryLogging
import Logging
import Money
import Store
import Testing
import VaultCrypto
import VaultOpen

/// Unknown outcomes settle (docs/errors.md "Unknown outcomes", issue 13 item 3), against the
/// stand-in processor of Tests/Interop/fake_processor.py in its idempotent mode (a key is charged
/// once and every later request with it gets the first result, as Stripe does): a 5xx then a
/// success, a 5xx that means "not charged", a timeout found by the status query, a connection
/// dropped after charging, an outcome never known (reported at the deadline), a gateway killed
/// mid-call, and two gateways on one store racing a payment id. Each test counts what reached the
/// processor.
@Suite(.serialized) struct SettlementTests {
    typealias Fixture = GatewayRouteTests.Fixture
    typealias StandIn = RelayProcessorTests.StandIn

    /// A clock the tests move forward (the ledger and the settler take their time from it).
    final class Clock: @unchecked Sendable {
        private let lock = NSLock()
        private var offset: TimeInterval = 0
        func now() -> Date { lock.withLock { Date().addingTimeInterval(offset) } }
        func advance(_ seconds: TimeInterval) { lock.withLock { offset += seconds } }
    }

    /// Short timing for tests: a 0.5 s margin, retries after 0.2 s at least.
    static var timing: RelayProcessor.Timing {
        var t = RelayProcessor.Timing()
        t.margin = 0.5
        t.minRetry = 0.2
        t.firstBackoff = 0.05
        t.maxBackoff = 0.2
        return t
    }

    /// A template for the stand-in's idempotent endpoint with `scenario`, a `timeout`, and `settle`.
    static func template(
        port: Int, scenario: String, hang: Double = 10, timeout: Double = 1, settle: [String: Any]?, statusScenario: String? = nil
    ) -> [String: Any] {
        var template: [String: Any] = [
            "name": "settle-test",
            "request": [
                "method": "POST", "url": "http://127.0.0.1:\(port)/v1/charges", "allow_http_loopback": true,
                "headers": [["Idempotency-Key", "{{idempotency_key}}"], ["X-Scenario", scenario], ["X-Hang-Seconds", "\(hang)"]],
                "form": [["amount", "{{amount}}"], ["currency", "{{currency_lower}}"], ["card[number]", "{{pan}}"], ["card[cvc]", "{{cvc}}"]],
            ] as [String: Any],
            "timeout_seconds": timeout,
            "response": ["status": "status", "succeeded": ["succeeded"], "declined": ["failed"], "reference": "id"] as [String: Any],
        ]
        if var settle {
            if settle["status"] as? Bool == true {
                var headers = [["X-Hang-Seconds", "\(hang)"]]
                if let statusScenario { headers.append(["X-Status-Scenario", statusScenario]) }
                settle["status"] = ["url": "http://127.0.0.1:\(port)/v1/charges/{{idempotency_key}}", "headers": headers] as [String: Any]
            }
            template["settle"] = settle
        }
        return template
    }

    /// What reached the stand-in for `payment`: charge requests, charges made, status queries.
    static func seen(_ processor: StandIn, _ payment: String) -> (posts: Int, charges: Int, queries: Int) {
        let mine = processor.requests().filter { r in
            ((r["headers"] as? [String: String])?["Idempotency-Key"] == payment) || (r["path"] as? String)?.hasSuffix("/" + payment) == true
        }
        let posts = mine.filter { $0["method"] as? String == "POST" }
        return (posts.count, posts.filter { $0["charged"] as? Bool == true }.count, mine.filter { $0["method"] as? String == "GET" }.count)
    }

    static func card(_ f: Fixture, _ envelope: CardEnvelope) throws -> OpenedCard {
        try EnvelopeOpener(ring: f.ring).open(envelope)
    }

    static func request(_ payment: String) -> AuthorizationRequest {
        AuthorizationRequest(paymentID: payment, amount: 1050, currency: Currency("EUR")!)
    }

    static func metric(_ text: String, _ name: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
    }

    // MARK: - In the call

    /// A 500 (nothing charged) then a success: the in-call re-send with the same idempotency key
    /// settles it, and the processor charged once.
    @Test func aServerErrorThenASuccessIsSettledByAnInCallResend() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let processor = try StandIn(dir: f.dir, name: "p")
        defer { processor.stop() }
        let relay = try await RelayProcessorTests.load(
            Self.template(port: processor.port, scenario: "fail-1", settle: ["resend": true, "retry_within_seconds": 5]), dir: f.dir,
            timing: Self.timing)
        let envelope = try f.envelope("4242424242424242")
        let payment = RandomID.make(prefix: "pay_")
        try await RelayProcessorTests.withApp(f, relay) { client in
            let (status, json, text) = try await GatewayRouteTests.authorize(client, GatewayRouteTests.request(envelope, payment: payment))
            #expect(status == 200 && json["status"] as? String == "succeeded", "\(text)")
            let metrics = try await client.execute(uri: "/metrics", method: .get) { String(buffer: $0.body) }
            #expect(Self.metric(metrics, #"vault_gateway_settle_attempts_total{result="resent"}"#) == 1, "\(metrics)")
            #expect(Self.metric(metrics, #"vault_gateway_settle_attempts_total{result="settled"}"#) == 1, "\(metrics)")
        }
        let seen = Self.seen(processor, payment)
        #expect(seen.posts == 2 && seen.charges == 1, "\(seen)")
        guard case .outcome(.succeeded)? = try await relay.authorization(of: payment) else { Issue.record("not settled"); return }
    }

    /// `server_errors: not_charged`: a 5xx on the first send means nothing was charged: 503, the
    /// ledger row released, and the same payment id may be sent again (and then charges once).
    @Test func aServerErrorIsNotChargedWhenTheTemplateSaysSo() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let processor = try StandIn(dir: f.dir, name: "p")
        defer { processor.stop() }
        let relay = try await RelayProcessorTests.load(
            Self.template(port: processor.port, scenario: "fail-1", settle: ["server_errors": "not_charged", "resend": true, "retry_within_seconds": 5]),
            dir: f.dir, timing: Self.timing)
        let envelope = try f.envelope("4242424242424242")
        let payment = RandomID.make(prefix: "pay_")
        try await RelayProcessorTests.withApp(f, relay) { client in
            let (status, json, text) = try await GatewayRouteTests.authorize(client, GatewayRouteTests.request(envelope, payment: payment))
            #expect(status == 503 && RelayProcessorTests.errorCode(json) == "GATEWAY_UNAVAILABLE" && text.contains("nothing was charged"), "\(text)")
            let (get, getJSON, _) = try await Self.get(client, payment)
            #expect(get == 404 && RelayProcessorTests.errorCode(getJSON) == "AUTHORIZATION_NOT_FOUND")
            let (again, againJSON, againText) = try await GatewayRouteTests.authorize(client, GatewayRouteTests.request(envelope, payment: payment))
            #expect(again == 200 && againJSON["status"] as? String == "succeeded", "\(againText)")
        }
        let seen = Self.seen(processor, payment)
        #expect(seen.posts == 2 && seen.charges == 1, "\(seen)")
    }

    /// A timeout (the processor charged, its answer never came in time): the status query in the
    /// call finds the charge. One send.
    @Test func aTimeoutIsSettledByTheStatusQuery() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let processor = try StandIn(dir: f.dir, name: "p")
        defer { processor.stop() }
        let relay = try await RelayProcessorTests.load(
            Self.template(port: processor.port, scenario: "hang-once", hang: 3, settle: ["status": true, "retry_within_seconds": 10]),
            dir: f.dir, timing: Self.timing)
        let payment = RandomID.make(prefix: "pay_")
        let outcome = try await relay.authorize(Self.request(payment), card: try Self.card(f, try f.envelope("4242424242424242")))
        guard case .succeeded(let reference) = outcome else { Issue.record("\(outcome)"); return }
        #expect(reference.hasPrefix("ch_"))
        let seen = Self.seen(processor, payment)
        #expect(seen.posts == 1 && seen.charges == 1 && seen.queries >= 1, "\(seen)")
    }

    /// The connection dropped after the processor charged: the re-send with the same idempotency
    /// key gets the first result. One charge, and the reference is that charge's.
    @Test func aDroppedConnectionAfterChargingIsSettledByAResend() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let processor = try StandIn(dir: f.dir, name: "p")
        defer { processor.stop() }
        let relay = try await RelayProcessorTests.load(
            Self.template(port: processor.port, scenario: "drop-once", settle: ["resend": true, "retry_within_seconds": 5]), dir: f.dir,
            timing: Self.timing)
        let payment = RandomID.make(prefix: "pay_")
        let outcome = try await relay.authorize(Self.request(payment), card: try Self.card(f, try f.envelope("4242424242424242")))
        guard case .succeeded = outcome else { Issue.record("\(outcome)"); return }
        let seen = Self.seen(processor, payment)
        #expect(seen.posts == 2 && seen.charges == 1, "\(seen)")
    }

    // MARK: - After the call

    /// A resend-only template (no status query) whose call ended unknown: the gateway answers
    /// 409 AUTHORIZATION_PENDING with `resend: true`; a re-post before the next try is 504
    /// AUTHORIZATION_PENDING, after it the re-send gets the first result (the sidecar's reconciler
    /// does this with the token's envelope). One charge.
    @Test func aRepostSettlesAResendOnlyTemplate() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let processor = try StandIn(dir: f.dir, name: "p")
        defer { processor.stop() }
        let clock = Clock()
        var timing = Self.timing
        timing.minRetry = 30
        let relay = try await RelayProcessorTests.load(
            Self.template(port: processor.port, scenario: "charge-then-fail-1", settle: ["resend": true]), dir: f.dir, timing: timing,
            now: clock.now)
        let envelope = try f.envelope("4242424242424242")
        let payment = RandomID.make(prefix: "pay_")
        let body = GatewayRouteTests.request(envelope, payment: payment)
        try await RelayProcessorTests.withApp(f, relay) { client in
            let (status, json, text) = try await GatewayRouteTests.authorize(client, body)
            #expect(status == 504 && RelayProcessorTests.errorCode(json) == "GATEWAY_UNAVAILABLE", "\(text)")
            let (get, pending, getText) = try await Self.get(client, payment)
            #expect(get == 409 && RelayProcessorTests.errorCode(pending) == "AUTHORIZATION_PENDING", "\(getText)")
            #expect(pending["status"] as? String == "pending" && pending["resend"] as? Bool == true && pending["status_query"] as? Bool == false)
            #expect(pending["in_flight"] as? Bool == false && pending["attempts"] as? Int == 1, "\(getText)")
            #expect((pending["reason"] as? String)?.contains("500") == true && pending["next_try_at"] is String && pending["deadline_at"] is String)
            // Not due yet: nothing is sent.
            let (early, earlyJSON, earlyText) = try await GatewayRouteTests.authorize(client, body)
            #expect(early == 504 && RelayProcessorTests.errorCode(earlyJSON) == "AUTHORIZATION_PENDING", "\(earlyText)")
            clock.advance(400)
            let (late, lateJSON, lateText) = try await GatewayRouteTests.authorize(client, body)
            #expect(late == 200 && lateJSON["status"] as? String == "succeeded", "\(lateText)")
            let (done, doneJSON, _) = try await Self.get(client, payment)
            #expect(done == 200 && doneJSON["reference"] as? String == lateJSON["reference"] as? String)
        }
        let seen = Self.seen(processor, payment)
        #expect(seen.posts == 2 && seen.charges == 1, "\(seen)")
    }

    /// The processor never answers and its status query fails: the call answers 504, the payment
    /// is pending until its deadline, then the settler reports it: an error log line with the
    /// payment and the reason (once, whichever gateway), the past-deadline gauge, and `unknown`
    /// answers to GET and to a re-post.
    @Test func anOutcomeNeverKnownIsReportedAtTheDeadline() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let processor = try StandIn(dir: f.dir, name: "p")
        defer { processor.stop() }
        let clock = Clock()
        let logs = InMemoryLogHandler()
        let logger = Logger(label: "test.settler") { _ in logs }
        let store = try await LedgerBackend.sqlite(f.dir + "/ledger.sqlite")
        let relay = try await RelayProcessorTests.load(
            Self.template(
                port: processor.port, scenario: "hang", hang: 3, timeout: 0.5, settle: ["status": true, "retry_within_seconds": 1.5, "deadline_seconds": 600],
                statusScenario: "500"),
            dir: f.dir, ledger: store, timing: Self.timing, logger: logger, now: clock.now)
        let settler = LedgerSettler(ledger: store, processor: relay, metrics: relay.metrics, logger: logger, now: clock.now)
        let envelope = try f.envelope("4242424242424242")
        let payment = RandomID.make(prefix: "pay_")
        let body = GatewayRouteTests.request(envelope, payment: payment)
        try await RelayProcessorTests.withApp(f, relay) { client in
            let (status, json, text) = try await GatewayRouteTests.authorize(client, body)
            #expect(status == 504 && RelayProcessorTests.errorCode(json) == "GATEWAY_UNAVAILABLE", "\(text)")
            let (get, pending, getText) = try await Self.get(client, payment)
            #expect(get == 409 && pending["status_query"] as? Bool == true && pending["resend"] as? Bool == false, "\(getText)")
            // The settler asks (and fails) while the deadline is ahead.
            clock.advance(400)
            await settler.tick()
            #expect(logs.entries.filter { $0.level == .error }.isEmpty)
            clock.advance(400)
            await settler.tick()
            await settler.tick()
            let reported = logs.entries.filter { $0.level == .error && $0.message.description == "payment outcome unknown after the settlement deadline" }
            #expect(reported.count == 1, "\(logs.entries)")
            #expect(reported.first?.metadata["payment"]?.description == payment)
            #expect(reported.first?.metadata["reason"]?.description.isEmpty == false)
            let (after, unknown, afterText) = try await Self.get(client, payment)
            #expect(after == 200 && unknown["status"] as? String == "unknown" && (unknown["reason"] as? String)?.isEmpty == false, "\(afterText)")
            let (repost, repostJSON, repostText) = try await GatewayRouteTests.authorize(client, body)
            #expect(repost == 200 && repostJSON["status"] as? String == "unknown", "\(repostText)")
            let metrics = try await client.execute(uri: "/metrics", method: .get) { String(buffer: $0.body) }
            #expect(Self.metric(metrics, "vault_gateway_ledger_unknown_past_deadline") == 1, "\(metrics)")
            #expect(Self.metric(metrics, "vault_gateway_ledger_unsettled") == 1, "\(metrics)")
            #expect(!metrics.contains("4242424242424242") && !afterText.contains("4242424242424242"))
        }
        #expect(Self.seen(processor, payment).posts == 1)
        #expect(!logs.entries.map { "\($0.message) \($0.metadata)" }.joined().contains("4242424242424242"))
    }

    /// A gateway killed mid-call leaves its row `sending` with a lease that runs out: the
    /// settler's status query finds the charge (settled); a row the status query does not know is
    /// kept, since the template re-sends under the processor's idempotency key: due again with
    /// backoff for the sidecar's re-post, and not before no send can still arrive.
    @Test func aGatewayKilledMidCallIsSettledByTheSettler() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let processor = try StandIn(dir: f.dir, name: "p")
        defer { processor.stop() }
        let store = try await LedgerBackend.sqlite(f.dir + "/ledger.sqlite")
        let relay = try await RelayProcessorTests.load(
            Self.template(port: processor.port, scenario: "ok", settle: ["status": true, "resend": true]), dir: f.dir, ledger: store,
            timing: Self.timing)
        let settler = LedgerSettler(ledger: store, processor: relay, metrics: relay.metrics, logger: Logger(label: "test"))
        let long = Date().addingTimeInterval(-60), recent = Date().addingTimeInterval(-0.5)
        func crashed(_ id: String, at t: Date) -> LedgerEntry {
            LedgerEntry(
                paymentID: id, processor: relay.name, amount: 1050, currency: "EUR", envelopeID: "env_x", state: .sending,
                leaseUntil: t.addingTimeInterval(0.2), deadlineAt: t.addingTimeInterval(86400), createdAt: t)
        }
        let charged = RandomID.make(prefix: "pay_"), never = RandomID.make(prefix: "pay_"), tooSoon = RandomID.make(prefix: "pay_")
        for (id, t) in [(charged, long), (never, long), (tooSoon, recent)] { #expect(try await store.claim(crashed(id, at: t)) == .claimed) }
        // The dead gateway's request did reach the processor for `charged`.
        let sent = try runProgram("/usr/bin/env", ["curl", "-s", "-X", "POST", "-H", "Idempotency-Key: \(charged)", "-d", "amount=1050",
                                            "http://127.0.0.1:\(processor.port)/v1/charges"])
        #expect(sent.contains("ch_"), "\(sent)")
        try await Task.sleep(for: .milliseconds(300))
        await settler.tick()
        let settled = try #require(try await store.entry(charged))
        #expect(settled.state == .done && settled.status == "succeeded" && settled.reference?.hasPrefix("ch_") == true, "\(settled)")
        // Not forgotten: a processor still working on the dead gateway's send, or whose lookups
        // lag, answers "not found" too, and a forgotten payment id invites a second payment.
        let kept = try #require(try await store.entry(never))
        #expect(kept.state == .unknown && kept.reason?.contains("re-sent under its idempotency key") == true && kept.nextTryAt != nil, "\(kept)")
        guard case .pending(let pending)? = try await relay.authorization(of: never) else { Issue.record("not pending"); return }
        #expect(pending.resend && !pending.inFlight, "\(pending)")
        let waiting = try #require(try await store.entry(tooSoon))
        #expect(waiting.state == .unknown && waiting.nextTryAt.map { $0 > Date() } == true, "\(waiting)")
        #expect(Self.seen(processor, charged).charges == 1 && Self.seen(processor, never).posts == 0)
    }

    /// Without a re-send (a status query only), a row the processor never got is deleted once no
    /// send can still arrive: nothing was charged (404), and nothing else could ever settle it.
    @Test func aRowNeverReceivedIsForgottenOnlyWithoutAResend() async throws {
        let rig = try await Self.rig(settle: ["status": true])
        defer { rig.done() }
        let (processor, store, relay) = (rig.processor, rig.store, rig.relay)
        let settler = LedgerSettler(ledger: store, processor: relay, metrics: relay.metrics, logger: Logger(label: "test"))
        let never = RandomID.make(prefix: "pay_")
        try await Self.leftUnknown(store, never, processor: relay.name, envelopeID: "env_x", age: 60)
        await settler.tick()
        #expect(try await store.entry(never) == nil)
        #expect(try await relay.authorization(of: never) == nil)
        #expect(Self.seen(processor, never).queries == 1 && Self.seen(processor, never).posts == 0)
    }

    /// A re-post of a row whose status query does not know it, with a template that re-sends:
    /// the row is kept (its attempts go on, its deadline stays) and the re-send carries the same
    /// processor idempotency key. One send, one charge.
    @Test func aRepostOfAPaymentNotFoundIsResentUnderItsKey() async throws {
        let rig = try await Self.rig(settle: ["status": true, "resend": true])
        defer { rig.done() }
        let (f, processor, store, relay) = (rig.f, rig.processor, rig.store, rig.relay)
        let card = try Self.card(f, try f.envelope("4242424242424242"))
        let payment = RandomID.make(prefix: "pay_")
        try await Self.leftUnknown(store, payment, processor: relay.name, envelopeID: card.envelopeID, age: 120)
        let before = try #require(try await store.entry(payment))
        let outcome = try await relay.authorize(Self.request(payment), card: card)
        guard case .succeeded = outcome else { Issue.record("\(outcome)"); return }
        let seen = Self.seen(processor, payment)
        #expect(seen.queries == 1 && seen.posts == 1 && seen.charges == 1, "\(seen)")
        let row = try #require(try await store.entry(payment))
        #expect(row.state == .done && row.attempts == before.attempts + 1 && row.deadlineAt == before.deadlineAt, "\(row)")
    }

    // MARK: - Two gateways on one store

    /// Two gateways (two handles on one store, both backends) get the same payment id at once:
    /// one sends, the other answers AUTHORIZATION_IN_PROGRESS; then the same two re-post a row
    /// left unknown at once: one re-send.
    @Test(arguments: LedgerBackend.available)
    func twoGatewaysSendAPaymentIDOnce(_ backend: LedgerBackend) async throws {
        let f = try Fixture()
        defer { f.remove() }
        let processor = try StandIn(dir: f.dir, name: "p")
        defer { processor.stop() }
        let (a, b, cleanup) = try await backend.make(dir: f.dir)
        defer { Task { await cleanup() } }
        let template = Self.template(port: processor.port, scenario: "hang-once", hang: 1.5, timeout: 5, settle: ["resend": true])
        let one = try await RelayProcessorTests.load(template, dir: f.dir, ledger: a, timing: Self.timing)
        let two = try await RelayProcessorTests.load(template, dir: f.dir, ledger: b, timing: Self.timing)
        let card = try Self.card(f, try f.envelope("4242424242424242"))
        let payment = RandomID.make(prefix: "pay_")
        async let x = Self.attempt { try await one.authorize(Self.request(payment), card: card) }
        async let y = Self.attempt { try await two.authorize(Self.request(payment), card: card) }
        let results = await [x, y]
        #expect(results.filter { if case .success(.succeeded) = $0 { true } else { false } }.count == 1, "\(results)")
        #expect(results.contains { if case .failure(let e) = $0 { (e as? ProcessorError) == .inProgress } else { false } }, "\(results)")
        #expect(Self.seen(processor, payment).posts == 1)

        // A row left unknown (sent once, answer lost), due now: both gateways re-post it at once.
        let lost = RandomID.make(prefix: "pay_")
        try await Self.leftUnknown(a, lost, processor: one.name, envelopeID: card.envelopeID, age: 30)
        async let p = Self.attempt { try await one.authorize(Self.request(lost), card: card) }
        async let q = Self.attempt { try await two.authorize(Self.request(lost), card: card) }
        let reposts = await [p, q]
        #expect(reposts.filter { if case .success(.succeeded) = $0 { true } else { false } }.count == 1, "\(reposts)")
        #expect(Self.seen(processor, lost).posts == 1)
        #expect(try await b.entry(lost)?.attempts == 2)
    }

    /// A re-post of a row left unknown, whose status query says the processor never received it
    /// (and no send can still arrive): nothing was charged, the row starts again at attempt 1 and
    /// this call sends it. One send, one charge.
    @Test func aRepostOfAPaymentNeverReceivedSendsItAfresh() async throws {
        let rig = try await Self.rig(settle: ["status": true])
        defer { rig.done() }
        let (f, processor, store, relay) = (rig.f, rig.processor, rig.store, rig.relay)
        let card = try Self.card(f, try f.envelope("4242424242424242"))
        let payment = RandomID.make(prefix: "pay_")
        try await Self.leftUnknown(store, payment, processor: relay.name, envelopeID: card.envelopeID, age: 120)
        let outcome = try await relay.authorize(Self.request(payment), card: card)
        guard case .succeeded = outcome else { Issue.record("\(outcome)"); return }
        let seen = Self.seen(processor, payment)
        #expect(seen.queries == 1 && seen.posts == 1 && seen.charges == 1, "\(seen)")
        let row = try #require(try await store.entry(payment))
        #expect(row.state == .done && row.attempts == 1)
    }

    // MARK: - Ledgers of earlier versions

    /// A gateway's own ledger file from before the store layer (GRDB's migrations table,
    /// `sandbox_charges` or `relay_charges`) is imported when the gateway opens it as its store:
    /// recorded outcomes answer as before, and a relay row left `sent` (the bug of issue 13) is an
    /// unknown outcome to settle, no longer stuck.
    @Test func aLedgerFileOfAnEarlierVersionIsImported() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let path = f.dir + "/old-ledger.sqlite"
        let t = Int(Date().timeIntervalSince1970) - 3600
        _ = try runProgram("/usr/bin/env", ["python3", "-c", """
            import sqlite3, sys
            c = sqlite3.connect(sys.argv[1])
            c.executescript('''
            CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
            INSERT INTO grdb_migrations VALUES ('sandbox-v1'), ('relay-v1');
            CREATE TABLE sandbox_charges (payment_id TEXT PRIMARY KEY NOT NULL, amount INTEGER NOT NULL, currency TEXT NOT NULL,
                status TEXT NOT NULL, decline_code TEXT, reference TEXT, transaction_id TEXT, created_at INTEGER NOT NULL,
                envelope_id TEXT NOT NULL DEFAULT '');
            CREATE TABLE sandbox_3ds (transaction_id TEXT PRIMARY KEY NOT NULL, payment_id TEXT NOT NULL, request_jti TEXT NOT NULL);
            CREATE TABLE sandbox_3ds_used (jti TEXT PRIMARY KEY NOT NULL);
            CREATE TABLE relay_charges (payment_id TEXT PRIMARY KEY NOT NULL, amount INTEGER NOT NULL, currency TEXT NOT NULL,
                envelope_id TEXT NOT NULL, state TEXT NOT NULL, status TEXT, decline_code TEXT, reference TEXT, created_at INTEGER NOT NULL);
            ''')
            c.execute("INSERT INTO sandbox_charges VALUES ('pay_oldsandbox', 1050, 'EUR', 'succeeded', NULL, 'sbx_old', NULL, ?, 'env_old')", (int(sys.argv[2]),))
            c.execute("INSERT INTO relay_charges VALUES ('pay_oldsent', 1050, 'EUR', 'env_sent', 'sent', NULL, NULL, NULL, ?)", (int(sys.argv[2]),))
            c.commit()
            """, path, String(t)])
        let store = try await LedgerBackend.sqlite(path)
        let threeDS = await ThreeDSValidator(apiKey: Fixture.threeDSKey, issuer: "vault-sandbox-3ds")
        let sandbox = SandboxProcessor(ledger: store, threeDS: threeDS)
        #expect(try await sandbox.authorization(of: "pay_oldsandbox") == .outcome(.succeeded(reference: "sbx_old")))
        let relay = try await RelayProcessorTests.load(
            Self.template(port: 9, scenario: "ok", settle: ["resend": true]), dir: f.dir, ledger: store, timing: Self.timing)
        guard case .pending(let pending)? = try await relay.authorization(of: "pay_oldsent") else { Issue.record("not pending"); return }
        #expect(pending.resend && !pending.inFlight && pending.attempts == 1, "\(pending)")
        let row = try #require(try await store.entry("pay_oldsent"))
        #expect(row.state == .unknown && row.processor == "relay")
    }

    // MARK: - The template's settle section

    @Test func settleSectionsThatCannotBeUsedAreRefused() async throws {
        let f = try Fixture()
        defer { f.remove() }
        func with(_ settle: [String: Any], allowed: [String]? = nil) -> [String: Any] {
            var t = RelayProcessorTests.template(url: "https://api.example.com/v1/charges")
            t["settle"] = settle
            if let allowed {
                var request = t["request"] as! [String: Any]
                request["allowed_hosts"] = allowed
                t["request"] = request
            }
            return t
        }
        let status = { (url: String) -> [String: Any] in ["url": url] }
        let cases: [([String: Any], String)] = [
            (["resends": true], "RELAY_TEMPLATE_INVALID"),
            (["server_errors": "maybe"], "RELAY_TEMPLATE_INVALID"),
            (["retry_within_seconds": 60], "RELAY_TEMPLATE_INVALID"),
            (["deadline_seconds": 10], "RELAY_TEMPLATE_INVALID"),
            (["status": status("https://api.example.com/v1/charges/{{pan}}")], "RELAY_TEMPLATE_INVALID"),
            (["status": ["url": "https://api.example.com/v1/charges/{{payment_id}}", "headers": [["X-Card", "{{cvc}}"]]]], "RELAY_TEMPLATE_INVALID"),
            (["status": ["url": "https://api.example.com/v1/charges/x", "json": ["a": 1]]], "RELAY_TEMPLATE_INVALID"),
            (["status": ["url": "https://api.example.com/x", "not_found_http_statuses": [500]]], "RELAY_TEMPLATE_INVALID"),
            (["status": status("https://elsewhere.example/v1/charges/{{payment_id}}")], "RELAY_URL_NOT_ALLOWED"),
            (["status": status("http://api.example.com/v1/charges/{{payment_id}}")], "RELAY_URL_NOT_ALLOWED"),
        ]
        for (settle, code) in cases {
            let refused = await RelayProcessorTests.refusal(with(settle), dir: f.dir)
            #expect(refused?.contains(code) == true, "\(settle): \(refused ?? "loaded")")
        }
        _ = try await RelayProcessorTests.load(
            with(["resend": true, "status": status("https://status.example.com/v1/charges/{{idempotency_key}}"), "server_errors": "not_charged",
                  "retry_within_seconds": 10, "deadline_seconds": 82800], allowed: ["status.example.com"]),
            dir: f.dir)
        // The shipped templates load, with their settle sections.
        for name in ["stripe-style", "cashfree-style"] {
            let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("deploy/relay/\(name).json").path
            let template = try RelayTemplate(path: path)
            #expect(template.settle.resend && template.settle.deadline < 86400, "\(name)")
        }
    }

    /// A row a call left unknown `age` seconds ago (sent once, its answer lost), due now.
    /// A relay over a stand-in processor, its ledger in a SQLite store of its own: what a test of
    /// one settlement step starts from. `done()` stops the processor and removes the files.
    struct Rig {
        let f: Fixture
        let processor: StandIn
        let store: LedgerStore
        let relay: RelayProcessor
        func done() {
            processor.stop()
            f.remove()
        }
    }

    static func rig(settle: [String: Any]) async throws -> Rig {
        let f = try Fixture()
        let processor = try StandIn(dir: f.dir, name: "p")
        let store = try await LedgerBackend.sqlite(f.dir + "/ledger.sqlite")
        let relay = try await RelayProcessorTests.load(
            Self.template(port: processor.port, scenario: "ok", settle: settle), dir: f.dir, ledger: store, timing: Self.timing)
        return Rig(f: f, processor: processor, store: store, relay: relay)
    }

    static func leftUnknown(_ store: LedgerStore, _ payment: String, processor: String, envelopeID: String, age: TimeInterval) async throws {
        let t = Date().addingTimeInterval(-age)
        _ = try await store.claim(LedgerEntry(
            paymentID: payment, processor: processor, amount: 1050, currency: "EUR", envelopeID: envelopeID, state: .sending,
            leaseUntil: t.addingTimeInterval(1), deadlineAt: t.addingTimeInterval(86400), createdAt: t))
        #expect(try await store.markUnknown(payment, reason: "timeout", nextTryAt: t, deadlineAt: t.addingTimeInterval(86400), now: t))
    }

    static func attempt(_ body: @Sendable () async throws -> AuthorizationOutcome) async -> Result<AuthorizationOutcome, any Error> {
        do { return .success(try await body()) } catch { return .failure(error) }
    }

    static func get(_ client: any TestClientProtocol, _ payment: String) async throws -> (Int, [String: Any], String) {
        try await client.execute(uri: "/v1/authorizations/\(payment)", method: .get) { r in
            let text = String(buffer: r.body)
            return (Int(r.status.code), (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:], text)
        }
    }
}


/// Runs a program; its standard output.
func runProgram(_ path: String, _ arguments: [String]) throws -> String {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: path)
    p.arguments = arguments
    let out = Pipe()
    p.standardOutput = out
    p.standardError = FileHandle.nullDevice
    try p.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return String(decoding: data, as: UTF8.self)
}
