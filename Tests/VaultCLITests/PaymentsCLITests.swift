import Foundation
import Testing

/// Payments end to end with the real binaries: `vault serve` (sidecar, public key only) →
/// `vault gateway` (secret key, sandbox processor), every sandbox test card, idempotency under
/// duplicates, a gateway outage, and a kill -9 of the sidecar mid-payment.
@Suite(.serialized, .ownThread) struct PaymentsCLITests {
    final class Stack: @unchecked Sendable {
        let dir: String
        var sidecarSocket: String { dir + "/vault.sock" }
        var gatewaySocket: String { dir + "/gateway.sock" }
        var ledger: String { dir + "/sandbox.sqlite" }
        var sidecar: Process?
        var gateway: Process?
        /// The servers write their logs to files (a pipe nobody drains would block them once full).
        var sidecarLogPath: String { dir + "/sidecar.log" }
        var gatewayLogPath: String { dir + "/gateway.log" }
        var logs = ""
        /// The sidecar's store (nil: `sqlite:DIR/tokens.sqlite`).
        var store: String?

        init() throws {
            dir = NSTemporaryDirectory() + "vault-pay-" + UUID().uuidString
            for sub in ["gateway-keys", "sidecar-keys"] {
                try FileManager.default.createDirectory(atPath: "\(dir)/\(sub)", withIntermediateDirectories: true)
            }
            let kid = try vault("keygen", "--out", dir + "/gateway-keys").out.trimmingCharacters(in: .whitespacesAndNewlines)
            self.kid = kid
            // The fingerprint key lives with the gateway only (docs/key-files.md).
            guard try vault("keygen", "--fingerprint", "--out", dir + "/gateway-keys").status == 0 else { throw TestFailure("fingerprint keygen failed") }
            try FileManager.default.copyItem(atPath: "\(dir)/gateway-keys/\(kid).pub", toPath: "\(dir)/sidecar-keys/\(kid).pub")
        }
        let kid: String

        func startGateway(processor: [String]? = nil, environment: [String: String] = [:]) throws {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: vaultBinary)
            p.arguments = ["gateway", "--socket", gatewaySocket, "--keys", dir + "/gateway-keys"]
                + (processor ?? ["--processor", "sandbox:" + ledger])
            if !environment.isEmpty { p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
            let log = try Self.logFile(gatewayLogPath)
            p.standardError = log
            p.standardOutput = log
            try p.run()
            gateway = p
            for _ in 0..<200 where p.isRunning {
                if (try? curl(gatewaySocket, "GET", "/v1/health").0) == 200 { break }
                usleep(50_000)
            }
        }

        func startSidecar(extra: [String] = []) throws {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: vaultBinary)
            p.arguments = ["serve", "--socket", sidecarSocket, "--keys", dir + "/sidecar-keys", "--store", store ?? "sqlite:\(dir)/tokens.sqlite",
                           "--gateway", gatewaySocket] + extra
            let log = try Self.logFile(sidecarLogPath)
            p.standardError = log
            p.standardOutput = log
            try p.run()
            sidecar = p
            for _ in 0..<200 where p.isRunning {
                if FileManager.default.fileExists(atPath: sidecarSocket), (try? curl(sidecarSocket, "GET", "/v1/health").0) == 200 { break }
                usleep(50_000)
            }
        }

        func stop(_ p: Process?, signal: Int32 = SIGTERM) {
            guard let p, p.isRunning else { return }
            kill(p.processIdentifier, signal)
            p.waitUntilExit()
        }

        func collectLogs() {
            logs = gatewayLogText + sidecarLogText
        }

        var gatewayLogText: String { (try? String(contentsOfFile: gatewayLogPath, encoding: .utf8)) ?? "" }
        var sidecarLogText: String { (try? String(contentsOfFile: sidecarLogPath, encoding: .utf8)) ?? "" }

        /// A log file opened for appending (restarts add to it).
        static func logFile(_ path: String) throws -> FileHandle {
            if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
            let h = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
            try h.seekToEnd()
            return h
        }

        func curl(_ socket: String, _ method: String, _ path: String, _ body: String? = nil) throws -> (Int, String) {
            var args = ["-s", "-o", "-", "-w", "\n%{http_code}", "-D", "/dev/stderr", "--unix-socket", socket, "-X", method]
            if let body { args += ["-H", "Content-Type: application/json", "--data-binary", body] }
            let r = try run("/usr/bin/env", ["curl"] + args + ["http://vault" + path])
            keepArtifact("responses.log", r.out + "\n" + r.stderr)
            let lines = r.out.split(separator: "\n", omittingEmptySubsequences: false)
            return (Int(lines.last ?? "") ?? 0, lines.dropLast().joined(separator: "\n"))
        }

        func tokenize(_ pan: String, cvc: String = "123") throws -> String {
            let (status, body) = try curl(sidecarSocket, "POST", "/v1/tokens", #"{"card":{"number":"\#(pan)","exp_month":12,"exp_year":2030,"cvc":"\#(cvc)"}}"#)
            #expect(status == 201, "\(body)")
            return (try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])?["token"] as? String ?? ""
        }

        func pay(_ token: String, key: String, amount: Int = 1999, currency: String = "EUR") throws -> (Int, [String: Any], String) {
            let (status, body) = try curl(
                sidecarSocket, "POST", "/v1/payments",
                #"{"token":"\#(token)","amount":\#(amount),"currency":"\#(currency)","idempotency_key":"\#(key)"}"#)
            return (status, (try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]) ?? [:], body)
        }

