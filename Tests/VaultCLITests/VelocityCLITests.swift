import Foundation
import Testing

/// Velocity limits end to end (docs/velocity.md, issue 17 item 1) with the real binaries, on
/// SQLite and PostgreSQL: a refusal is 429 `VELOCITY_LIMIT` with `Retry-After`, stores nothing,
/// writes a `velocity.limited` event and counts a metric; declines are counted apart from
/// attempts; a window slides; two sidecars on one PostgreSQL share the counters; bad rules are
/// refused by `vault config check`.
@Suite(.serialized, .ownThread) struct VelocityCLITests {
    typealias Stack = PaymentsCLITests.Stack

    static func json(_ body: String) -> [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]) ?? [:] }

    /// The headers of a request, as curl prints them (for `Retry-After`).
    static func retryAfter(_ s: Stack, _ method: String, _ path: String, _ body: String) throws -> (Int, Int?) {
        let r = try run("/usr/bin/env", ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-D", "-", "--unix-socket", s.sidecarSocket, "-X", method,
                                          "-H", "Content-Type: application/json", "--data-binary", body, "http://vault" + path])
        let lines = r.out.replacingOccurrences(of: "\r", with: "").split(separator: "\n")
        let value = lines.first { $0.lowercased().hasPrefix("retry-after:") }.flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespacesAndNewlines)) }
        return (Int(lines.last?.suffix(3) ?? "") ?? 0, value)
    }

    static func count(_ s: Stack, events type: String) throws -> Int {
        let (_, body) = try s.curl(s.sidecarSocket, "GET", "/v1/events?limit=100&type=\(type)")
        return (json(body)["data"] as? [Any])?.count ?? -1
    }

    static func card(_ pan: String) -> String { #"{"card":{"number":"\#(pan)","exp_month":12,"exp_year":2030,"cvc":"123"}}"# }

    func limits(store: String?) throws {
        let s = try Stack()
        s.store = store
        defer { s.stop(s.sidecar); s.stop(s.gateway); removeScratch(s.dir) }
        try s.startGateway()
        try s.startSidecar(extra: [
            "--session-max-attempts", "10", "--velocity", "session:tokenize:attempts=3/1h", "--velocity", "bin:tokenize:declines=2/1h",
            "--velocity", "fingerprint:pay:declines=2/1h",
        ])
        // A session: three attempts with a declined card, the fourth refused before anything is done.
        let (made, session) = try s.curl(s.sidecarSocket, "POST", "/v1/sessions", #"{"amount":1000,"currency":"EUR"}"#)
        #expect(made == 201, "\(session)")
        let id = Self.json(session)["id"] as? String ?? ""
        for (i, pan) in ["4000000000000002", "4000000000000069", "4000000000000127"].enumerated() {
            let (_, paid) = try s.curl(s.sidecarSocket, "POST", "/v1/sessions/\(id)/pay", #"{"card":{"number":"\#(pan)","exp_month":12,"exp_year":2030,"cvc":"123"},"idempotency_key":"k\#(i)"}"#)
            #expect(paid.contains("declined"), "\(paid)")
        }
        let tokensBefore = try Self.count(s, events: "token.created"), paymentsBefore = try Self.count(s, events: "payment.*")
        let (status, retry) = try Self.retryAfter(
            s, "POST", "/v1/sessions/\(id)/pay", #"{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2030,"cvc":"123"},"idempotency_key":"k4"}"#)
        #expect(status == 429)
        #expect(retry.map { (1...3600).contains($0) } == true, "Retry-After \(String(describing: retry))")
        let (_, refusal) = try s.curl(
            s.sidecarSocket, "POST", "/v1/sessions/\(id)/pay", #"{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2030,"cvc":"123"},"idempotency_key":"k5"}"#)
        #expect(refusal.contains("VELOCITY_LIMIT") && !containsPAN(refusal), "\(refusal)")
        #expect(try Self.count(s, events: "token.created") == tokensBefore)
        #expect(try Self.count(s, events: "payment.*") == paymentsBefore)
        let (_, events) = try s.curl(s.sidecarSocket, "GET", "/v1/events?type=velocity.limited")
        let limited = (Self.json(events)["data"] as? [[String: Any]]) ?? []
        #expect(limited.count == 1, "one event per rule, key and bucket: \(events)")
        let object = (limited.first?["data"] as? [String: Any])?["object"] as? [String: Any] ?? [:]
        #expect(object["scope"] as? String == "session" && object["key"] as? String == id && object["action"] as? String == "tokenize"
            && object["limit"] as? Int == 3 && object["window_seconds"] as? Int == 3600, "\(object)")
        #expect(!containsPAN(events))
        let (_, metrics) = try s.curl(s.sidecarSocket, "GET", "/metrics")
        #expect(metrics.contains(#"vault_velocity_refusals_total{scope="session",action="tokenize"} 2"#), "\(metrics)")

        // Declines by BIN apart from attempts: good cards of the BIN pass any number of times; two
        // refused numbers of it, and the BIN is refused, a good card too; another BIN is not.
        for _ in 1...4 { #expect(try s.curl(s.sidecarSocket, "POST", "/v1/tokens", Self.card("4111111111111111")).0 == 201) }
        for _ in 1...2 { #expect(try s.curl(s.sidecarSocket, "POST", "/v1/tokens", Self.card("4111111111111112")).0 == 422) }
        let (binRefused, binBody) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", Self.card("4111111111111111"))
        #expect(binRefused == 429 && binBody.contains("VELOCITY_LIMIT"), "\(binBody)")
        #expect(try s.curl(s.sidecarSocket, "POST", "/v1/tokens", Self.card("5555555555554444")).0 == 201)

        // Declines of one card (its fingerprint) on payments: the third payment is refused, and
        // no payment is made for it.
        var answers: [Int] = []
        for i in 1...3 {
            let token = try s.tokenize("4000000000009995")
            answers.append(try s.pay(token, key: "fp\(i)").0)
        }
        #expect(answers[2] == 429, "\(answers)")
        let (_, payments) = try s.curl(s.sidecarSocket, "GET", "/v1/payments?limit=100")
        let fpPayments = ((Self.json(payments)["data"] as? [[String: Any]]) ?? []).filter { ($0["decline_code"] as? String) == "insufficient_funds" }
        #expect(fpPayments.count == 2, "\(payments)")
    }

    @Test func limitsOnSQLite() throws { try limits(store: nil) }

    @Test(.enabled(if: GatewayCLITests.postgresSocket != nil, "needs VAULT_TEST_POSTGRES_SOCKET (scripts/test)"))
    func limitsOnPostgreSQL() throws { try limits(store: GatewayCLITests.postgresStore()) }

    /// By fingerprint on tokenize: counted once the gateway has answered it, refused before anything
    /// is stored (the card is sealed, the token never made); another card is not limited.
    @Test func fingerprintLimitsOnTokenize() throws {
        let s = try Stack()
        defer { s.stop(s.sidecar); s.stop(s.gateway); removeScratch(s.dir) }
        try s.startGateway()
        try s.startSidecar(extra: ["--velocity", "fingerprint:tokenize:attempts=2/1h"])
        for _ in 1...2 { #expect(try s.curl(s.sidecarSocket, "POST", "/v1/tokens", Self.card("4242 4242 4242 4242")).0 == 201) }
        let before = try Self.count(s, events: "token.created")
        let (status, retry) = try Self.retryAfter(s, "POST", "/v1/tokens", Self.card("4242424242424242"))
        #expect(status == 429 && retry.map { (1...3600).contains($0) } == true, "\(status) \(String(describing: retry))")
        #expect(try Self.count(s, events: "token.created") == before)
        let (_, events) = try s.curl(s.sidecarSocket, "GET", "/v1/events?type=velocity.limited")
        let object = ((Self.json(events)["data"] as? [[String: Any]])?.first?["data"] as? [String: Any])?["object"] as? [String: Any] ?? [:]
        #expect(object["scope"] as? String == "fingerprint" && (object["key"] as? String)?.hasPrefix("fp1_") == true && !containsPAN(events), "\(events)")
        #expect(try s.curl(s.sidecarSocket, "POST", "/v1/tokens", Self.card("5555555555554444")).0 == 201)
        // Through a checkout session too: refused once the card is fingerprinted, before its token is
        // stored (no token.created, no token.deleted), and the session stays open.
        let (_, session) = try s.curl(s.sidecarSocket, "POST", "/v1/sessions", #"{"amount":1000,"currency":"EUR"}"#)
        let id = try #require(Self.json(session)["id"] as? String, "\(session)")
        let deletedBefore = try Self.count(s, events: "token.deleted")
        let (paid, paidBody) = try s.curl(
            s.sidecarSocket, "POST", "/v1/sessions/\(id)/pay", #"{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2030},"idempotency_key":"fp-s1"}"#)
        #expect(paid == 429 && paidBody.contains("VELOCITY_LIMIT"), "\(paidBody)")
        #expect(try Self.count(s, events: "token.created") == before + 1)   // the 5555 card above only
        #expect(try Self.count(s, events: "token.deleted") == deletedBefore)
        let (_, shown) = try s.curl(s.sidecarSocket, "GET", "/v1/sessions/\(id)")
        #expect(Self.json(shown)["status"] as? String == "open", "\(shown)")
    }

    /// A decline after a 3-D Secure challenge, at `confirm`, counts as the payment's decline: the
    /// card's next payment is refused.
    @Test func aDeclineAtConfirmIsCounted() throws {
        let s = try Stack()
        defer { s.stop(s.sidecar); s.stop(s.gateway); removeScratch(s.dir) }
        try s.startGateway()
        try s.startSidecar(extra: ["--velocity", "fingerprint:pay:declines=1/1h"])
        let (_, json, body) = try s.pay(try s.tokenize("4000000000003220"), key: "3ds-1")
        let id = try #require(json["id"] as? String, "\(body)")
        let url = try #require((json["next_action"] as? [String: Any])?["challenge_url"] as? String)
        let (_, acsBody) = try s.curl(s.sidecarSocket, "POST", url, #"{"action":"FAILURE"}"#)
        let jwt = try #require(Self.json(acsBody)["three_ds_result"] as? String)
        let (_, confirmed) = try s.curl(s.sidecarSocket, "POST", "/v1/payments/\(id)/confirm", #"{"three_ds_result":"\#(jwt)"}"#)
        #expect(Self.json(confirmed)["status"] as? String == "declined", "\(confirmed)")
        let (again, _, againBody) = try s.pay(try s.tokenize("4000000000003220"), key: "3ds-2")
        #expect(again == 429 && againBody.contains("VELOCITY_LIMIT"), "\(againBody)")
    }

    /// A window slides: refused with a short window, let through again once `Retry-After` has passed.
    @Test func windowSlides() throws {
        let s = try Stack()
        defer { s.stop(s.sidecar); s.stop(s.gateway); removeScratch(s.dir) }
        try s.startGateway()
        try s.startSidecar(extra: ["--velocity", "peer:validate:attempts=2/2s"])
        let body = #"{"number":"4242424242424242"}"#
        var (status, retry) = try Self.retryAfter(s, "POST", "/v1/validate", body)
        if status == 200 { (status, retry) = try Self.retryAfter(s, "POST", "/v1/validate", body) }
        if status == 200 { (status, retry) = try Self.retryAfter(s, "POST", "/v1/validate", body) }
        #expect(status == 429)
        let wait = try #require(retry)
        #expect((1...2).contains(wait))
        // Partial validation (as a number is typed) is never counted.
        #expect(try s.curl(s.sidecarSocket, "POST", "/v1/validate", #"{"number":"4242","partial":true}"#).0 == 200)
        sleep(UInt32(wait) + 1)
        #expect(try s.curl(s.sidecarSocket, "POST", "/v1/validate", body).0 == 200)
    }

    /// Two sidecars on one PostgreSQL store count together: one limit, whichever sidecar is asked.
    @Test(.enabled(if: GatewayCLITests.postgresSocket != nil, "needs VAULT_TEST_POSTGRES_SOCKET (scripts/test)"))
    func twoSidecarsShareTheCounters() throws {
        let store = try GatewayCLITests.postgresStore()
        let a = try Stack()
        a.store = store
        defer { a.stop(a.sidecar); a.stop(a.gateway); removeScratch(a.dir) }
        try a.startGateway()
        try a.startSidecar(extra: ["--velocity", "peer:validate:attempts=3/1h"])
        let second = Process()
        let socket = a.dir + "/second.sock"
        second.executableURL = URL(fileURLWithPath: vaultBinary)
        second.arguments = ["serve", "--socket", socket, "--keys", a.dir + "/sidecar-keys", "--store", store, "--gateway", a.gatewaySocket,
                            "--velocity", "peer:validate:attempts=3/1h"]
        second.standardError = try Stack.logFile(a.dir + "/second.log")
        try second.run()
        defer { a.stop(second) }
        for _ in 0..<200 where second.isRunning {
            if (try? a.curl(socket, "GET", "/v1/health").0) == 200 { break }
            usleep(50_000)
        }
        let body = #"{"number":"4242424242424242"}"#
        #expect(try a.curl(a.sidecarSocket, "POST", "/v1/validate", body).0 == 200)
        #expect(try a.curl(a.sidecarSocket, "POST", "/v1/validate", body).0 == 200)
        #expect(try a.curl(socket, "POST", "/v1/validate", body).0 == 200)
        let (refused, answer) = try a.curl(socket, "POST", "/v1/validate", body)
        #expect(refused == 429 && answer.contains("VELOCITY_LIMIT"), "\(answer)")
        #expect(try a.curl(a.sidecarSocket, "POST", "/v1/validate", body).0 == 429)
    }

    /// `vault config check` shows the rules (the defaults when none is given) and refuses bad ones,
    /// from the file and from the environment.
    @Test func configCheck() throws {
        let s = try Stack()
        defer { removeScratch(s.dir) }
        func check(_ rules: [String]?, environment: String? = nil) throws -> RunResult {
            let velocity = rules.map { ", \"velocity\": [" + $0.map { "\"\($0)\"" }.joined(separator: ", ") + "]" } ?? ""
            let file = s.dir + "/vault.json"
            try #"{"sidecar": {"keys": "\#(s.dir)/sidecar-keys"\#(velocity)}}"#.write(toFile: file, atomically: true, encoding: .utf8)
            var env = ProcessInfo.processInfo.environment
            env["VAULT_SIDECAR_VELOCITY"] = environment
            return try run(vaultBinary, ["config", "check", "--config", file, "--section", "sidecar"], environment: env)
        }
        let defaults = try check(nil)
        #expect(defaults.status == 0 && defaults.out.contains("sidecar.velocity = [] (session:tokenize:attempts=10/10m,"), "\(defaults.out)\(defaults.stderr)")
        let off = try check(["off"])
        #expect(off.status == 0 && off.out.contains("sidecar.velocity = off  ["), "\(off.out)\(off.stderr)")
        let two = try check(nil, environment: "session:pay:declines=3/10m,peer:validate:attempts=100/1m")
        #expect(two.status == 0 && two.out.contains("sidecar.velocity = session:pay:declines=3/10m,peer:validate:attempts=100/1m  [VAULT_SIDECAR_VELOCITY]"), "\(two.out)")
        for bad in ["session:tokenize:attempts", "session:validate:attempts=5/1m", "fingerprint:tokenize:declines=5/1m", "bin:pay:declines=0/1m",
                    "bin:pay:declines=5/2d", "card:pay:declines=5/1m", "bin:pay:tries=5/1m"] {
            let r = try check([bad])
            #expect(r.status != 0 && r.stderr.contains("CONFIG_INVALID") && r.stderr.contains("sidecar.velocity"), "\(bad): \(r.stderr)")
        }
        let twice = try check(["bin:pay:declines=5/1m", "bin:pay:declines=9/1m"])
        #expect(twice.status != 0 && twice.stderr.contains("given twice"), "\(twice.stderr)")
    }
}
