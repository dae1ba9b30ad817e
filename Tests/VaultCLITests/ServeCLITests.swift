import Foundation
import Testing
import VaultClient
import VaultCrypto

/// The real `vault serve` binary on a temporary Unix socket, driven with curl.
@Suite(.serialized, .ownThread) struct ServeCLITests {
    struct Sidecar {
        let dir: String
        var socket: String { dir + "/vault.sock" }
        var keys: String { dir + "/sidecar-keys" }
        var process: Process?
        var stderr = Pipe()

        init() throws {
            dir = NSTemporaryDirectory() + "vault-serve-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: dir + "/gateway-keys", withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: dir + "/sidecar-keys", withIntermediateDirectories: true)
            let kid = try vault("keygen", "--out", dir + "/gateway-keys").out.trimmingCharacters(in: .whitespacesAndNewlines)
            try FileManager.default.copyItem(atPath: "\(dir)/gateway-keys/\(kid).pub", toPath: "\(keys)/\(kid).pub")
        }

        mutating func start(keysDir: String? = nil, extra: [String] = []) throws {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: vaultBinary)
            p.arguments = ["serve", "--socket", socket, "--keys", keysDir ?? keys, "--store", "sqlite:\(dir)/tokens.sqlite"] + extra
            stderr = Pipe()
            p.standardError = stderr
            p.standardOutput = stderr
            try p.run()
            process = p
            // Ready when /v1/health answers (a stale socket file from a killed server may be there first).
            for _ in 0..<200 where p.isRunning {
                if FileManager.default.fileExists(atPath: socket), (try? curl("GET", "/v1/health").0) == 200 { break }
                usleep(50_000)
            }
        }

        func curl(_ method: String, _ path: String, _ body: String? = nil, asUser user: String? = nil) throws -> (Int, String) {
            var args = ["-s", "-o", "-", "-w", "\n%{http_code}", "--unix-socket", socket, "-X", method]
            if let body { args += ["-H", "Content-Type: application/json", "--data-binary", body] }
            let prefix = user.map { ["runuser", "-u", $0, "--"] } ?? []
            let r = try run("/usr/bin/env", prefix + ["curl"] + args + ["http://vault" + path])
            keepArtifact("responses.log", r.out + "\n" + r.stderr)
            let lines = r.out.split(separator: "\n", omittingEmptySubsequences: false)
            return (Int(lines.last ?? "") ?? 0, lines.dropLast().joined(separator: "\n"))
        }