        /// Charges the sandbox recorded for a payment id (its ledger, read with Python's sqlite3).
        func charges(_ paymentID: String? = nil) throws -> Int {
            // The sandbox's charges are its rows of the processor ledger (vault_ledger, in the gateway's store).
            let query = paymentID.map { "SELECT COUNT(*) FROM vault_ledger WHERE processor = 'sandbox' AND payment_id = '\($0)'" }
                ?? "SELECT COUNT(*) FROM vault_ledger WHERE processor = 'sandbox'"
            let r = try run("/usr/bin/env", ["python3", "-c", "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchone()[0])", ledger, query])
            return Int(r.out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        }

        deinit {
            stop(sidecar)
            stop(gateway)
            removeScratch(dir)
        }
    }

    static func key() -> String { "order-" + UUID().uuidString }

    @Test func everySandboxCardEndToEnd() throws {
        let s = try Stack()
        try s.startGateway()
        try s.startSidecar()
        let cards: [(String, String, String?)] = [
            ("4242424242424242", "succeeded", nil),
            ("4000000000000002", "declined", "generic_decline"),
            ("4000000000009995", "declined", "insufficient_funds"),
            ("4000000000000069", "declined", "expired_card"),
            ("4000000000000127", "declined", "incorrect_cvc"),
            ("4000000000000119", "declined", "processing_error"),
            ("4000000000003220", "requires_action", nil),
        ]
        var answers = ""
        for (pan, status, code) in cards {
            let token = try s.tokenize(pan)
            let key = Self.key()
            let (http, json, body) = try s.pay(token, key: key)
            answers += body
            #expect(http == 201, "\(pan): \(body)")
            #expect(json["status"] as? String == status, "\(pan): \(body)")
            #expect(json["decline_code"] as? String == code)
            let id = try #require(json["id"] as? String)
            #expect(try s.charges(id) == 1)
            // The authoritative status.
            let (getStatus, got) = try s.curl(s.sidecarSocket, "GET", "/v1/payments/\(id)")
            #expect(getStatus == 200 && got.contains(#""status":"\#(status)""#))
            // A replay: the first payment, no second charge.
            let (again, replay, replayBody) = try s.pay(token, key: key)
            #expect(again == 200 && replay["id"] as? String == id, "\(replayBody)")
            #expect(try s.charges(id) == 1)
            // The CVC is gone after the first attempt whatever the outcome; success consumes the token.
            let (tokenStatus, tokenBody) = try s.curl(s.sidecarSocket, "GET", "/v1/tokens/\(token)")
            if status == "succeeded" {
                #expect(tokenStatus == 404, "a paid single-use token is consumed")
                let (reuse, _, reuseBody) = try s.pay(token, key: Self.key())
                #expect(reuse == 404 && reuseBody.contains("TOKEN_NOT_FOUND"))
            } else {
                #expect(tokenStatus == 200 && tokenBody.contains(#""has_cvc":false"#), "\(tokenBody)")
            }
            if status == "requires_action" {
                let next = try #require(json["next_action"] as? [String: Any])
                #expect(next["type"] as? String == "three_ds_challenge")
            }
        }
        // Another request under a used key; bad amounts and currencies; unknown tokens.
        let token = try s.tokenize("5555555555554444")
        let key = Self.key()
        #expect(try s.pay(token, key: key).0 == 201)
        let (reused, _, reusedBody) = try s.pay(token, key: key, amount: 1)
        #expect(reused == 409 && reusedBody.contains("IDEMPOTENCY_KEY_REUSED"))
        #expect(try s.pay(token, key: Self.key(), currency: "XXY").2.contains("CURRENCY_INVALID"))
        #expect(try s.pay(token, key: Self.key(), amount: 0).2.contains("AMOUNT_INVALID"))
        #expect(try s.pay("tok_doesnotexist", key: Self.key()).0 == 404)
        #expect(try s.charges() == cards.count + 1)

        s.stop(s.sidecar)
        s.stop(s.gateway)
        s.collectLogs()
        #expect(!containsPAN(answers), "a PAN in an answer")
        #expect(!containsPAN(s.logs), "a PAN in the sidecar's or the gateway's log")
        for f in ["tokens.sqlite", "tokens.sqlite-wal", "sandbox.sqlite"] {
            let data = FileManager.default.contents(atPath: "\(s.dir)/\(f)") ?? Data()
            #expect(!containsPAN(String(decoding: data, as: UTF8.self)), "\(f) holds a PAN")
        }
    }

