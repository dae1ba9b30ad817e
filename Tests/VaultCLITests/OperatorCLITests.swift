import Foundation
import Testing

/// Issue 18, "An operator's day": the first commands from an empty directory, start-up failures
/// that say what to do, `config check` refusing what a server refuses, logs at start and stop, and
/// a CLI whose examples paste and whose completions complete.
@Suite(.ownThread) struct OperatorCLITests {
    static func scratch() throws -> String {
        let dir = NSTemporaryDirectory() + "vault-operator-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    static func mode(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path)[.posixPermissions]) as? NSNumber)?.intValue ?? -1
    }

    /// Item 1: README's key commands work from an empty directory, and the sidecar starts on the
    /// result; keygen will not put a secret key where the sidecar reads.
    @Test func keygenFromAnEmptyDirectory() throws {
        let dir = try Self.scratch()
        defer { removeScratch(dir) }
        let keys = dir + "/Keys", secrets = dir + "/gateway-keys"
        // Without --secret-dir: the directory is made, 0700, with both files.
        let alone = try vault("keygen", "--out", dir + "/trial/keys")
        #expect(alone.status == 0, "\(alone.stderr)")
        #expect(Self.mode(dir + "/trial/keys") == 0o700)
        let made = try vault("keygen", "--out", keys, "--secret-dir", secrets)
        #expect(made.status == 0, "\(made.stderr)")
        let kid = made.out.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(FileManager.default.fileExists(atPath: "\(keys)/\(kid).pub") && !FileManager.default.fileExists(atPath: "\(keys)/\(kid).key"))
        #expect(FileManager.default.fileExists(atPath: "\(secrets)/\(kid).key") && !FileManager.default.fileExists(atPath: "\(secrets)/\(kid).pub"))
        #expect(Self.mode(keys) == 0o700 && Self.mode(secrets) == 0o700 && Self.mode("\(secrets)/\(kid).key") == 0o600)
        #expect(try vault("keys", "init", "--keys", keys).status == 0)
        #expect(try vault("keygen", "--fingerprint", "--out", secrets).status == 0)
        // A directory holding ring.json is the sidecar's: no secret key there.
        let refused = try vault("keygen", "--out", keys)
        #expect(refused.status == 2 && refused.stderr.contains("SECRET_KEY_REFUSED") && refused.stderr.contains("--secret-dir"), "\(refused.stderr)")
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: keys)) ?? []).allSatisfy { !$0.hasSuffix(".key") })
        // The sidecar starts on Keys/ (README's `vault serve --keys Keys`).
        let check = try run(vaultBinary, ["config", "check", "--section", "sidecar"],
                            environment: ProcessInfo.processInfo.environment.merging(["VAULT_SIDECAR_KEYS": keys]) { $1 })
        #expect(check.status == 0 && check.out.contains(kid), "\(check.stderr)")
        // Sealed with the public key, opened with the secret one.
        let sealed = try vault("seal", "--key", "\(keys)/\(kid).pub", input: "db-password")
        let opened = try vault("open", "--key", "\(secrets)/\(kid).key", input: sealed.out)
        #expect(opened.status == 0 && opened.out == "db-password", "\(opened.stderr)")
    }

    /// Item 3: `vault open --passphrase-file` opens a protected key, as its error message says.
    @Test func openTakesAPassphraseFile() throws {
        let dir = try Self.scratch()
        defer { removeScratch(dir) }
        let kid = try vault("keygen", "--out", dir).out.trimmingCharacters(in: .whitespacesAndNewlines)
        let pass = dir + "/pass.txt"
        #expect(FileManager.default.createFile(atPath: pass, contents: Data("correct horse\n".utf8), attributes: [.posixPermissions: 0o600]))
        let protect = try vault("keys", "protect", "\(dir)/\(kid).key", "--passphrase-file", pass, "--kdf", "interactive")
        #expect(protect.status == 0, "\(protect.stderr)")
        let sealed = try vault("seal", "--key", "\(dir)/\(kid).pub", input: "hello").out
        let without = try vault("open", "--key", "\(dir)/\(kid).key", input: sealed)
        #expect(without.status == 2 && without.stderr.contains("KEY_PASSPHRASE_REQUIRED") && without.stderr.contains("--passphrase-file"))
        let with = try vault("open", "--key", "\(dir)/\(kid).key", "--passphrase-file", pass, input: sealed)
        #expect(with.status == 0 && with.out == "hello", "\(with.stderr)")
    }

    /// Item 4: numbers are JSON numbers within bounds, booleans are booleans, empty lists print as
    /// such, and `config check` loads the relay template and the gateway's keys.
    @Test func configCheckRefusesWhatTheServersRefuse() throws {
        let keys = try TestKeys()
        defer { keys.remove() }
        let pubDir = keys.dir + "/public"
        try FileManager.default.createDirectory(atPath: pubDir, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: keys.pub, toPath: pubDir + "/\(keys.kid).pub")
        let file = keys.dir + "/vault.json"
        func check(_ text: String) throws -> RunResult {
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            return try vault("config", "check", "--config", file)
        }
        for (setting, expected) in [(#""token_ttl":"900""#, "not a string"), (#""token_ttl":1e9"#, "from 1 to 31536000"),
                                    (#""token_ttl":true"#, "not true or false"), (#""log_requests":1"#, "true or false"),
                                    (#""cvc_ttl":100000"#, "from 1 to 86400"), (#""reconcile_after":"60""#, "not a string"),
                                    (#""held_cvcs_max":0"#, "from 1 to 10000000"), (#""held_cvcs_max":1.5"#, "whole number")] {
            let r = try check(#"{"sidecar":{"keys":"\#(pubDir)",\#(setting)}}"#)
            #expect(r.status == 11 && r.stderr.contains(expected), "\(setting): \(r.status) \(r.stderr)")
        }
        let empty = try check(#"{"sidecar":{"keys":"\#(pubDir)","allow":[],"log_requests":true},"gateway":{"allow_uid":[]}}"#)
        #expect(empty.status == 0, "\(empty.stderr)")
        #expect(empty.out.contains("sidecar.allow = [] (") && empty.out.contains("gateway.allow_uid = [] ("), "\(empty.out)")
        #expect(empty.out.contains("sidecar.log_requests = true"), "\(empty.out)")
        #expect(!empty.out.split(separator: "\n").contains { $0.hasSuffix(" = ") || $0.contains(" =  [") }, "\(empty.out)")
        // A relay template that does not exist.
        let relay = try check(#"{"sidecar":{"keys":"\#(pubDir)"},"gateway":{"processor":"relay:\#(keys.dir)/missing.json"}}"#)
        #expect(relay.status == 11 && relay.stderr.contains("RELAY_TEMPLATE_INVALID") && relay.stderr.contains("missing.json"), "\(relay.stderr)")
        // The gateway's keys: loaded (a directory without a secret key is refused as at start).
        let good = try check(#"{"sidecar":{"keys":"\#(pubDir)"},"gateway":{"keys":"\#(keys.dir)"}}"#)
        #expect(good.status == 0 && good.out.contains("secret keys open \(keys.kid)") && good.out.contains("fingerprint key present"), "\(good.out) \(good.stderr)")
        let none = try check(#"{"sidecar":{"keys":"\#(pubDir)"},"gateway":{"keys":"\#(pubDir)"}}"#)
        #expect(none.status == 2 && none.stderr.contains("KEY_FILE_NOT_FOUND"), "\(none.stderr)")
    }

    /// Item 5: start-up failures say what is wrong in plain words, never the library's text.
    @Test func startUpFailuresSayWhatToDo() throws {
        let s = try ServeCLITests.Sidecar()
        defer { s.remove() }
        func serve(_ arguments: [String]) throws -> RunResult {
            try run(vaultBinary, ["serve", "--keys", s.keys] + arguments)
        }
        let socket = try serve(["--socket", s.dir + "/no/such/dir/v.sock", "--store", "sqlite:\(s.dir)/t.sqlite"])
        #expect(socket.status == 11 && socket.stderr.contains("SOCKET_UNAVAILABLE") && socket.stderr.contains("does not exist"), "\(socket.stderr)")
        let sqlite = try serve(["--socket", s.dir + "/v.sock", "--store", "sqlite:\(s.dir)/no/such/dir/t.sqlite"])
        #expect(sqlite.status == 8 && sqlite.stderr.contains("cannot open the SQLite store at \(s.dir)/no/such/dir/t.sqlite"), "\(sqlite.stderr)")
        #expect(sqlite.stderr.contains("its directory must exist") && !sqlite.stderr.contains("unable to open database file"), "\(sqlite.stderr)")
        let postgres = try serve(["--socket", s.dir + "/v.sock", "--store", "postgres://vault@127.0.0.1:1/vault"])
        #expect(postgres.status == 8 && postgres.stderr.contains("cannot connect to PostgreSQL at 127.0.0.1:1") && postgres.stderr.contains("connection refused"),
                "\(postgres.stderr)")
        for leak in ["errno", "SingleConnectionFailure", "bind(descriptor", "NIOConnectionError"] {
            #expect(![socket, sqlite, postgres].contains { $0.stderr.contains(leak) }, "\(leak)")
        }
        // A secret key in the sidecar's directory: exit 2 (a restart cannot cure it).
        let secret = try serve(["--socket", s.dir + "/v.sock", "--store", "sqlite:\(s.dir)/t.sqlite", "--keys", s.dir + "/gateway-keys"])
        #expect(secret.status == 2 && secret.stderr.contains("SECRET_KEY_REFUSED"), "\(secret.stderr)")
        // A store a newer vault migrated: exit 15 (a restart cannot cure it, the units stop).
        let newer = s.dir + "/newer.sqlite"
        let made = try run("/usr/bin/env", ["python3", "-c", """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1])
            db.execute("CREATE TABLE vault_migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)")
            db.execute("INSERT INTO vault_migrations VALUES ('9999-from-a-newer-vault', 0)")
            db.commit()
            """, newer])
        #expect(made.status == 0, "\(made.stderr)")
        let tooNew = try serve(["--socket", s.dir + "/v.sock", "--store", "sqlite:\(newer)"])
        #expect(tooNew.status == 15 && tooNew.stderr.contains("STORE_TOO_NEW"), "\(tooNew.status) \(tooNew.stderr)")
    }

    /// Item 6: the start-up line has the version, the store and the gateway; SIGTERM is logged.
    @Test func serversLogVersionAtStartAndShutdownOnSIGTERM() throws {
        var s = try ServeCLITests.Sidecar()
        defer { s.process?.terminate(); s.remove() }
        try s.start(extra: ["--gateway", s.dir + "/gateway.sock"])
        let version = try vault("--version").out.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(!version.isEmpty)
        let p = try #require(s.process)
        kill(p.processIdentifier, SIGTERM)
        p.waitUntilExit()
        let logs = s.logs()
        #expect(p.terminationStatus == 0, "\(logs)")
        #expect(logs.contains("version=\(version)") && logs.contains("store=sqlite:\(s.dir)/tokens.sqlite") && logs.contains("gateway=\(s.dir)/gateway.sock"), "\(logs)")
        #expect(logs.contains("shutting down") && logs.contains("vault sidecar stopped"), "\(logs)")
    }

    /// Item 6: the gateway too logs its version and store at start, and its graceful shutdown.
    @Test func gatewayLogsVersionAtStartAndShutdownOnSIGTERM() throws {
        var g = try GatewayCLITests.Gateway()
        defer { g.process?.terminate(); g.remove() }
        try g.start()
        let p = try #require(g.process)
        #expect(p.isRunning)
        p.terminate()   // SIGTERM
        p.waitUntilExit()
        let logs = g.logs()
        #expect(p.terminationStatus == 0, "\(logs)")
        let version = try vault("--version").out.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(logs.contains("version=\(version)") && logs.contains("store=sqlite:"), "\(logs)")
        #expect(logs.contains("vault gateway shutting down") && logs.contains("vault gateway stopped"), "\(logs)")
    }

    /// Item 6: `keys rotate --gateway` says what it waits for, and how long it has waited.
    @Test func rotateShowsItsProgress() throws {
        let dir = try Self.scratch()
        defer { removeScratch(dir) }
        let keys = dir + "/Keys", secrets = dir + "/gateway-keys"
        #expect(try vault("keygen", "--out", keys, "--secret-dir", secrets).status == 0)
        #expect(try vault("keys", "init", "--keys", keys).status == 0)
        let r = try vault("keys", "rotate", "--keys", keys, "--secret-dir", secrets, "--gateway", dir + "/no-gateway.sock", "--wait", "6")
        #expect(r.status == 12 && r.stderr.contains("KEY_RING_CHANGE_REFUSED"), "\(r.stderr)")
        #expect(r.stderr.contains("waiting up to 6 s for the gateway at \(dir)/no-gateway.sock") && r.stderr.contains("still waiting"), "\(r.stderr)")
    }

    /// Item 7: examples fit 80 columns (never re-wrapped), completions complete paths and values,
    /// a mistyped subcommand gets a suggestion, `keys list` offers no `--audit-log`.
    @Test func helpCompletionAndSuggestions() throws {
        var environment = ProcessInfo.processInfo.environment
        environment["COLUMNS"] = "80"
        for command in [["keygen"], ["keys", "add"], ["keys", "rotate"], ["keys", "retire"], ["keys", "protect"], ["rewrap"], ["audit", "verify"],
                        ["config", "check"], ["serve"], ["gateway"], ["seal"], ["open"], ["validate"], ["tokenize"], ["token"], ["kid"],
                        ["payments", "settle"], ["keys", "move-fingerprint-key"], ["keys", "add-fingerprint-key"],
                        ["keys", "promote-fingerprint-key"], ["keys", "retire-fingerprint-key"]] {
            let help = try run(vaultBinary, ["help"] + command, environment: environment)
            let lines = help.out.split(separator: "\n", omittingEmptySubsequences: false)
            guard let start = lines.firstIndex(where: { $0.hasPrefix("Example") }) else {
                Issue.record("vault \(command.joined(separator: " ")) --help has no examples")
                continue
            }
            for line in lines[(start + 1)...].prefix(while: { !$0.hasPrefix("USAGE:") }) where !line.isEmpty {
                #expect(line.hasPrefix("  "), "vault \(command.joined(separator: " ")) --help wraps an example: \(line)")
            }
        }
        let bash = try vault("--generate-completion-script", "bash").out
        for value in ["notice", "critical", "sensitive", "interactive", "relay:", "not-charged"] {
            #expect(bash.contains(value), "bash completion offers no \(value)")
        }
        #expect(bash.contains("-f") || bash.contains("compgen -A file"), "bash completion never completes files")
        let typo = try vault("sael")
        #expect(typo.status == 64 && typo.stderr.contains("did you mean `vault seal`?"), "\(typo.stderr)")
        let nested = try vault("keys", "lsit")
        #expect(nested.status == 64 && nested.stderr.contains("did you mean `vault keys list`?"), "\(nested.stderr)")
        let list = try vault("keys", "list", "--help")
        #expect(list.status == 0 && !list.out.contains("--audit-log"), "\(list.out)")
    }
}
