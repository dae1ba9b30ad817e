import Foundation
import Testing

/// The real `vault gateway` binary on a temporary socket: the sandbox charges sealed cards,
/// core dumps are off, foreign uids are refused, and neither answers nor logs carry card data.
@Suite(.serialized, .ownThread) struct GatewayCLITests {
    struct Gateway {
        let dir: String
        var socket: String { dir + "/gateway.sock" }
        var keys: String { dir + "/keys" }
        let kid: String
        var process: Process?
        var output = Pipe()

        init() throws {
            dir = NSTemporaryDirectory() + "vault-gateway-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: dir + "/keys", withIntermediateDirectories: true)
            chmod(dir, 0o755)
            kid = try vault("keygen", "--out", dir + "/keys").out.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        /// A second gateway with the same keys as `other` (another process, socket and directory).
        init(sharingKeysWith other: Gateway) throws {
            dir = NSTemporaryDirectory() + "vault-gateway-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            chmod(dir, 0o755)
            try FileManager.default.copyItem(atPath: other.keys, toPath: dir + "/keys")
            kid = other.kid
        }

        /// Starts it; `store` nil: the sandbox ledger in `ledger.sqlite` through the
        /// `--processor sandbox:PATH` alias.
        mutating func start(extra: [String] = [], store: String? = nil) throws {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: vaultBinary)
            let ledger = store.map { ["--store", $0] } ?? ["--processor", "sandbox:\(dir)/ledger.sqlite"]
            p.arguments = ["gateway", "--socket", socket, "--keys", keys] + ledger + extra
            output = Pipe()
            p.standardError = output
            p.standardOutput = output
            try p.run()
            process = p
            for _ in 0..<200 where p.isRunning {
                if FileManager.default.fileExists(atPath: socket), (try? curl("GET", "/v1/health").0) == 200 { break }
                usleep(50_000)
            }
        }

        func envelope(_ pan: String) throws -> String {
            let r = try vault("seal", "--card", "--no-fingerprint", "--key", "\(keys)/\(kid).pub",
                              input: #"{"number":"\#(pan)","exp_month":12,"exp_year":2030,"cvc":"123"}"#)
            #expect(r.status == 0, "\(r.stderr)")
            return r.out.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        func curl(_ method: String, _ path: String, _ body: String? = nil, asUser user: String? = nil) throws -> (Int, String) {
            var args = ["-s", "-o", "-", "-w", "\n%{http_code}", "--unix-socket", socket, "-X", method]
            if let body { args += ["-H", "Content-Type: application/json", "--data-binary", body] }
            let prefix = user.map { ["runuser", "-u", $0, "--"] } ?? []
            let r = try run("/usr/bin/env", prefix + ["curl"] + args + ["http://gateway" + path])
            keepArtifact("responses.log", r.out + "\n" + r.stderr)
            let lines = r.out.split(separator: "\n", omittingEmptySubsequences: false)
            return (Int(lines.last ?? "") ?? 0, lines.dropLast().joined(separator: "\n"))
        }

        func logs() -> String {
            let text = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
            keepArtifact("server-logs.log", text)
            return text
        }
        func remove() { removeScratch(dir) }
    }

    @Test func chargesSealedCardsWithTheSandbox() throws {
        var g = try Gateway()
        defer { g.process?.terminate(); g.remove() }
        try g.start()
        #expect(g.process?.isRunning == true)
        let pid = g.process!.processIdentifier
        let limits = (try? String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)) ?? ""
        let core = limits.split(separator: "\n").first { $0.hasPrefix("Max core file size") } ?? ""
        #expect(core.split(separator: " ").filter { !$0.isEmpty }.dropFirst(4).prefix(2) == ["0", "0"], "\(core)")

        for (pan, status) in [("4242424242424242", "succeeded"), ("4000000000000002", "declined"), ("4000000000003220", "requires_action")] {
            let payment = "pay_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
            let body = #"{"payment_id":"\#(payment)","amount":2500,"currency":"USD","envelope":\#(try g.envelope(pan))}"#
            let (code, answer) = try g.curl("POST", "/v1/authorize", body)
            #expect(code == 200, "\(answer)")
            #expect(answer.contains(#""status":"\#(status)""#), "\(answer)")
            #expect(!containsPAN(answer))
            // The same payment again: the same answer, no second charge.
            let (_, again) = try g.curl("POST", "/v1/authorize", body)
            #expect(again == answer)
        }
        g.process!.terminate()
        g.process!.waitUntilExit()
        #expect(g.process!.terminationStatus == 0)
        let logs = g.logs()
        #expect(logs.contains("vault gateway listening"))
        // The real binary runs the gateway's handlers on NIO's event loops, as the sidecar's
        // (VaultCommand.prepareExecutor).
        let start = try #require(logs.split(separator: "\n").first { $0.contains("vault gateway listening") })
        #expect(start.contains("tasks_on_event_loops=true"), "\(start)")
        #expect(!containsPAN(logs), "a PAN reached the gateway's log")
        let ledger = FileManager.default.contents(atPath: g.dir + "/ledger.sqlite") ?? Data()
        #expect(!containsPAN(String(decoding: ledger, as: UTF8.self)))
    }

