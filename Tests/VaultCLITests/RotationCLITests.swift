import Foundation
import Testing

/// Key rotation end to end with the real binaries (issue 5): the ring pins the kids, `vault keys
/// rotate` promotes only once the gateway opens the new key, both servers reload on SIGHUP under
/// load, `vault rewrap` re-seals every stored envelope (and resumes after a kill), the old key is
/// retired only once nothing uses it, and every token is still payable afterwards.
@Suite(.serialized, .ownThread) struct RotationCLITests {
    typealias Stack = PaymentsCLITests.Stack

    static func sql(_ db: String, _ query: String) throws -> String {
        try run("/usr/bin/env", ["python3", "-c", """
            import sqlite3,sys
            for row in sqlite3.connect(sys.argv[1]).execute(sys.argv[2]): print('|'.join(str(c) for c in row))
            """, db, query]).out.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Stored envelopes per kid (tokens and instruments).
    static func kids(_ s: Stack) throws -> [String: Int] {
        let text = try sql(s.dir + "/tokens.sqlite", """
            SELECT kid, COUNT(*) FROM (SELECT json_extract(envelope,'$.kid') AS kid FROM vault_tokens
            UNION ALL SELECT json_extract(envelope,'$.kid') FROM vault_instruments) GROUP BY kid
            """)
        var out: [String: Int] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: "|")
            if parts.count == 2 { out[String(parts[0])] = Int(parts[1]) }
        }
        return out
    }

    @Test func rotateRewrapRetireUnderLoadKeepsEveryTokenPayable() throws {
        let s = try Stack()
        let keys = s.dir + "/sidecar-keys", secrets = s.dir + "/gateway-keys", ring = keys + "/ring.json"
        let audit = s.dir + "/keys-audit.jsonl"
        let initial = try vault("keys", "init", "--keys", keys, "--audit-log", audit)
        #expect(initial.status == 0, "\(initial.stderr)")
        let oldKid = try #require(try vault("keys", "list", "--keys", keys).out.split(separator: "\n").dropFirst().first?.split(separator: " ").first.map(String.init))
        let sidecarAudit = s.dir + "/sidecar-audit.jsonl", gatewayAudit = s.dir + "/gateway-audit.jsonl"
        try s.startGateway(processor: ["--processor", "sandbox:" + s.ledger, "--ring", ring, "--audit-log", gatewayAudit])
        try s.startSidecar(extra: ["--audit-log", sidecarAudit])

        // Tokens and a stored instrument under the old key.
        var tokens: [String] = []
        for _ in 0..<150 { tokens.append(try s.tokenize("4242424242424242")) }
        let (_, customerBody) = try s.curl(s.sidecarSocket, "POST", "/v1/customers", #"{"reference":"rotation"}"#)
        let customer = try #require((try JSONSerialization.jsonObject(with: Data(customerBody.utf8)) as? [String: Any])?["id"] as? String)
        let attachToken = try s.tokenize("4242424242424242")
        #expect(try s.curl(s.sidecarSocket, "POST", "/v1/customers/\(customer)/instruments", #"{"token":"\#(attachToken)"}"#).0 == 201)

        // Load: tokenizing all the way through the rotation.
        final class Load: @unchecked Sendable {
            let lock = NSLock()
            var tokens: [String] = []
            var failures: [String] = []
            var stop = false
        }
        let load = Load()
        let loader = Thread {
            while !load.lock.withLock({ load.stop }) {
                do {
                    let (status, body) = try s.curl(
                        s.sidecarSocket, "POST", "/v1/tokens", #"{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2030,"cvc":"123"}}"#)
                    let token = (try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])?["token"] as? String
                    load.lock.withLock {
                        if status == 201, let token { load.tokens.append(token) } else { load.failures.append("\(status) \(body)") }
                    }
                } catch {
                    load.lock.withLock { load.failures.append("\(error)") }
                }
                usleep(100_000)
            }
        }
        loader.start()
        defer { load.lock.withLock { load.stop = true } }

        // A public key dropped into the sidecar's directory that the ring does not list is refused.
        let stray = s.dir + "/stray"
        try FileManager.default.createDirectory(atPath: stray, withIntermediateDirectories: true)
        let strayKid = try vault("keygen", "--out", stray).out.trimmingCharacters(in: .whitespacesAndNewlines)
        try FileManager.default.copyItem(atPath: "\(stray)/\(strayKid).pub", toPath: "\(keys)/\(strayKid).pub")

        // Rotate: add, wait for the gateway (SIGHUP sent by rotate) to open it, promote.
        let rotated = try vault(
            "keys", "rotate", "--keys", keys, "--secret-dir", secrets, "--gateway", s.gatewaySocket,
            "--reload-gateway-pid", String(s.gateway!.processIdentifier), "--audit-log", audit)
        #expect(rotated.status == 0, "\(rotated.stderr)")
        let newKid = rotated.out.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(newKid.count == 16 && newKid != oldKid)
        let listed = try vault("keys", "list", "--keys", keys).out
        #expect(listed.contains("\(newKid)  primary") && listed.contains("\(oldKid)  active"), "\(listed)")
        kill(s.sidecar!.processIdentifier, SIGHUP)
        // New tokens are sealed to the new key once the sidecar has reloaded; never to the stray key.
        var sawNew = false
        for _ in 0..<100 where !sawNew {
            _ = try s.tokenize("4242424242424242")
            sawNew = (try Self.kids(s)[newKid] ?? 0) > 0
            if !sawNew { usleep(50_000) }
        }
        #expect(sawNew)
        #expect(try Self.kids(s)[strayKid] == nil)
        #expect(s.sidecar!.isRunning && s.gateway!.isRunning)

        // Retiring the old key is refused while envelopes use it.
        let early = try vault("keys", "retire", oldKid, "--keys", keys, "--store", "sqlite:\(s.dir)/tokens.sqlite")
        #expect(early.status != 0 && early.stderr.contains("KEY_IN_USE"), "\(early.stderr)")
        // ... and a SQLite file no vault made is refused and left as it was (it got the vault's
        // schema, and then nothing there refused the retirement).
        let foreign = s.dir + "/other.sqlite"
        _ = try run("/usr/bin/env", ["python3", "-c", "import sqlite3; c=sqlite3.connect('\(foreign)'); c.execute('CREATE TABLE foo (x)'); c.commit()"])
        let foreignBytes = FileManager.default.contents(atPath: foreign)
        let wrongFile = try vault("keys", "retire", oldKid, "--keys", keys, "--store", "sqlite:" + foreign)
        #expect(wrongFile.status != 0 && wrongFile.stderr.contains("STORE_UNAVAILABLE") && wrongFile.stderr.contains("not a vault store"), "\(wrongFile.stderr)")
        #expect(FileManager.default.contents(atPath: foreign) == foreignBytes)
        #expect(try !String(contentsOfFile: ring, encoding: .utf8).contains("retired"))

        // Rewrap while the load goes on; a first run killed part-way, a second one finishes.
        let rewrapArgs = ["rewrap", "--store", "sqlite:\(s.dir)/tokens.sqlite", "--keys", secrets, "--ring", ring]
        let first = Process()
        first.executableURL = URL(fileURLWithPath: vaultBinary)
        first.arguments = rewrapArgs + ["--batch", "5", "--max-rate", "100"]
        first.standardOutput = FileHandle.nullDevice
        first.standardError = FileHandle.nullDevice
        let oldBefore = try Self.kids(s)[oldKid] ?? 0
        #expect(oldBefore >= 150)
        try first.run()
        // At 100 rows/s it needs seconds for the table: killed after about one.
        usleep(1_200_000)
        kill(first.processIdentifier, SIGKILL)
        first.waitUntilExit()
        let oldAfterKill = try Self.kids(s)[oldKid] ?? 0
        #expect(oldAfterKill > 0 && oldAfterKill < oldBefore, "killed part-way: \(oldAfterKill) of \(oldBefore) left")
        let second = try vault(rewrapArgs + ["--audit-log", audit], input: Data())
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.out.contains("failed 0") && !second.out.contains("rewrapped 0,"), "the second run finishes the job: \(second.out)")
        #expect(second.stderr.contains("rewrap tokens:"), "plain progress lines when not a terminal: \(second.stderr)")

        load.lock.withLock { load.stop = true }
        while loader.isExecuting { usleep(10_000) }
        let acked = load.lock.withLock { load.tokens }
        #expect(load.lock.withLock { load.failures }.isEmpty, "\(load.failures.prefix(3))")
        #expect(acked.count > 0)
        // Tokens made after the rewrap's pass may still be on the old key only if sealed before
        // the sidecar's reload; a last rewrap settles them, then nothing uses the old key.
        let last = try vault(rewrapArgs, input: Data())
        #expect(last.status == 0, "\(last.stderr)")
        let after = try Self.kids(s)
        #expect(after[oldKid] == nil, "\(after)")

        let retired = try vault("keys", "retire", oldKid, "--keys", keys, "--store", "sqlite:\(s.dir)/tokens.sqlite", "--audit-log", audit)
        #expect(retired.status == 0, "\(retired.stderr)")
        kill(s.gateway!.processIdentifier, SIGHUP)
        kill(s.sidecar!.processIdentifier, SIGHUP)
        usleep(300_000)
        let (keysStatus, keysBody) = try s.curl(s.gatewaySocket, "GET", "/v1/keys")
        #expect(keysStatus == 200 && keysBody.contains(newKid) && !keysBody.contains(oldKid), "\(keysBody)")

        // Every token is still payable, and the stored instrument too.
        for token in tokens + acked {
            let (status, payment, body) = try s.pay(token, key: "rot-" + token)
            #expect(status == 201 && payment["status"] as? String == "succeeded", "\(body)")
        }
        let (paid, byCustomer) = try s.curl(
            s.sidecarSocket, "POST", "/v1/payments", #"{"customer":"\#(customer)","amount":500,"currency":"EUR","idempotency_key":"rot-cus"}"#)
        #expect(paid == 201 && byCustomer.contains(#""status":"succeeded""#), "\(byCustomer)")
        #expect(s.sidecar!.isRunning && s.gateway!.isRunning, "no restart was needed")

        // The gateway's metrics count opens and authorizations; never a card digit.
        let (metricsStatus, metrics) = try s.curl(s.gatewaySocket, "GET", "/metrics")
        #expect(metricsStatus == 200 && metrics.contains(#"vault_gateway_opens_total{outcome="ok"}"#) && metrics.contains("vault_gateway_authorizations_total"), "\(metrics)")
        #expect(!containsPAN(metrics))
        let (_, sidecarMetrics) = try s.curl(s.sidecarSocket, "GET", "/metrics")
        #expect(sidecarMetrics.contains("vault_seals_total"))

        // Card digits typed into a path never reach the audit log (ids from failed lookups are not written).
        #expect(try s.curl(s.sidecarSocket, "GET", "/v1/tokens/4242424242424242x").0 == 404)
        #expect(try s.curl(s.sidecarSocket, "DELETE", "/v1/tokens/tok_4242424242424242").0 == 404)

        // The audit logs: every tokenize and pay is there, the key changes too, and they verify.
        s.stop(s.sidecar)
        s.stop(s.gateway)
        let sidecarLines = try String(contentsOfFile: sidecarAudit, encoding: .utf8)
        #expect(sidecarLines.contains(#""action":"tokenize""#) && sidecarLines.contains(#""action":"pay""#) && sidecarLines.contains(#""action":"key_reload""#))
        #expect(try String(contentsOfFile: gatewayAudit, encoding: .utf8).contains(#""action":"authorize""#))
        let keyLines = try String(contentsOfFile: audit, encoding: .utf8)
        for action in ["key_init", "key_add", "key_promote", "rewrap", "key_retire"] { #expect(keyLines.contains(#""action":"\#(action)""#), "\(action)") }
        #expect(!containsPAN(sidecarLines + keyLines))
        for file in [sidecarAudit, gatewayAudit, audit] {
            let ok = try vault("audit", "verify", file)
            #expect(ok.status == 0 && ok.out.hasPrefix("ok: "), "\(ok.out) \(ok.stderr)")
        }
        // One edited byte in the sidecar's log is caught, at the line after the edit.
        var lines = sidecarLines.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        lines[4] = lines[4].replacingOccurrences(of: #""outcome":"ok""#, with: #""outcome":"OK""#)
        try lines.joined(separator: "\n").write(toFile: sidecarAudit, atomically: true, encoding: .utf8)
        let tampered = try vault("audit", "verify", sidecarAudit)
        #expect(tampered.status == 1 && tampered.stderr.contains("line 6"), "\(tampered.stderr)")
    }

    /// `vault keys init/add/promote` write into the keys directory only when group and others
    /// cannot write it (KEYS_DIRECTORY_UNSAFE, exit 2), and a symlink planted at the old
    /// predictable temporary name is never followed.
    @Test func keysCommandsRefuseADirectoryOthersMayWriteAndNeverFollowAPlantedSymlink() throws {
        let s = try Stack()
        let keys = s.dir + "/sidecar-keys"
        let victim = s.dir + "/victim.key"
        _ = FileManager.default.createFile(atPath: victim, contents: Data("vault:sk:v1:victim\n".utf8), attributes: [.posixPermissions: 0o600])
        chmod(keys, 0o777)
        let refused = try vault("keys", "init", "--keys", keys)
        #expect(refused.status == 2 && refused.stderr.contains("KEYS_DIRECTORY_UNSAFE"), "\(refused.status) \(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: keys + "/ring.json"))
        chmod(keys, 0o775)
        #expect(try vault("keys", "init", "--keys", keys).stderr.contains("KEYS_DIRECTORY_UNSAFE"))
        chmod(keys, 0o755)
        // The ring is written through a random temporary name: the old guessable one is ignored.
        let initial = try vault("keys", "init", "--keys", keys)
        #expect(initial.status == 0, "\(initial.stderr)")
        // `keys add` into an unsafe keys directory writes nothing at all: no pair in the secret
        // directory, no public key beside the ring (it wrote both, then refused).
        let before = (try FileManager.default.contentsOfDirectory(atPath: keys)).sorted()
        let secretsBefore = (try FileManager.default.contentsOfDirectory(atPath: s.dir + "/gateway-keys")).sorted()
        chmod(keys, 0o777)
        let unsafeAdd = try vault("keys", "add", "--keys", keys, "--secret-dir", s.dir + "/gateway-keys")
        chmod(keys, 0o755)
        #expect(unsafeAdd.status == 2 && unsafeAdd.stderr.contains("KEYS_DIRECTORY_UNSAFE"), "\(unsafeAdd.status) \(unsafeAdd.stderr)")
        #expect((try FileManager.default.contentsOfDirectory(atPath: keys)).sorted() == before)
        #expect((try FileManager.default.contentsOfDirectory(atPath: s.dir + "/gateway-keys")).sorted() == secretsBefore)
        let added = try vault("keys", "add", "--keys", keys, "--secret-dir", s.dir + "/gateway-keys")
        #expect(added.status == 0, "\(added.stderr)")
        let kid = added.out.trimmingCharacters(in: .whitespacesAndNewlines)
        // Plant links at the temporary names (ring.json.tmp-<pid>) the next processes would have used.
        let next = Int32(try run("/bin/sh", ["-c", "echo $$"]).out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? getpid()
        for p in next..<(next + 2000) { _ = symlink(victim, keys + "/ring.json.tmp-\(p)") }
        let promoted = try vault("keys", "promote", kid, "--keys", keys)
        #expect(promoted.status == 0, "\(promoted.stderr)")
        #expect(String(decoding: FileManager.default.contents(atPath: victim) ?? Data(), as: UTF8.self) == "vault:sk:v1:victim\n")
        var st = stat()
        #expect(stat(victim, &st) == 0 && st.st_mode & 0o777 == 0o600)
        #expect(try String(contentsOfFile: keys + "/ring.json", encoding: .utf8).contains(kid))
    }

    @Test func aSidecarWithSeveralPublicKeysAndNoRingRefusesToStart() throws {
        let s = try Stack()
        let other = try vault("keygen", "--out", s.dir + "/gateway-keys").out.trimmingCharacters(in: .whitespacesAndNewlines)
        try FileManager.default.copyItem(atPath: "\(s.dir)/gateway-keys/\(other).pub", toPath: "\(s.dir)/sidecar-keys/\(other).pub")
        let r = try run(vaultBinary, ["serve", "--socket", s.sidecarSocket, "--keys", s.dir + "/sidecar-keys", "--store", "sqlite:\(s.dir)/t.sqlite"])
        #expect(r.status != 0 && r.stderr.contains("KEY_RING_NOT_FOUND"), "\(r.stderr)")
    }
}

/// Passphrase-protected secret keys end to end: the gateway refuses to start without the
/// passphrase, starts with it (file or systemd credential), and pays.
@Suite(.serialized, .ownThread) struct ProtectedKeyCLITests {
    /// Writes a passphrase to `passphraseFile` (0600) and protects the stack's gateway key with it
    /// (`vault keys protect --kdf kdf`); the key's file name.
    @discardableResult
    static func protectGatewayKey(_ s: PaymentsCLITests.Stack, passphraseFile pass: String, kdf: String) throws -> String {
        let kid = try #require(try FileManager.default.contentsOfDirectory(atPath: s.dir + "/gateway-keys").first { $0.hasSuffix(".key") })
        try "correct horse battery staple\n".write(toFile: pass, atomically: true, encoding: .utf8)
        chmod(pass, 0o600)
        let protect = try vault("keys", "protect", s.dir + "/gateway-keys/" + kid, "--passphrase-file", pass, "--kdf", kdf)
        #expect(protect.status == 0, "\(protect.stderr)")
        return kid
    }

    @Test func theGatewayOpensWithAPassphraseProtectedKey() throws {
        let s = try PaymentsCLITests.Stack()
        let pass = s.dir + "/passphrase"
        let kid = try Self.protectGatewayKey(s, passphraseFile: pass, kdf: "interactive")
        let line = try String(contentsOfFile: s.dir + "/gateway-keys/" + kid, encoding: .utf8)
        #expect(line.hasPrefix("vault:skp:v1:") && !line.contains("vault:sk:v1:"))

        let without = try run(vaultBinary, ["gateway", "--socket", s.gatewaySocket, "--keys", s.dir + "/gateway-keys"])
        #expect(without.status == 2 && without.stderr.contains("KEY_PASSPHRASE_REQUIRED"), "\(without.stderr)")
        try "wrong\n".write(toFile: s.dir + "/wrong", atomically: true, encoding: .utf8)
        chmod(s.dir + "/wrong", 0o600)
        let wrong = try run(vaultBinary, ["gateway", "--socket", s.gatewaySocket, "--keys", s.dir + "/gateway-keys", "--passphrase-file", s.dir + "/wrong"])
        #expect(wrong.status == 2 && wrong.stderr.contains("KEY_PASSPHRASE_WRONG"), "\(wrong.stderr)")

        // As systemd gives it: the keys and a `passphrase` credential in $CREDENTIALS_DIRECTORY.
        try FileManager.default.copyItem(atPath: pass, toPath: s.dir + "/gateway-keys/passphrase")
        try s.startGateway(processor: ["--processor", "sandbox:" + s.ledger], environment: ["CREDENTIALS_DIRECTORY": s.dir + "/gateway-keys"])
        try s.startSidecar()
        let (status, payment, body) = try s.pay(try s.tokenize("4242424242424242"), key: "pp-" + UUID().uuidString)
        #expect(status == 201 && payment["status"] as? String == "succeeded", "\(body)")
    }

    /// A key reload (SIGHUP) derives a protected key's Argon2id off the gateway's event loop: the
    /// gateway answers while it runs, instead of after it.
    @Test func aKeyReloadDoesNotHoldUpRequests() throws {
        let s = try PaymentsCLITests.Stack()
        // moderate: about a second of Argon2id per load.
        try Self.protectGatewayKey(s, passphraseFile: s.dir + "/gateway-keys/passphrase", kdf: "moderate")
        try s.startGateway(processor: ["--processor", "sandbox:" + s.ledger], environment: ["CREDENTIALS_DIRECTORY": s.dir + "/gateway-keys"])
        #expect(try s.curl(s.gatewaySocket, "GET", "/v1/health").0 == 200)
        kill(s.gateway!.processIdentifier, SIGHUP)
        usleep(150_000)
        // Answered while the reload runs: its log line is not there yet when the answer came.
        var answeredDuring = false
        for _ in 0..<50 {
            let code = try s.curl(s.gatewaySocket, "GET", "/v1/health").0
            let reloaded = s.gatewayLogText.contains("keys reloaded")
            if code == 200, !reloaded { answeredDuring = true }
            if answeredDuring || reloaded { break }
            usleep(20_000)
        }
        #expect(answeredDuring, "the gateway answered only once the reload was done")
        for _ in 0..<300 where !s.gatewayLogText.contains("keys reloaded") { usleep(100_000) }
        #expect(s.gatewayLogText.contains("keys reloaded"), "\(s.gatewayLogText)")
    }
}

