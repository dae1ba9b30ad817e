import Foundation
import Testing

/// The real `vault gateway` binary on a temporary socket: the sandbox charges sealed cards,
/// core dumps are off, foreign uids are refused, and neither answers nor logs carry card data.
@Suite(.serialized) struct GatewayCLITests {
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

        mutating func start(extra: [String] = []) throws {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: vaultBinary)
            p.arguments = ["gateway", "--socket", socket, "--keys", keys, "--processor", "sandbox:\(dir)/ledger.sqlite"] + extra
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
        #expect(try g.curl("GET", "/v1/health").0 == 403)   // root is not on the list now
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
}