    @Test(.enabled(if: getuid() == 0, "needs root to run curl as another uid"))
    func onlyAllowedUidsMayCall() throws {
        var g = try Gateway()
        defer { g.process?.terminate(); g.remove() }
        try g.start(extra: ["--socket-mode", "666"])
        let (refused, body) = try g.curl("GET", "/v1/health", asUser: "nobody")
        #expect(refused == 403 && body.contains("PEER_NOT_ALLOWED"), "\(body)")
        g.process!.terminate()
        g.process!.waitUntilExit()
        try g.start(extra: ["--socket-mode", "666", "--allow-uid", "65534"])
        #expect(try g.curl("GET", "/v1/health", asUser: "nobody").0 == 200)
        #expect(try g.curl("GET", "/metrics").0 == 403)   // root is not on the list now
        #expect(try g.curl("GET", "/v1/health").0 == 200)   // but the health routes answer probes (own uid, root)
    }

    /// systemd credentials: without --keys the gateway reads $CREDENTIALS_DIRECTORY.
    @Test func loadsKeysFromTheCredentialsDirectory() throws {
        var g = try Gateway()
        defer { g.process?.terminate(); g.remove() }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: vaultBinary)
        p.arguments = ["gateway", "--socket", g.socket, "--processor", "sandbox:\(g.dir)/ledger.sqlite"]
        p.environment = ProcessInfo.processInfo.environment.merging(["CREDENTIALS_DIRECTORY": g.keys]) { $1 }
        p.standardError = g.output
        p.standardOutput = g.output
        try p.run()
        g.process = p
        for _ in 0..<200 where p.isRunning {
            if (try? g.curl("GET", "/v1/health").0) == 200 { break }
            usleep(50_000)
        }
        let body = #"{"payment_id":"pay_creds1","amount":100,"currency":"EUR","envelope":\#(try g.envelope("4242424242424242"))}"#
        let (status, answer) = try g.curl("POST", "/v1/authorize", body)
        #expect(status == 200 && answer.contains(#""status":"succeeded""#), "\(answer)")
    }

    @Test func refusesToStartWithoutSecretKeys() throws {
        let g = try Gateway()
        defer { g.remove() }
        let empty = g.dir + "/empty"
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        let r = try run(vaultBinary, ["gateway", "--socket", g.socket, "--keys", empty])
        #expect(r.status != 0 && r.stderr.contains("KEY_FILE_NOT_FOUND"), "\(r.stderr)")
        let noKeys = try run(vaultBinary, ["gateway", "--socket", g.socket], environment: ["PATH": "/usr/bin:/bin"])
        #expect(noKeys.status != 0 && noKeys.stderr.contains("CREDENTIALS_DIRECTORY"), "\(noKeys.stderr)")
    }

