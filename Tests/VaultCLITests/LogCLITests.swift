import Foundation
import Testing

/// The servers' log lines (docs/configuration.md "Logs"), from the real binary: text and JSON
/// formats, millisecond UTC timestamps, journald priorities when standard error is the journal's
/// stream, and the request line with the `Request-Id` answered and the error code.
@Suite(.serialized, .ownThread) struct LogCLITests {
    /// `2026-11-24T23:40:01.123Z`.
    static func isTimestamp(_ text: Substring) -> Bool {
        text.wholeMatch(of: #/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/#) != nil
    }

    /// Runs `vault serve` with standard error in a file (optionally named by `JOURNAL_STREAM`, as
    /// systemd does), makes a few requests, stops it and answers its log and the request ids.
    func serve(_ extra: [String], journal: Bool, eventLoops: String? = nil) throws -> (log: String, notFoundID: String, tokenizeID: String) {
        let s = try ServeCLITests.Sidecar()
        defer { s.remove() }
        let logPath = s.dir + "/stderr.log"
        #expect(FileManager.default.createFile(atPath: logPath, contents: nil))
        let logFile = try #require(FileHandle(forWritingAtPath: logPath))
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "JOURNAL_STREAM")
        environment["VAULT_EVENT_LOOPS"] = eventLoops
        environment.removeValue(forKey: "NIO_SINGLETON_GROUP_LOOP_COUNT")
        if journal {
            var st = stat()
            #expect(fstat(logFile.fileDescriptor, &st) == 0)
            environment["JOURNAL_STREAM"] = "\(st.st_dev):\(st.st_ino)"
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: vaultBinary)
        p.arguments = ["serve", "--socket", s.socket, "--keys", s.keys, "--store", "sqlite:\(s.dir)/tokens.sqlite", "--log-requests"] + extra
        p.environment = environment
        p.standardError = logFile
        p.standardOutput = logFile
        try p.run()
        defer { if p.isRunning { p.terminate() } }
        for _ in 0..<200 where p.isRunning {
            if FileManager.default.fileExists(atPath: s.socket), (try? s.curl("GET", "/v1/health").0) == 200 { break }
            usleep(50_000)
        }
        func requestID(_ method: String, _ path: String, _ body: String? = nil) throws -> String {
            var args = ["-s", "-D", "-", "-o", "/dev/null", "--unix-socket", s.socket, "-X", method]
            if let body { args += ["-H", "Content-Type: application/json", "--data-binary", body] }
            let r = try run("/usr/bin/env", ["curl"] + args + ["http://vault" + path])
            let line = r.out.split(separator: "\r\n").first { $0.lowercased().hasPrefix("request-id:") }
            return String(try #require(line).dropFirst("request-id:".count)).trimmingCharacters(in: .whitespaces)
        }
        let notFound = try requestID("GET", "/v1/no-such-route")
        let tokenize = try requestID("POST", "/v1/tokens", #"{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2031,"cvc":"123"}}"#)
        p.terminate()
        p.waitUntilExit()
        try logFile.close()
        let log = try String(contentsOfFile: logPath, encoding: .utf8)
        keepArtifact("log-\(extra.joined(separator: "-")).log", log)
        return (log, notFound, tokenize)
    }

    @Test func jsonLinesWithJournalPriorities() throws {
        let (log, notFoundID, tokenizeID) = try serve(["--log-format", "json"], journal: true)
        #expect(!containsPAN(log))
        var entries: [(priority: Int, fields: [String: String])] = []
        for line in log.split(separator: "\n") {
            // Every line is `<N>` then one JSON object of strings.
            let match = try #require(line.firstMatch(of: #/^<([0-7])>(\{.*\})$/#), "not a prioritized JSON line: \(line)")
            let object = try JSONSerialization.jsonObject(with: Data(match.2.utf8)) as? [String: Any]
            let fields = try #require(object as? [String: String], "not an object of strings: \(line)")
            #expect(fields["ts"].map { Self.isTimestamp(Substring($0)) } == true, "timestamp: \(fields["ts"] ?? "none")")
            let expected = ["debug": 7, "trace": 7, "info": 6, "notice": 5, "warning": 4, "error": 3, "critical": 2][fields["level"] ?? ""]
            #expect(Int(match.1) == expected, "priority of \(line)")
            entries.append((Int(match.1)!, fields))
        }
        let notFound = try #require(entries.first { $0.fields["msg"] == "request" && $0.fields["request_id"] == notFoundID })
        #expect(notFound.fields["code"] == "ROUTE_NOT_FOUND")
        #expect(notFound.fields["status"] == "404")
        #expect(notFound.fields["route"] == "-")
        #expect(notFound.priority == 6)
        let tokenize = try #require(entries.first { $0.fields["msg"] == "request" && $0.fields["request_id"] == tokenizeID })
        #expect(tokenize.fields["route"] == "/v1/tokens")
        #expect(tokenize.fields["status"] == "201")
        #expect(tokenize.fields["code"] == nil)
        #expect(entries.contains { $0.fields["msg"]?.contains("stopped") == true })
    }

    @Test func textLinesWithoutTheJournal() throws {
        let (log, notFoundID, _) = try serve([], journal: false, eventLoops: "3")
        #expect(!containsPAN(log))
        for line in log.split(separator: "\n") {
            let first = try #require(line.split(separator: " ").first)
            #expect(Self.isTimestamp(first), "not a timestamped line: \(line)")
        }
        let request = try #require(log.split(separator: "\n").first { $0.contains("request_id=\(notFoundID)") })
        #expect(request.contains("code=ROUTE_NOT_FOUND"))
        #expect(request.contains("status=404"))
        #expect(request.contains(" info vault.sidecar:"))
        // The real binary runs its handlers on NIO's event loops (SocketServer.runTasksOnEventLoops).
        let start = try #require(log.split(separator: "\n").first { $0.contains("vault sidecar listening") })
        #expect(start.contains("tasks_on_event_loops=true"), "\(start)")
        // VAULT_EVENT_LOOPS sets the number of event loops (SocketServer.chooseEventLoops).
        #expect(start.contains("event_loops=3"), "\(start)")
    }

    /// A `VAULT_EVENT_LOOPS` that is not a whole number from 1 to 64 stops the sidecar at once
    /// with a coded error (exit 11), through `vault serve` as through its own executable, and
    /// `vault gateway` too.
    @Test func anEventLoopCountOutOfRangeIsAConfigurationError() throws {
        let dir = NSTemporaryDirectory() + "vault-eventloops-" + UUID().uuidString
        defer { removeScratch(dir) }
        let sidecar = (vaultBinary as NSString).deletingLastPathComponent + "/vault-sidecar"
        let options = ["--socket", dir + "/vault.sock", "--keys", dir, "--store", "sqlite:\(dir)/tokens.sqlite"]
        for value in ["0", "65", "two"] {
            var environment = ProcessInfo.processInfo.environment
            environment["VAULT_EVENT_LOOPS"] = value
            environment.removeValue(forKey: "NIO_SINGLETON_GROUP_LOOP_COUNT")
            let gateway = ["gateway", "--socket", dir + "/vault.sock", "--keys", dir, "--processor", "sandbox:\(dir)/ledger.sqlite"]
            for (executable, arguments) in [(vaultBinary, ["serve"] + options), (sidecar, options), (vaultBinary, gateway)] {
                let r = try run(executable, arguments, environment: environment)
                #expect(r.status == 11, "\(value): \(r.stderr)")
                #expect(r.stderr.contains("CONFIG_INVALID") && r.stderr.contains("VAULT_EVENT_LOOPS must be a whole number from 1 to 64"), "\(r.stderr)")
                #expect(!r.stderr.contains("two") && !r.stderr.contains("65"), "the refused value is repeated: \(r.stderr)")
                #expect(!FileManager.default.fileExists(atPath: dir + "/vault.sock"))
            }
        }
    }

    @Test func anUnknownFormatIsAConfigurationError() throws {
        let dir = NSTemporaryDirectory() + "vault-logformat-" + UUID().uuidString
        defer { removeScratch(dir) }
        let r = try vault("serve", "--socket", dir + "/vault.sock", "--log-format", "xml")
        #expect(r.status == 11)
        #expect(r.stderr.contains("CONFIG_INVALID"))
        #expect(r.stderr.contains("log_format"))
    }
}

/// The `Request-Id` of a request on the lines logged while it is handled, not only on the request
/// line: a payment's `payment` line (written by the payment service's own logger) carries the id
/// its answer carried.
@Suite(.serialized, .ownThread) struct RequestIDLogCLITests {
    @Test func aPaymentsServiceLogLineCarriesTheRequestIDOfItsAnswer() throws {
        let s = try PaymentsCLITests.Stack()
        try s.startGateway()
        try s.startSidecar(extra: ["--log-format", "json"])
        let token = try s.tokenize("4242424242424242")
        let r = try run("/usr/bin/env", [
            "curl", "-s", "-D", "/dev/stderr", "-o", "-", "--unix-socket", s.sidecarSocket, "-X", "POST", "-H", "Content-Type: application/json",
            "--data-binary", #"{"token":"\#(token)","amount":1200,"currency":"EUR","idempotency_key":"log-\#(UUID().uuidString)"}"#,
            "http://vault/v1/payments",
        ])
        let header = try #require(r.stderr.split(separator: "\r\n").first { $0.lowercased().hasPrefix("request-id:") }, "\(r.stderr)")
        let requestID = String(header.dropFirst("request-id:".count)).trimmingCharacters(in: .whitespaces)
        let payment = try #require((try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any])?["id"] as? String, "\(r.out)")
        s.stop(s.sidecar)
        s.stop(s.gateway)
        let log = s.sidecarLogText
        keepArtifact("request-id.log", log)
        let lines = log.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let line = try #require(lines.first { $0["msg"] as? String == "payment" && $0["payment"] as? String == payment }, "\(log)")
        #expect(line["request_id"] as? String == requestID, "\(line)")
        #expect(line["logger"] as? String != nil)
        // Lines not tied to a request carry none.
        let started = try #require(lines.first { ($0["msg"] as? String)?.contains("listening") == true }, "\(log)")
        #expect(started["request_id"] == nil, "\(started)")
        #expect(!containsPAN(log))
    }
}