    /// The 3-D Secure challenge card through the sidecar: requires_action, the challenge page,
    /// a forged result refused, the real result confirming (or declining) the payment.
    @Test(arguments: [("SUCCESS", "succeeded", nil), ("FAILURE", "declined", "three_ds_failed"), ("CANCEL", "declined", "three_ds_cancelled")] as [(String, String, String?)])
    func threeDSChallengeEndToEnd(action: String, status: String, declineCode: String?) throws {
        let s = try Stack()
        try s.startGateway()
        try s.startSidecar()
        let token = try s.tokenize("4000000000003220")
        let (http, json, body) = try s.pay(token, key: Self.key())
        #expect(http == 201 && json["status"] as? String == "requires_action", "\(body)")
        let id = try #require(json["id"] as? String)
        let next = try #require(json["next_action"] as? [String: Any])
        let url = try #require(next["challenge_url"] as? String)
        // A result that the 3DS server did not sign is refused and the payment keeps waiting.
        let forged = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJpc3MiOiJ2YXVsdC1zYW5kYm94LTNkcyJ9.c2lnbmF0dXJl"
        let (bad, badBody) = try s.curl(s.sidecarSocket, "POST", "/v1/payments/\(id)/confirm", #"{"three_ds_result":"\#(forged)"}"#)
        #expect(bad == 422 && badBody.contains("THREE_DS_JWT_INVALID"), "\(badBody)")
        #expect(try s.curl(s.sidecarSocket, "GET", "/v1/payments/\(id)").1.contains(#""status":"requires_action""#))
        // The cardholder completes the challenge; the caller confirms with the result.
        let (acs, acsBody) = try s.curl(s.sidecarSocket, "POST", url, #"{"action":"\#(action)"}"#)
        #expect(acs == 200, "\(acsBody)")
        let jwt = try #require((try JSONSerialization.jsonObject(with: Data(acsBody.utf8)) as? [String: Any])?["three_ds_result"] as? String)
        let (ok, okBody) = try s.curl(s.sidecarSocket, "POST", "/v1/payments/\(id)/confirm", #"{"three_ds_result":"\#(jwt)"}"#)
        #expect(ok == 200, "\(okBody)")
        let done = try #require(try JSONSerialization.jsonObject(with: Data(okBody.utf8)) as? [String: Any])
        #expect(done["status"] as? String == status && done["decline_code"] as? String == declineCode, "\(okBody)")
        #expect(try s.curl(s.sidecarSocket, "GET", "/v1/payments/\(id)").1.contains(#""status":"\#(status)""#))
        // Confirmed once: again is refused; a paid single-use token is consumed.
        let (again, againBody) = try s.curl(s.sidecarSocket, "POST", "/v1/payments/\(id)/confirm", #"{"three_ds_result":"\#(jwt)"}"#)
        #expect(again == 409 && againBody.contains("PAYMENT_NOT_AWAITING_ACTION"))
        #expect(try s.curl(s.sidecarSocket, "GET", "/v1/tokens/\(token)").0 == (status == "succeeded" ? 404 : 200))
        #expect(try s.charges(id) == 1)
    }

    /// Customers with stored instruments (the Stripe seed): attach a token (it becomes a reusable
    /// instrument without CVC), pay by customer with the default instrument, change the default,
    /// detach.
    @Test func customersAndStoredInstruments() throws {
        let s = try Stack()
        try s.startGateway()
        try s.startSidecar()
        func json(_ text: String) -> [String: Any] { (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:] }
        let (created, customerBody) = try s.curl(s.sidecarSocket, "POST", "/v1/customers", #"{"reference":"shop-user-17"}"#)
        #expect(created == 201, "\(customerBody)")
        let customer = try #require(json(customerBody)["id"] as? String)
        #expect(customer.hasPrefix("cus_") && json(customerBody)["reference"] as? String == "shop-user-17")

        let visaToken = try s.tokenize("4242424242424242")
        let tokenFingerprint = (json(try s.curl(s.sidecarSocket, "GET", "/v1/tokens/\(visaToken)").1)["card"] as? [String: Any])?["fingerprint"] as? String
        #expect(tokenFingerprint?.count == 85 && tokenFingerprint?.hasPrefix("fp1_") == true)  // fp1_<fkid>_<64 hex>
        let (attached, attachBody) = try s.curl(s.sidecarSocket, "POST", "/v1/customers/\(customer)/instruments", #"{"token":"\#(visaToken)"}"#)
        #expect(attached == 201, "\(attachBody)")
        // The instrument keeps the gateway's fingerprint (and the gateway checks it on every payment below).
        #expect((json(attachBody)["card"] as? [String: Any])?["fingerprint"] as? String == tokenFingerprint)
        let visa = try #require(json(attachBody)["id"] as? String)
        #expect((json(attachBody)["card"] as? [String: Any])?["last4"] as? String == "4242")
        #expect(!containsPAN(attachBody))
        #expect(try s.curl(s.sidecarSocket, "GET", "/v1/tokens/\(visaToken)").0 == 404, "an attached token is consumed")

        func payByCustomer(_ key: String = "cust-" + UUID().uuidString) throws -> (Int, [String: Any], String) {
            let (status, body) = try s.curl(
                s.sidecarSocket, "POST", "/v1/payments", #"{"customer":"\#(customer)","amount":4200,"currency":"USD","idempotency_key":"\#(key)"}"#)
            return (status, json(body), body)
        }
        // The default instrument pays, without a CVC, as often as needed.
        for _ in 0..<2 {
            let (status, payment, body) = try payByCustomer()
            #expect(status == 201 && payment["status"] as? String == "succeeded", "\(body)")
            #expect(payment["instrument"] as? String == visa && payment["customer"] as? String == customer)
        }
        // A second instrument made the default; then the first again.
        let declineToken = try s.tokenize("4000000000000002")
        let (_, secondBody) = try s.curl(s.sidecarSocket, "POST", "/v1/customers/\(customer)/instruments", #"{"token":"\#(declineToken)","default":true}"#)
        let second = try #require(json(secondBody)["id"] as? String)
        #expect(try payByCustomer().1["decline_code"] as? String == "generic_decline")
        let (setDefault, setBody) = try s.curl(s.sidecarSocket, "POST", "/v1/customers/\(customer)/default_instrument", #"{"instrument":"\#(visa)"}"#)
        #expect(setDefault == 200 && json(setBody)["default_instrument"] as? String == visa, "\(setBody)")
        #expect(try payByCustomer().1["status"] as? String == "succeeded")
        let (_, listed) = try s.curl(s.sidecarSocket, "GET", "/v1/customers/\(customer)")
        #expect((json(listed)["instruments"] as? [[String: Any]])?.map { $0["id"] as? String } == [visa, second])
        #expect(!containsPAN(listed))

        // Detaching the default leaves no default: paying by customer is refused, with its code.
        #expect(try s.curl(s.sidecarSocket, "DELETE", "/v1/customers/\(customer)/instruments/\(visa)").0 == 204)
        let (none, _, noneBody) = try payByCustomer()
        #expect(none == 422 && noneBody.contains("CUSTOMER_HAS_NO_INSTRUMENT"), "\(noneBody)")
        #expect(try s.curl(s.sidecarSocket, "DELETE", "/v1/customers/\(customer)/instruments/\(visa)").0 == 404)
        #expect(try s.curl(s.sidecarSocket, "GET", "/v1/customers/cus_nothing").0 == 404)
        let (both, bothBody) = try s.curl(
            s.sidecarSocket, "POST", "/v1/payments", #"{"customer":"\#(customer)","token":"tok_x","amount":1,"currency":"USD","idempotency_key":"k"}"#)
        #expect(both == 422 && bothBody.contains("REQUEST_AMBIGUOUS"))
        #expect(try s.charges() == 4)
    }

    /// Checkout sessions: made by a pay/admin caller; paid once, with one card of an accepted
    /// brand, before expiry; a declined card leaves the session open.
    @Test func checkoutSessions() throws {
        let s = try Stack()
        chmod(s.dir, 0o755)
        try s.startGateway()
        try s.startSidecar(extra: getuid() == 0 ? ["--socket-mode", "666", "--allow", "uid:0=admin", "--allow", "uid:65534=tokenize"] : [])
        func json(_ text: String) -> [String: Any] { (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:] }
        func session(_ body: String) throws -> String {
            let (status, text) = try s.curl(s.sidecarSocket, "POST", "/v1/sessions", body)
            #expect(status == 201, "\(text)")
            return json(text)["id"] as? String ?? ""
        }
        func pay(_ id: String, _ pan: String, key: String = "sess-" + UUID().uuidString) throws -> (Int, [String: Any], String) {
            let (status, text) = try s.curl(s.sidecarSocket, "POST", "/v1/sessions/\(id)/pay",
                #"{"card":{"number":"\#(pan)","exp_month":12,"exp_year":2030,"cvc":"123"},"idempotency_key":"\#(key)"}"#)
            return (status, json(text), text)
        }
        let id = try session(#"{"amount":2599,"currency":"GBP","accepted_brands":["mastercard","visa"]}"#)
        #expect(id.hasPrefix("sess_"))
        // A declined card leaves the session open; an accepted card pays its amount, once.
        let (d, declined, _) = try pay(id, "4000000000000002")
        #expect(d == 201 && declined["status"] as? String == "declined")
        let key = "sess-" + UUID().uuidString
        let (p, paid, paidBody) = try pay(id, "5555555555554444", key: key)
        #expect(p == 201 && paid["status"] as? String == "succeeded" && paid["amount"] as? Int == 2599 && paid["currency"] as? String == "GBP", "\(paidBody)")
        let (replay, again, _) = try pay(id, "5555555555554444", key: key)
        #expect(replay == 200 && again["id"] as? String == paid["id"] as? String)
        let (used, _, usedBody) = try pay(id, "4242424242424242")
        #expect(used == 409 && usedBody.contains("SESSION_USED"), "\(usedBody)")
        #expect(json(try s.curl(s.sidecarSocket, "GET", "/v1/sessions/\(id)").1)["status"] as? String == "completed")
        // Out of scope: a brand the session does not accept; nothing is kept.
        let amexOnly = try session(#"{"amount":100,"currency":"USD","accepted_brands":["amex"]}"#)
        let (brand, _, brandBody) = try pay(amexOnly, "4242424242424242")
        #expect(brand == 422 && brandBody.contains("SESSION_BRAND_NOT_ACCEPTED"), "\(brandBody)")
        // Expired; unknown.
        let short = try session(#"{"amount":100,"currency":"USD","ttl_seconds":1}"#)
        usleep(1_300_000)
        let (expired, _, expiredBody) = try pay(short, "4242424242424242")
        #expect(expired == 410 && expiredBody.contains("SESSION_EXPIRED"), "\(expiredBody)")
        #expect(try pay("sess_nothing", "4242424242424242").0 == 404)
        #expect(try s.charges() == 2)

        // A tokenize-only caller may pay a session it is given, and nothing else.
        if getuid() == 0 {
            let open = try session(#"{"amount":700,"currency":"EUR"}"#)
            func asNobody(_ method: String, _ path: String, _ body: String? = nil) throws -> (Int, String) {
                var args = ["-u", "nobody", "--", "curl", "-s", "-o", "-", "-w", "\n%{http_code}", "--unix-socket", s.sidecarSocket, "-X", method]
                if let body { args += ["-H", "Content-Type: application/json", "--data-binary", body] }
                let r = try run("/usr/sbin/runuser", args + ["http://vault" + path])
                let lines = r.out.split(separator: "\n", omittingEmptySubsequences: false)
                return (Int(lines.last ?? "") ?? 0, lines.dropLast().joined(separator: "\n"))
            }
            #expect(try asNobody("POST", "/v1/sessions", #"{"amount":1,"currency":"EUR"}"#).0 == 403)
            #expect(try asNobody("POST", "/v1/payments", #"{"token":"tok_a","amount":1,"currency":"EUR","idempotency_key":"k"}"#).0 == 403)
            #expect(try asNobody("GET", "/v1/sessions/\(open)").0 == 200)
            let (ok, okBody) = try asNobody("POST", "/v1/sessions/\(open)/pay",
                #"{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2030},"idempotency_key":"nobody-1"}"#)
            #expect(ok == 201 && okBody.contains(#""status":"succeeded""#), "\(okBody)")
        }
    }

    /// Runs curl as `nobody` against the sidecar (the second peer of the peer-scoping tests).
    static func asNobody(_ s: Stack, _ method: String, _ path: String, _ body: String? = nil) throws -> (Int, String) {
        var args = ["-u", "nobody", "--", "curl", "-s", "-o", "-", "-w", "\n%{http_code}", "--unix-socket", s.sidecarSocket, "-X", method]
        if let body { args += ["-H", "Content-Type: application/json", "--data-binary", body] }
        let r = try run("/usr/sbin/runuser", args + ["http://vault" + path])
        keepArtifact("responses.log", r.out)
        let lines = r.out.split(separator: "\n", omittingEmptySubsequences: false)
        return (Int(lines.last ?? "") ?? 0, lines.dropLast().joined(separator: "\n"))
    }

    static func json(_ text: String) -> [String: Any] { (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:] }

    /// Issue item 3: idempotency keys are per peer uid. Two peers both using `order-1` make two
    /// payments; the second learns nothing of the first (before: 409 IDEMPOTENCY_KEY_REUSED,
    /// telling it the key was taken). A payment from before scopes (global scope) is replayed
    /// only for exactly its own request.
    @Test(.enabled(if: getuid() == 0, "needs root to act as a second uid"))
    func idempotencyKeysArePerPeer() throws {
        let s = try Stack()
        chmod(s.dir, 0o755)
        try s.startGateway()
        try s.startSidecar(extra: ["--socket-mode", "666", "--allow", "uid:0=admin", "--allow", "uid:65534=tokenize,pay"])
        let mine = try s.tokenize("4242424242424242")
        let (first, a, aBody) = try s.pay(mine, key: "order-1")
        #expect(first == 201 && a["status"] as? String == "succeeded", "\(aBody)")
        let aID = try #require(a["id"] as? String)

        let (tokenized, tokenBody) = try Self.asNobody(s, "POST", "/v1/tokens", #"{"card":{"number":"5555555555554444","exp_month":12,"exp_year":2030}}"#)
        #expect(tokenized == 201, "\(tokenBody)")
        let theirs = try #require(Self.json(tokenBody)["token"] as? String)
        let request = #"{"token":"\#(theirs)","amount":1999,"currency":"EUR","idempotency_key":"order-1"}"#
        let (second, bBody) = try Self.asNobody(s, "POST", "/v1/payments", request)
        let b = Self.json(bBody)
        #expect(second == 201 && b["status"] as? String == "succeeded", "the second peer's order-1 is its own payment: \(bBody)")
        #expect(b["id"] as? String != aID && !bBody.contains(aID) && !bBody.contains(mine), "\(bBody)")
        // Each peer's replay returns its own payment.
        let (replayB, replayBody) = try Self.asNobody(s, "POST", "/v1/payments", request)
        #expect(replayB == 200 && Self.json(replayBody)["id"] as? String == b["id"] as? String, "\(replayBody)")
        let (replayA, again, _) = try s.pay(mine, key: "order-1")
        #expect(replayA == 200 && again["id"] as? String == aID)
        #expect(try s.charges() == 2)

        // A payment made before the upgrade (global scope): its own request replays it; another
        // peer's other request under the same key is a payment of its own, not a 409.
        let legacyToken = try s.tokenize("4242424242424242")
        let insert = """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1])
            db.execute("INSERT INTO vault_payments (id, scope, idempotency_key, request, token, single_use, amount, currency, status, reference, created_at, updated_at) VALUES ('pay_legacyaaaaaaaaaaaaaaaaaaaa', 'global', 'legacy-1', ?, ?, 1, 1999, 'EUR', 'succeeded', 'sbx_legacy', 1700000000000, 1700000000000)", ("token=%s&amount=1999&currency=EUR" % sys.argv[2], sys.argv[2]))
            db.commit()
            """
        let inserted = try run("/usr/bin/env", ["python3", "-c", insert, s.dir + "/tokens.sqlite", legacyToken])
        #expect(inserted.status == 0, "\(inserted.stderr)")
        let (legacy, legacyJSON, legacyBody) = try s.pay(legacyToken, key: "legacy-1")
        #expect(legacy == 200 && legacyJSON["id"] as? String == "pay_legacyaaaaaaaaaaaaaaaaaaaa", "\(legacyBody)")
        let other = try #require(Self.json(try Self.asNobody(s, "POST", "/v1/tokens", #"{"card":{"number":"5555555555554444","exp_month":12,"exp_year":2030}}"#).1)["token"] as? String)
        let (fresh, freshBody) = try Self.asNobody(s, "POST", "/v1/payments", #"{"token":"\#(other)","amount":1999,"currency":"EUR","idempotency_key":"legacy-1"}"#)
        #expect(fresh == 201 && !freshBody.contains("pay_legacy"), "\(freshBody)")
    }

    /// Issue item 3, the session scenario: another party's payment under `order-1` no longer
    /// leaks into a session paid with that key, nor blocks it. Before: 409
    /// IDEMPOTENCY_KEY_REUSED, the session left `paying` with the other party's payment id, and
    /// every later attempt SESSION_USED. A key reused inside the session after a decline is
    /// refused but leaves the session usable.
    @Test(.enabled(if: getuid() == 0, "needs root to act as a second uid"))
    func anotherPartysKeyNeitherLeaksIntoNorBlocksASession() throws {
        let s = try Stack()
        chmod(s.dir, 0o755)
        try s.startGateway()
        try s.startSidecar(extra: ["--socket-mode", "666", "--allow", "uid:0=admin", "--allow", "uid:65534=tokenize"])
        let (_, merchant, merchantBody) = try s.pay(try s.tokenize("4242424242424242"), key: "order-1")
        let merchantID = try #require(merchant["id"] as? String, "\(merchantBody)")
        let session = try #require(Self.json(try s.curl(s.sidecarSocket, "POST", "/v1/sessions", #"{"amount":700,"currency":"EUR"}"#).1)["id"] as? String)
        func pay(_ pan: String, key: String) throws -> (Int, String) {
            try Self.asNobody(s, "POST", "/v1/sessions/\(session)/pay",
                #"{"card":{"number":"\#(pan)","exp_month":12,"exp_year":2030},"idempotency_key":"\#(key)"}"#)
        }
        // Declined under order-1 first, then the same key again with another card: refused as a
        // reuse inside this session, without naming or touching the merchant's payment.
        let (declined, declinedBody) = try pay("4000000000000002", key: "order-1")
        #expect(declined == 201 && declinedBody.contains(#""status":"declined""#) && !declinedBody.contains(merchantID), "\(declinedBody)")
        let (reused, reusedBody) = try pay("5555555555554444", key: "order-1")
        #expect(reused == 409 && reusedBody.contains("IDEMPOTENCY_KEY_REUSED") && !reusedBody.contains(merchantID), "\(reusedBody)")
        let (_, afterReuse) = try Self.asNobody(s, "GET", "/v1/sessions/\(session)")
        #expect(afterReuse.contains(#""status":"open""#) && !afterReuse.contains(merchantID), "\(afterReuse)")
        // The session is still payable.
        let (paid, paidBody) = try pay("5555555555554444", key: "order-2")
        #expect(paid == 201 && paidBody.contains(#""status":"succeeded""#) && !paidBody.contains(merchantID), "\(paidBody)")
        let (_, done) = try Self.asNobody(s, "GET", "/v1/sessions/\(session)")
        #expect(done.contains(#""status":"completed""#) && done.contains(Self.json(paidBody)["id"] as? String ?? "?"), "\(done)")

        // Another session paid with the merchant's key at the first try: its own payment.
        let other = try #require(Self.json(try s.curl(s.sidecarSocket, "POST", "/v1/sessions", #"{"amount":300,"currency":"EUR"}"#).1)["id"] as? String)
        let (ok, okBody) = try Self.asNobody(s, "POST", "/v1/sessions/\(other)/pay",
            #"{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2030},"idempotency_key":"order-1"}"#)
        #expect(ok == 201 && okBody.contains(#""status":"succeeded""#) && !okBody.contains(merchantID), "\(okBody)")
    }

    /// Issue item 4: a session allows 3 failed attempts (`--session-max-attempts`, default 3),
    /// then it is closed: the 4th attempt is 409 SESSION_ATTEMPTS_EXCEEDED and tokenizes nothing.
    /// Before: every decline reopened the session, without limit.
    @Test func aSessionIsClosedAfterItsFailedAttempts() throws {
        let s = try Stack()
        try s.startGateway()
        try s.startSidecar()
        let session = try #require(Self.json(try s.curl(s.sidecarSocket, "POST", "/v1/sessions", #"{"amount":700,"currency":"EUR"}"#).1)["id"] as? String)
        func pay(_ pan: String) throws -> (Int, String) {
            try s.curl(s.sidecarSocket, "POST", "/v1/sessions/\(session)/pay",
                #"{"card":{"number":"\#(pan)","exp_month":12,"exp_year":2030,"cvc":"123"},"idempotency_key":"\#(Self.key())"}"#)
        }
        for (n, pan) in ["4000000000009995", "4000000000000127", "4000000000000002"].enumerated() {
            let (status, body) = try pay(pan)
            #expect(status == 201 && body.contains(#""status":"declined""#), "attempt \(n + 1): \(body)")
            #expect(Self.json(try s.curl(s.sidecarSocket, "GET", "/v1/sessions/\(session)").1)["attempts"] as? Int == n + 1)
        }
        let (fourth, fourthBody) = try pay("4242424242424242")
        #expect(fourth == 409 && Self.json(fourthBody)["error"].flatMap { ($0 as? [String: Any])?["code"] as? String } == "SESSION_ATTEMPTS_EXCEEDED", "\(fourthBody)")
        let closed = Self.json(try s.curl(s.sidecarSocket, "GET", "/v1/sessions/\(session)").1)
        #expect(closed["status"] as? String == "closed" && closed["payment"] is NSNull, "\(closed)")
        #expect(try pay("4242424242424242").0 == 409)
        // A successful card within the cap still pays.
        let other = try #require(Self.json(try s.curl(s.sidecarSocket, "POST", "/v1/sessions", #"{"amount":700,"currency":"EUR"}"#).1)["id"] as? String)
        let (_, declinedOnce) = try s.curl(s.sidecarSocket, "POST", "/v1/sessions/\(other)/pay",
            #"{"card":{"number":"4000000000000002","exp_month":12,"exp_year":2030},"idempotency_key":"\#(Self.key())"}"#)
        #expect(declinedOnce.contains("declined"))
        let (paid, paidBody) = try s.curl(s.sidecarSocket, "POST", "/v1/sessions/\(other)/pay",
            #"{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2030},"idempotency_key":"\#(Self.key())"}"#)
        #expect(paid == 201 && paidBody.contains("succeeded"), "\(paidBody)")

        // The setting: a sidecar started with --session-max-attempts 1 closes at the first decline.
        s.stop(s.sidecar)
        try s.startSidecar(extra: ["--session-max-attempts", "1"])
        let strict = try #require(Self.json(try s.curl(s.sidecarSocket, "POST", "/v1/sessions", #"{"amount":700,"currency":"EUR"}"#).1)["id"] as? String)
        let (_, once) = try s.curl(s.sidecarSocket, "POST", "/v1/sessions/\(strict)/pay",
            #"{"card":{"number":"4000000000000002","exp_month":12,"exp_year":2030},"idempotency_key":"\#(Self.key())"}"#)
        #expect(once.contains("declined"), "\(once)")
        let (refused, refusedBody) = try s.curl(s.sidecarSocket, "POST", "/v1/sessions/\(strict)/pay",
            #"{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2030},"idempotency_key":"\#(Self.key())"}"#)
        #expect(refused == 409 && refusedBody.contains("SESSION_ATTEMPTS_EXCEEDED"), "\(refusedBody)")
    }

    /// Issue item 4: a tokenize-role caller sees `card_declined`, never the precise reason; the
    /// pay role (and GET /v1/payments) keeps it. Before: the tokenize caller saw
    /// `insufficient_funds` against `incorrect_cvc`.
    @Test(.enabled(if: getuid() == 0, "needs root to act as a second uid"))
    func aTokenizeCallerSeesAGenericDeclineCode() throws {
        let s = try Stack()
        chmod(s.dir, 0o755)
        try s.startGateway()
        try s.startSidecar(extra: ["--socket-mode", "666", "--allow", "uid:0=admin", "--allow", "uid:65534=tokenize"])
        func session() throws -> String {
            try #require(Self.json(try s.curl(s.sidecarSocket, "POST", "/v1/sessions", #"{"amount":700,"currency":"EUR"}"#).1)["id"] as? String)
        }
        var seen: [String] = []
        for pan in ["4000000000009995", "4000000000000127"] {
            let (status, body) = try Self.asNobody(s, "POST", "/v1/sessions/\(try session())/pay",
                #"{"card":{"number":"\#(pan)","exp_month":12,"exp_year":2030,"cvc":"123"},"idempotency_key":"\#(Self.key())"}"#)
            let p = Self.json(body)
            #expect(status == 201 && p["status"] as? String == "declined" && p["decline_code"] as? String == "card_declined", "\(body)")
            #expect(!body.contains("insufficient_funds") && !body.contains("incorrect_cvc"), "\(body)")
            seen.append(p["id"] as? String ?? "")
        }
        // The pay role reads the precise reason.
        #expect(Self.json(try s.curl(s.sidecarSocket, "GET", "/v1/payments/\(seen[0])").1)["decline_code"] as? String == "insufficient_funds")
        #expect(Self.json(try s.curl(s.sidecarSocket, "GET", "/v1/payments/\(seen[1])").1)["decline_code"] as? String == "incorrect_cvc")
        let (own, ownBody) = try s.curl(s.sidecarSocket, "POST", "/v1/sessions/\(try session())/pay",
            #"{"card":{"number":"4000000000000127","exp_month":12,"exp_year":2030,"cvc":"123"},"idempotency_key":"\#(Self.key())"}"#)
        #expect(own == 201 && Self.json(ownBody)["decline_code"] as? String == "incorrect_cvc", "\(ownBody)")
    }

    /// Issue item 6, end to end: card numbers in free-text fields are refused with
    /// REQUEST_FIELD_CARD_NUMBER, and neither the answers, the sidecar's log (at debug, every
    /// request logged) nor the store holds their digits.
    @Test func cardNumbersInFreeTextFieldsNeverReachTheLogOrTheStore() throws {
        let s = try Stack()
        try s.startGateway()
        try s.startSidecar(extra: ["--log-level", "trace", "--log-requests"])
        var answers = ""
        let token = try s.tokenize("4242424242424242")
        for pan in ["4000056655665556", "4000-0566-5566-5556", "4000 0566 5566 5556", "ref4000056655665556x"] {
            let (c, cBody) = try s.curl(s.sidecarSocket, "POST", "/v1/customers", #"{"reference":"\#(pan)"}"#)
            #expect(c == 422 && cBody.contains("REQUEST_FIELD_CARD_NUMBER") && cBody.contains(#""field":"reference""#), "\(cBody)")
            let (p, _, pBody) = try s.pay(token, key: pan)
            #expect(p == 422 && pBody.contains("REQUEST_FIELD_CARD_NUMBER") && pBody.contains(#""field":"idempotency_key""#), "\(pBody)")
            answers += cBody + pBody
        }
        s.stop(s.sidecar)
        var stored = ""
        for file in ["tokens.sqlite", "tokens.sqlite-wal"] {
            if let data = FileManager.default.contents(atPath: s.dir + "/" + file) { stored += String(decoding: data, as: UTF8.self) }
        }
        for text in [answers, s.sidecarLogText, stored] {
            #expect(!text.contains("4000056655665556") && !text.contains("0566-5566") && !text.contains("0566 5566"))
        }
        #expect(s.sidecarLogText.contains("REQUEST_FIELD_CARD_NUMBER") || s.sidecarLogText.contains("422"), "the requests were logged")
    }

    /// Recurring mandates on a stored instrument: each cycle charged once (idempotent), and every
    /// charge outside the mandate refused with its code.
    @Test func recurringMandates() throws {
        let s = try Stack()
        try s.startGateway()
        try s.startSidecar()
        func json(_ text: String) -> [String: Any] { (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:] }
        let customer = json(try s.curl(s.sidecarSocket, "POST", "/v1/customers", #"{"reference":"subscriber-9"}"#).1)["id"] as? String ?? ""
        let token = try s.tokenize("4242424242424242")
        let instrument = json(try s.curl(s.sidecarSocket, "POST", "/v1/customers/\(customer)/instruments", #"{"token":"\#(token)"}"#).1)["id"] as? String ?? ""
        let expires = ISO8601DateFormatter().string(from: Date().addingTimeInterval(30 * 86400))
        let (made, mandateBody) = try s.curl(s.sidecarSocket, "POST", "/v1/customers/\(customer)/mandates",
            #"{"amount":999,"max_amount":1500,"currency":"EUR","interval":"day","max_cycles":3,"expires_at":"\#(expires)"}"#)
        #expect(made == 201, "\(mandateBody)")
        let mandate = try #require(json(mandateBody)["id"] as? String)
        #expect(json(mandateBody)["instrument"] as? String == instrument)
        func charge(_ body: String) throws -> (Int, [String: Any], String) {
            let (status, text) = try s.curl(s.sidecarSocket, "POST", "/v1/mandates/\(mandate)/charges", body)
            return (status, json(text), text)
        }
        let (first, payment, firstBody) = try charge(#"{"cycle":1}"#)
        #expect(first == 201 && payment["status"] as? String == "succeeded" && payment["amount"] as? Int == 999, "\(firstBody)")
        #expect(payment["mandate"] as? String == mandate && payment["instrument"] as? String == instrument)
        let (again, replay, _) = try charge(#"{"cycle":1}"#)
        #expect(again == 200 && replay["id"] as? String == payment["id"] as? String, "a cycle is charged once")
        #expect(try charge(#"{"cycle":1,"amount":1000}"#).2.contains("IDEMPOTENCY_KEY_REUSED"))
        #expect(try charge(#"{"cycle":1,"amount":2000}"#).2.contains("MANDATE_AMOUNT_EXCEEDED"))
        #expect(try charge(#"{"cycle":2}"#).2.contains("MANDATE_CYCLE_NOT_DUE"))
        #expect(try charge(#"{"cycle":4}"#).2.contains("MANDATE_CYCLE_INVALID"))
        #expect(try s.curl(s.sidecarSocket, "DELETE", "/v1/mandates/\(mandate)").0 == 204)
        let (cancelled, _, cancelledBody) = try charge(#"{"cycle":2}"#)
        #expect(cancelled == 409 && cancelledBody.contains("MANDATE_CANCELLED"), "\(cancelledBody)")
        #expect(try s.curl(s.sidecarSocket, "GET", "/v1/mandates/mdt_nothing").0 == 404)
        let past = ISO8601DateFormatter().string(from: Date().addingTimeInterval(-60))
        let (bad, badBody) = try s.curl(s.sidecarSocket, "POST", "/v1/customers/\(customer)/mandates",
            #"{"amount":999,"max_amount":500,"currency":"EUR","interval":"month","max_cycles":3,"expires_at":"\#(past)"}"#)
        #expect(bad == 422 && badBody.contains("MANDATE_AMOUNT_EXCEEDED"), "\(badBody)")
        // A caller cannot take a cycle's idempotency key first.
        let other = try s.tokenize("4242424242424242")
        let (reserved, _, reservedBody) = try s.pay(other, key: "mandate:\(mandate):cycle:2")
        #expect(reserved == 422 && reservedBody.contains("REQUEST_FIELD_INVALID"), "\(reservedBody)")
        #expect(try s.charges() == 1)
    }
}

/// A value shared between threads.
final class Locked<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var _value: T
    init(_ value: T) { _value = value }
    var value: T { lock.withLock { _value } }
    func update(_ body: (inout T) -> Void) { lock.withLock { body(&_value) } }
}