    // MARK: - The ledger's store (issue 13, item 2)

    static let postgresSocket = ProcessInfo.processInfo.environment["VAULT_TEST_POSTGRES_SOCKET"]

    /// A fresh PostgreSQL database on the test server; its store URL.
    static func postgresStore() throws -> String {
        let socket = try #require(postgresSocket)
        let dir = (socket as NSString).deletingLastPathComponent, port = String(socket.split(separator: ".").last ?? "5432")
        let name = "vault_gw_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let asPG = getuid() == 0 ? ["runuser", "-u", "postgres", "--"] : []
        let r = try run("/usr/bin/env", asPG + ["psql", "-h", dir, "-p", port, "-U", "postgres", "-d", "postgres", "-At", "-c", "CREATE DATABASE \(name)"])
        #expect(r.status == 0, "\(r.stderr)")
        return "postgres://postgres@localhost:\(port)/\(name)?host=\(dir)"
    }

    /// Two gateways (two processes) on one PostgreSQL store share the processor ledger: a payment
    /// id charged through one is the same charge through the other, and the same id with another
    /// amount is refused by either.
    @Test(.enabled(if: postgresSocket != nil, "needs VAULT_TEST_POSTGRES_SOCKET (scripts/test)"))
    func twoGatewaysShareTheLedgerInPostgreSQL() throws {
        let store = try Self.postgresStore()
        var a = try Gateway()
        var b = try Gateway(sharingKeysWith: a)
        defer { a.process?.terminate(); b.process?.terminate(); a.remove(); b.remove() }
        try a.start(extra: ["--settle-interval", "0.2"], store: store)
        try b.start(extra: ["--settle-interval", "0.2"], store: store)
        #expect(a.process?.isRunning == true && b.process?.isRunning == true)
        let payment = "pay_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let envelope = try a.envelope("4242424242424242")
        let body = #"{"payment_id":"\#(payment)","amount":2500,"currency":"USD","envelope":\#(envelope)}"#
        let (one, first) = try a.curl("POST", "/v1/authorize", body)
        #expect(one == 200 && first.contains(#""status":"succeeded""#), "\(first)")
        let (two, second) = try b.curl("POST", "/v1/authorize", body)
        #expect(two == 200 && second == first, "\(second) vs \(first)")
        let (read, recorded) = try b.curl("GET", "/v1/authorizations/\(payment)")
        #expect(read == 200 && recorded == first, "\(recorded)")
        let other = #"{"payment_id":"\#(payment)","amount":2600,"currency":"USD","envelope":\#(envelope)}"#
        let (reused, refusal) = try b.curl("POST", "/v1/authorize", other)
        #expect(reused == 409 && refusal.contains("PAYMENT_ID_REUSED"), "\(refusal)")
        let (missing, notFound) = try a.curl("GET", "/v1/authorizations/pay_neversent")
        #expect(missing == 404 && notFound.contains("AUTHORIZATION_NOT_FOUND"), "\(notFound)")
        usleep(400_000)   // a round of the settler: the ledger gauges
        let (_, metrics) = try a.curl("GET", "/metrics")
        #expect(metrics.contains("vault_gateway_ledger_unsettled 0"), "\(metrics)")
        for g in [a, b] {
            g.process!.terminate()
            g.process!.waitUntilExit()
            #expect(g.process!.terminationStatus == 0)
            let logs = g.logs()
            #expect(logs.contains("store=postgres") && !containsPAN(logs), "\(logs)")
        }
    }