        func logs() -> String {
            let text = String(decoding: stderr.fileHandleForReading.availableData, as: UTF8.self)
            keepArtifact("server-logs.log", text)
            return text
        }
        func remove() { removeScratch(dir) }
    }

    @Test func tokenizesOverTheSocketSurvivesKillAndStopsGracefully() throws {
        var s = try Sidecar()
        defer { s.process?.terminate(); s.remove() }
        try s.start()
        #expect(s.process?.isRunning == true)
        // The sidecar never makes (or holds) a fingerprint key: only the gateway does.
        #expect(!FileManager.default.fileExists(atPath: s.keys + "/fingerprint.fk"))
        #expect(try s.curl("GET", "/v1/health").0 == 200)
        var tokens: [String] = []
        for pan in ["4242424242424242", "5555555555554444", "378282246310005"] {
            let cvc = pan.hasPrefix("37") ? "1234" : "123"
            let (status, body) = try s.curl("POST", "/v1/tokens", #"{"card":{"number":"\#(pan)","exp_month":12,"exp_year":2030,"cvc":"\#(cvc)"}}"#)
            #expect(status == 201, "\(body)")
            #expect(!containsPAN(body))
            let json = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
            tokens.append(json?["token"] as? String ?? "")
        }
        let (bad, badBody) = try s.curl("POST", "/v1/tokens", #"{"card":{"number":"4242424242424241","exp_month":12,"exp_year":2030}}"#)
        #expect(bad == 422 && badBody.contains("LUHN_CHECK_FAILED"))

        // kill -9, then a restart over the stale socket file: every acknowledged token resolves.
        kill(s.process!.processIdentifier, SIGKILL)
        s.process!.waitUntilExit()
        #expect(FileManager.default.fileExists(atPath: s.socket))
        let logsBefore = s.logs()
        try s.start()
        for t in tokens {
            let (status, body) = try s.curl("GET", "/v1/tokens/\(t)")
            #expect(status == 200, "\(t): \(body)")
        }
        s.process!.terminate()   // SIGTERM: graceful drain
        s.process!.waitUntilExit()
        #expect(s.process!.terminationStatus == 0)
        let logs = logsBefore + s.logs()
        #expect(!containsPAN(logs), "a PAN reached the sidecar's log")
        // The SQLite files hold no PAN.
        for f in ["tokens.sqlite", "tokens.sqlite-wal"] {
            let data = FileManager.default.contents(atPath: "\(s.dir)/\(f)") ?? Data()
            #expect(!containsPAN(String(decoding: data, as: UTF8.self)), "\(f) holds a PAN")
        }
    }

    @Test func refusesToStartWithASecretKey() throws {
        var s = try Sidecar()
        defer { s.process?.terminate(); s.remove() }
        try s.start(keysDir: s.dir + "/gateway-keys")
        s.process!.waitUntilExit()
        #expect(s.process!.terminationStatus != 0)
        #expect(s.logs().contains("SECRET_KEY_REFUSED"))
        #expect(!FileManager.default.fileExists(atPath: s.socket))
    }

    /// Issue 19, item 1: a sidecar given the fingerprint key refuses to start (by name, and by
    /// content under another name), and says how to move it to the gateway.
    @Test func refusesToStartWithAFingerprintKey() throws {
        var s = try Sidecar()
        defer { s.process?.terminate(); s.remove() }
        #expect(try vault("keygen", "--fingerprint", "--out", s.keys).status == 0)
        try s.start()
        s.process!.waitUntilExit()
        #expect(s.process!.terminationStatus != 0)
        let logs = s.logs()
        #expect(logs.contains("FINGERPRINT_KEY_REFUSED") && logs.contains("move-fingerprint-key"), "\(logs)")
        #expect(!FileManager.default.fileExists(atPath: s.socket))
        try FileManager.default.moveItem(atPath: s.keys + "/fingerprint.fk", toPath: s.keys + "/notes.txt")
        try s.start()
        s.process!.waitUntilExit()
        #expect(s.process!.terminationStatus != 0)
        #expect(s.logs().contains("FINGERPRINT_KEY_REFUSED"))
        // A rotation's other key (fingerprint-<fkid>.fk) is refused like the primary.
        try FileManager.default.moveItem(atPath: s.keys + "/notes.txt", toPath: s.keys + "/fingerprint-0123456789abcdef.fk")
        try s.start()
        s.process!.waitUntilExit()
        #expect(s.process!.terminationStatus != 0)
        #expect(s.logs().contains("FINGERPRINT_KEY_REFUSED"))
    }

    /// `vault keys move-fingerprint-key` moves an existing key from a sidecar's directory to the
    /// gateway's (same key, so stored fingerprints stay valid), refuses a different key there,
    /// and the sidecar starts afterwards.
    @Test func movesTheFingerprintKeyToTheGateway() throws {
        var s = try Sidecar()
        defer { s.process?.terminate(); s.remove() }
        #expect(try vault("keygen", "--fingerprint", "--out", s.keys).status == 0)
        let before = try String(contentsOfFile: s.keys + "/fingerprint.fk", encoding: .utf8)
        let moved = try vault("keys", "move-fingerprint-key", "--from", s.keys, "--to", s.dir + "/gateway-keys")
        #expect(moved.status == 0, "\(moved.stderr)")
        #expect(moved.out.contains("delete as well"))
        #expect(!FileManager.default.fileExists(atPath: s.keys + "/fingerprint.fk"))
        let after = try String(contentsOfFile: s.dir + "/gateway-keys/fingerprint.fk", encoding: .utf8)
        #expect(after == before)
        let mode = (try FileManager.default.attributesOfItem(atPath: s.dir + "/gateway-keys/fingerprint.fk")[.posixPermissions] as? Int) ?? 0
        #expect(mode == 0o600)
        // A different key already at the gateway: refused, nothing removed.
        #expect(try vault("keygen", "--fingerprint", "--out", s.keys).status == 0)
        let clash = try vault("keys", "move-fingerprint-key", "--from", s.keys, "--to", s.dir + "/gateway-keys")
        #expect(clash.status != 0 && clash.stderr.contains("KEY_FILE_EXISTS"))
        #expect(FileManager.default.fileExists(atPath: s.keys + "/fingerprint.fk"))
        try FileManager.default.removeItem(atPath: s.keys + "/fingerprint.fk")
        try s.start()
        #expect(try s.curl("GET", "/v1/health").0 == 200)
    }

    /// A second real uid (nobody) reaches the socket (mode 0666) and is refused by the server,
    /// not by the file mode; once allowed `tokenize`, it may tokenize but not delete.
    @Test(.enabled(if: getuid() == 0, "needs root to run curl as another uid"))
    func foreignUidsAreRefusedByPeerCredentials() throws {
        var s = try Sidecar()
        defer { s.process?.terminate(); s.remove() }
        let card = #"{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2030}}"#
        try s.start(extra: ["--socket-mode", "666"])
        let (refused, body) = try s.curl("POST", "/v1/tokens", card, asUser: "nobody")
        #expect(refused == 403, "\(body)")
        #expect(body.contains("PEER_NOT_ALLOWED"))
        #expect(try s.curl("GET", "/v1/health", asUser: "nobody").0 == 403)
        #expect(try s.curl("POST", "/v1/tokens", card).0 == 201)   // the owner is allowed
        s.process!.terminate()
        s.process!.waitUntilExit()

        try s.start(extra: ["--socket-mode", "666", "--allow", "uid:0=admin", "--allow", "uid:65534=tokenize"])
        let (created, createdBody) = try s.curl("POST", "/v1/tokens", card, asUser: "nobody")
        #expect(created == 201, "\(createdBody)")
        let token = (try JSONSerialization.jsonObject(with: Data(createdBody.utf8)) as? [String: Any])?["token"] as? String ?? ""
        #expect(try s.curl("GET", "/v1/tokens/\(token)", asUser: "nobody").0 == 200)
        // The list shows every caller's tokens: never to a tokenize-only caller.
        let (listRefused, listBody) = try s.curl("GET", "/v1/tokens", asUser: "nobody")
        #expect(listRefused == 403 && listBody.contains("PEER_NOT_ALLOWED") && !listBody.contains(token), "\(listBody)")
        #expect(try s.curl("GET", "/v1/tokens").0 == 200)   // the admin lists them
        let (deleteRefused, _) = try s.curl("DELETE", "/v1/tokens/\(token)", asUser: "nobody")
        #expect(deleteRefused == 403)
        #expect(try s.curl("GET", "/v1/tokens/\(token)").0 == 200)   // nothing happened
        #expect(try s.curl("DELETE", "/v1/tokens/\(token)").0 == 204)
    }

    /// `--socket-group`: the socket belongs to that group with mode 0660, so its members reach
    /// the server (and are then checked by peer credentials) while other users cannot open it.
    /// The SQLite files are private to the sidecar's user. `/metrics` answers over the socket.
    @Test(.enabled(if: getuid() == 0, "needs root to give the socket to another group and to run curl as other users"))
    func socketGroupModeAndMetrics() throws {
        var s = try Sidecar()
        defer { s.process?.terminate(); s.remove() }
        // Other users must be able to traverse to the socket: only the socket's own mode decides.
        chmod(s.dir, 0o755)
        try s.start(extra: ["--socket-group", "nogroup", "--allow", "uid:0=admin", "--allow", "gid:65534=tokenize"])
        var st = stat()
        #expect(stat(s.socket, &st) == 0)
        #expect(st.st_gid == 65534, "socket group \(st.st_gid)")
        #expect(st.st_mode & 0o777 == 0o660, "socket mode \(String(st.st_mode & 0o777, radix: 8))")
        let card = #"{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2030}}"#
        #expect(try s.curl("POST", "/v1/tokens", card, asUser: "nobody").0 == 201)   // in the group
        #expect(try s.curl("POST", "/v1/tokens", card, asUser: "daemon").0 == 0)     // cannot open the socket
        var db = stat()
        #expect(stat(s.dir + "/tokens.sqlite", &db) == 0 && db.st_mode & 0o077 == 0, "the store is readable by others")

        let (status, metrics) = try s.curl("GET", "/metrics")
        #expect(status == 200)
        #expect(metrics.contains(#"vault_tokens_created_total{source="card"} 1"#), "\(metrics)")
        #expect(!containsPAN(metrics))
        s.process!.terminate()
        s.process!.waitUntilExit()

        let unknown = try run(vaultBinary, ["serve", "--socket", s.socket, "--keys", s.keys, "--socket-group", "no-such-group"])
        #expect(unknown.status != 0 && unknown.stderr.contains("SOCKET_GROUP_UNKNOWN"), "\(unknown.stderr)")
    }

    /// The socket is bound in a private directory and linked into place with its mode already
    /// set: from the first moment its path exists it is a socket with the configured mode (it used
    /// to appear with the umask's 0700 and be chmod'ed by path afterwards, through whatever the
    /// path then was). No private directory is left behind.
    @Test func theSocketIsNeverVisibleWithAnotherMode() throws {
        var s = try Sidecar()
        defer { s.process?.terminate(); s.remove() }
        let stale = Pipe()
        let p = Process()
        p.executableURL = URL(fileURLWithPath: vaultBinary)
        p.arguments = ["serve", "--socket", s.socket, "--keys", s.keys, "--store", "sqlite:\(s.dir)/tokens.sqlite", "--socket-mode", "666"]
        p.standardError = stale
        p.standardOutput = stale
        try p.run()
        s.process = p
        var first: mode_t?
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, p.isRunning {
            var st = stat()
            if lstat(s.socket, &st) == 0 { first = st.st_mode; break }
        }
        let mode = try #require(first, "the socket never appeared")
        #expect(mode & S_IFMT == S_IFSOCK)
        #expect(mode & 0o7777 == 0o666, "the socket first appeared with mode \(String(mode & 0o7777, radix: 8))")
        for _ in 0..<200 where (try? s.curl("GET", "/v1/health").0) != 200 { usleep(50_000) }
        #expect(try s.curl("GET", "/v1/health").0 == 200)
        #expect(try FileManager.default.contentsOfDirectory(atPath: s.dir).filter { $0.hasPrefix(".vsock-") }.isEmpty)
    }

    /// The CLI and the Swift client (SidecarClient) against the live sidecar.
    @Test func tokenizeAndTokenCommandsUseTheSocket() throws {
        var s = try Sidecar()
        defer { s.process?.terminate(); s.remove() }
        try s.start()
        let card = #"{"number":"5555 5555 5555 4444","exp_month":3,"exp_year":2031,"cvc":"737"}"#
        let raw = try vault("tokenize", "--socket", s.socket, input: card)
        #expect(raw.status == 0, "\(raw.stderr)")
        #expect(!containsPAN(raw.out))
        let token = (try JSONSerialization.jsonObject(with: raw.stdout) as? [String: Any])?["token"] as? String ?? ""
        #expect(token.hasPrefix("tok_"))
        let pub = try FileManager.default.contentsOfDirectory(atPath: s.keys).first { $0.hasSuffix(".pub") }!
        let sealedHere = try vault("tokenize", "--socket", s.socket, "--key", "\(s.keys)/\(pub)", input: card)
        #expect(sealedHere.status == 0, "\(sealedHere.stderr)")
        #expect(sealedHere.out.contains("\"brand\":\"mastercard\""))
        let shown = try vault("token", "show", "--socket", s.socket, token)
        #expect(shown.status == 0 && shown.out.contains("\"last4\":\"4444\""))
        #expect(try vault("token", "delete", "--socket", s.socket, token).status == 0)
        let gone = try vault("token", "show", "--socket", s.socket, token)
        #expect(gone.status == 9)
        #expect(gone.stderr.contains("TOKEN_NOT_FOUND"))
        let bad = try vault("tokenize", "--socket", s.socket, input: #"{"number":"5555555555554445","exp_month":3,"exp_year":2031}"#)
        #expect(bad.status == 6 && bad.stderr.contains("LUHN_CHECK_FAILED"))
        #expect(!containsPAN(bad.stderr))
        let down = try vault("token", "show", "--socket", s.dir + "/nothing.sock", token)
        #expect(down.status == 8 && down.stderr.contains("SIDECAR_UNREACHABLE"))
    }

    /// Tokenize under load from several threads, SIGKILL the sidecar mid-stream, restart it:
    /// every token that was acknowledged (201 received) resolves. Three rounds.
    @Test func killDashNineUnderLoadLosesNoAcknowledgedToken() throws {
        var s = try Sidecar()
        defer { s.process?.terminate(); s.remove() }
        final class Acked: @unchecked Sendable {
            let lock = NSLock()
            var tokens: [String] = []
            func add(_ t: String) { lock.withLock { tokens.append(t) } }
        }
        let acked = Acked()
        let card = SecureBytes(Array(#"{"number":"4242424242424242","exp_month":12,"exp_year":2030,"cvc":"123"}"#.utf8))
        for _ in 0..<3 {
            try s.start()
            let client = SidecarClient(socketPath: s.socket)
            let group = DispatchGroup()
            for _ in 0..<4 {
                group.enter()
                Thread {
                    defer { group.leave() }
                    for _ in 0..<10_000 {
                        guard let answer = try? client.tokenize(cardJSON: card), answer.status == 201,
                              let token = answer.json?["token"] as? String else { return }
                        acked.add(token)
                    }
                }.start()
            }
            usleep(400_000)
            kill(s.process!.processIdentifier, SIGKILL)
            s.process!.waitUntilExit()
            group.wait()
        }
        try s.start()
        let client = SidecarClient(socketPath: s.socket)
        #expect(acked.tokens.count > 10, "the load did not get going")
        var missing = 0
        for t in acked.tokens where (try? client.token(t).status) != 200 { missing += 1 }
        #expect(missing == 0, "\(missing) of \(acked.tokens.count) acknowledged tokens were lost")
    }
}