    /// `--store`, its aliases (`--ledger PATH`, `--processor sandbox:PATH`), the environment and
    /// the file: the highest source wins; two at the same level that disagree are refused.
    @Test func theLedgerStoreSettingAndItsAliases() throws {
        var g = try Gateway()
        defer { g.process?.terminate(); g.remove() }
        try g.start(store: "sqlite:\(g.dir)/store.sqlite")
        let body = #"{"payment_id":"pay_store1","amount":100,"currency":"EUR","envelope":\#(try g.envelope("4242424242424242"))}"#
        #expect(try g.curl("POST", "/v1/authorize", body).0 == 200)
        g.process!.terminate()
        g.process!.waitUntilExit()
        #expect(FileManager.default.fileExists(atPath: g.dir + "/store.sqlite"))
        let both = try run(vaultBinary, ["gateway", "--socket", g.socket, "--keys", g.keys, "--store", "sqlite:\(g.dir)/a.sqlite", "--ledger", g.dir + "/b.sqlite"])
        #expect(both.status == 11 && both.stderr.contains("CONFIG_INVALID") && both.stderr.contains("gateway.ledger"), "\(both.stderr)")
        let config = g.dir + "/vault.json"
        try #"{"gateway":{"ledger":"\#(g.dir)/file.sqlite","settle_interval":0.5}}"#.write(toFile: config, atomically: true, encoding: .utf8)
        let check = try run(vaultBinary, ["config", "check", "--config", config, "--section", "gateway"],
                            environment: ProcessInfo.processInfo.environment.merging(["VAULT_GATEWAY_STORE": "sqlite:\(g.dir)/env.sqlite", "CREDENTIALS_DIRECTORY": g.keys]) { $1 })
        #expect(check.out.contains("gateway.store = sqlite:\(g.dir)/env.sqlite  [VAULT_GATEWAY_STORE]"), "\(check.out) \(check.stderr)")
        #expect(check.out.contains("gateway.settle_interval = 0.5"), "\(check.out)")
        let bad = try run(vaultBinary, ["gateway", "--socket", g.socket, "--keys", g.keys, "--store", "mysql://x"])
        #expect(bad.status == 11 && bad.stderr.contains("STORE_LOCATION_INVALID"), "\(bad.stderr)")
    }

    // MARK: - vault payments settle (issue 13, item 3: "an operator command settles it by hand")

    /// Runs SQL on a SQLite store with Python's sqlite3 (rows of a shape no API makes on demand:
    /// a payment given up at its deadline); the rows as tab-separated lines.
    @discardableResult
    static func sql(_ path: String, _ statement: String) throws -> String {
        let script = "import sqlite3,sys\nc=sqlite3.connect(sys.argv[1])\nfor r in c.execute(sys.argv[2]): print('\\t'.join('' if v is None else str(v) for v in r))\nc.commit()"
        let r = try run("/usr/bin/env", ["python3", "-c", script, path, statement])
        #expect(r.status == 0, "\(r.stderr)")
        return r.out.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func anOperatorSettlesAPaymentByHand() throws {
        let g = try Gateway()
        defer { g.remove() }
        let store = g.dir + "/store.sqlite", audit = g.dir + "/audit.jsonl"
        _ = FileManager.default.createFile(atPath: store, contents: nil)
        let none = try vault("payments", "settle", "pay_none", "--store", "sqlite:" + store, "--outcome", "succeeded")
        #expect(none.status == 1 && none.stderr.contains("PAYMENT_NOT_FOUND"), "\(none.stderr)")
        let t = Int(Date().timeIntervalSince1970 * 1000), old = t - 90_000_000
        let ledger = "INSERT INTO vault_ledger (payment_id, processor, amount, currency, envelope_id, state, status, attempts, lease_until, next_try_at, deadline_at, reason, created_at, updated_at) VALUES "
        Self.sqlInsert(store, ledger + """
            ('pay_a', 'relay:test', 1000, 'EUR', 'env_a', 'unknown', NULL, 3, NULL, NULL, \(old + 86_400_000), 'the processor did not answer within 20 s', \(old), \(old)),
            ('pay_b', 'relay:test', 1000, 'EUR', 'env_b', 'unknown', NULL, 1, NULL, \(t), \(t + 86_400_000), 'the processor answered 500', \(t), \(t)),
            ('pay_c', 'relay:test', 1000, 'EUR', 'env_c', 'done', 'succeeded', 1, NULL, NULL, NULL, NULL, \(t), \(t)),
            ('pay_d', 'relay:test', 1000, 'EUR', 'env_d', 'sending', NULL, 1, \(t + 600_000), NULL, \(t + 86_400_000), NULL, \(t), \(t))
            """)
        let payments = "INSERT INTO vault_payments (id, scope, idempotency_key, request, token, single_use, amount, currency, status, created_at, updated_at) VALUES "
        Self.sqlInsert(store, payments + """
            ('pay_a', 'global', 'order-a', '{}', 'tok_a', 1, 1000, 'EUR', 'unknown', \(old), \(old)),
            ('pay_b', 'global', 'order-b', '{}', 'tok_b', 1, 1000, 'EUR', 'processing', \(t), \(t))
            """)
        func settle(_ args: String...) throws -> RunResult {
            try run(vaultBinary, ["payments", "settle"] + args + ["--store", "sqlite:" + store, "--audit-log", audit])
        }
        let a = try settle("pay_a", "--outcome", "succeeded", "--reference", "pi_123")
        #expect(a.status == 0 && a.out.contains("ledger: pay_a settled succeeded") && a.out.contains("payment: pay_a succeeded"), "\(a.out) \(a.stderr)")
        #expect(try Self.sql(store, "SELECT state, status, reference FROM vault_ledger WHERE payment_id = 'pay_a'") == "done\tsucceeded\tpi_123")
        #expect(try Self.sql(store, "SELECT status, reference FROM vault_payments WHERE id = 'pay_a'") == "succeeded\tpi_123")
        let again = try settle("pay_a", "--outcome", "succeeded")
        #expect(again.status == 0 && again.out.contains("already"), "\(again.out) \(again.stderr)")
        let conflict = try settle("pay_a", "--outcome", "declined")
        #expect(conflict.status == 1 && conflict.stderr.contains("SETTLE_CONFLICT"), "\(conflict.stderr)")
        let b = try settle("pay_b", "--outcome", "not-charged")
        #expect(b.status == 0 && b.out.contains("ledger: pay_b removed") && b.out.contains("payment: pay_b removed"), "\(b.out) \(b.stderr)")
        #expect(try Self.sql(store, "SELECT COUNT(*) FROM vault_ledger WHERE payment_id = 'pay_b'") == "0")
        #expect(try Self.sql(store, "SELECT COUNT(*) FROM vault_payments WHERE id = 'pay_b'") == "0")
        let c = try settle("pay_c", "--outcome", "not-charged")
        #expect(c.status == 1 && c.stderr.contains("SETTLE_CONFLICT"), "\(c.stderr)")
        let d = try settle("pay_d", "--outcome", "succeeded")
        #expect(d.status == 1 && d.stderr.contains("SETTLE_IN_FLIGHT"), "\(d.stderr)")
        let pan = try settle("pay_d", "--outcome", "succeeded", "--reference", "4242 4242 4242 4242")
        #expect(pan.status == 6 && pan.stderr.contains("REQUEST_FIELD_CARD_NUMBER") && !containsPAN(pan.stderr), "\(pan.stderr)")
        let code = try settle("pay_d", "--outcome", "succeeded", "--decline-code", "x")
        #expect(code.status == 6 && code.stderr.contains("REQUEST_FIELD_INVALID"), "\(code.stderr)")
        let verified = try vault("audit", "verify", audit)
        #expect(verified.status == 0, "\(verified.out) \(verified.stderr)")
        let lines = (try? String(contentsOfFile: audit, encoding: .utf8)) ?? ""
        #expect(lines.contains(#""action":"payment_settle""#) && lines.contains(#""payment":"pay_a""#) && lines.contains("SETTLE_CONFLICT"), "\(lines)")
    }

    static func sqlInsert(_ path: String, _ statement: String) {
        _ = try? sql(path, statement)
    }
}
