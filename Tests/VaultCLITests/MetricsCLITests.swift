import Foundation
import Testing

/// The live `GET /metrics` of a real sidecar and gateway against docs/metrics.md: every family
/// documented for a server is served by it with the documented type, and every `vault_` family
/// a server serves is documented for it. Then what issue 18 asked of the values: build info, the
/// payments by state, the primary key's age, the result of a SIGHUP reload (failed, then good),
/// request counters on the gateway's routes, buckets up to 30 s.
@Suite(.serialized, .ownThread) struct MetricsCLITests {
    /// docs/metrics.md's families: name → (type, servers).
    static func documented() throws -> [String: (type: String, servers: Set<String>)] {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/metrics.md"), encoding: .utf8)
        var out: [String: (type: String, servers: Set<String>)] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("| `vault_") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            // cells[0] is empty (the line starts with "|").
            let name = cells[1].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            out[name] = (cells[2], cells[4] == "both" ? ["sidecar", "gateway"] : [cells[4]])
        }
        return out
    }

    /// `# TYPE name type` lines of an exposition.
    static func families(_ exposition: String) -> [String: String] {
        var out: [String: String] = [:]
        for line in exposition.split(separator: "\n") where line.hasPrefix("# TYPE ") {
            let words = line.split(separator: " ")
            if words.count == 4 { out[String(words[2])] = String(words[3]) }
        }
        return out
    }

    /// The value of the first sample line starting with `prefix` (name and labels as exported).
    static func value(_ exposition: String, _ prefix: String) -> Double? {
        exposition.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { Double($0.split(separator: " ").last ?? "") }
    }

    @Test func everyDocumentedFamilyIsServedAndEveryServedFamilyIsDocumented() throws {
        let documented = try Self.documented()
        #expect(documented.count > 20, "docs/metrics.md: \(documented.keys.sorted())")
        let s = try PaymentsCLITests.Stack()
        try s.startGateway()
        try s.startSidecar()
        // One payment and one error answer, so the families made at their first event exist.
        let token = try s.tokenize("4242424242424242")
        let (status, payment, body) = try s.pay(token, key: PaymentsCLITests.key())
        #expect(status == 201 && payment["status"] as? String == "succeeded", "\(body)")
        #expect(try s.curl(s.sidecarSocket, "GET", "/v1/tokens/tok_missing").0 == 404)
        #expect(try s.curl(s.gatewaySocket, "GET", "/v1/nothing").0 == 404)

        for (server, socket) in [("sidecar", s.sidecarSocket), ("gateway", s.gatewaySocket)] {
            let (code, text) = try s.curl(socket, "GET", "/metrics")
            #expect(code == 200)
            #expect(!containsPAN(text))
            let served = Self.families(text)
            for (name, doc) in documented where doc.servers.contains(server) {
                #expect(served[name] == doc.type, "\(server) serves \(name) as \(served[name] ?? "nothing"), docs/metrics.md says \(doc.type)")
            }
            for name in served.keys where name.hasPrefix("vault_") {
                #expect(documented[name]?.servers.contains(server) == true, "\(server) serves \(name), not documented for it in docs/metrics.md")
            }
            #expect(text.contains(#"vault_build_info{version=""#) && text.contains(#"component="\#(server)"} 1"#), "\(text)")
            #expect(text.contains(#"vault_key_age_seconds{kid="\#(s.kid)",role="primary"}"#), "\(server): \(text)")
            #expect(Self.value(text, "vault_reload_last_success ") == 1)
            #expect(text.contains(#"le="30.0""#), "\(server): no 30 s bucket")
        }
        // The gateway counts its own requests per route template.
        let (_, gateway) = try s.curl(s.gatewaySocket, "GET", "/metrics")
        let authorize = gateway.split(separator: "\n").first { $0.hasPrefix(#"vault_http_requests_total{route="/v1/authorize",method="POST",status="2"#) }
        #expect(authorize?.hasSuffix(" 1") == true, "\(gateway)")
        #expect(gateway.contains(#"vault_http_request_duration_seconds_bucket{route="/v1/fingerprints",method="POST""#), "\(gateway)")
        #expect(gateway.contains(#"vault_errors_total{code="ROUTE_NOT_FOUND"} 1"#), "\(gateway)")
    }

    @Test func paymentsByStateAndReloadResultsAreExported() throws {
        let s = try PaymentsCLITests.Stack()
        try s.startGateway()
        try s.startSidecar()
        for (pan, key) in [("4242424242424242", "a"), ("4000000000000002", "b")] {
            let (status, _, body) = try s.pay(try s.tokenize(pan), key: "order-\(key)-" + UUID().uuidString)
            #expect(status == 201, "\(body)")
        }
        // The backlog is counted at start and every 30 s: a restarted sidecar counts what is stored.
        s.stop(s.sidecar)
        try s.startSidecar()
        var text = ""
        for _ in 0..<100 {
            text = try s.curl(s.sidecarSocket, "GET", "/metrics").1
            if Self.value(text, #"vault_payments_by_state{state="succeeded"}"#) == 1 { break }
            usleep(100_000)
        }
        #expect(Self.value(text, #"vault_payments_by_state{state="succeeded"}"#) == 1, "\(text)")
        #expect(Self.value(text, #"vault_payments_by_state{state="declined"}"#) == 1)
        #expect(Self.value(text, #"vault_payments_by_state{state="processing"}"#) == 0)
        #expect(Self.value(text, "vault_payments_oldest_processing_age_seconds ") == 0)
        let started = try #require(Self.value(text, "vault_reload_last_timestamp_seconds "))

        // A reload that fails (a secret key where the sidecar's public keys are) keeps the keys
        // and sets vault_reload_last_success to 0; a good one sets it back to 1.
        let sidecar = try #require(s.sidecar)
        let intruder = s.dir + "/sidecar-keys/\(s.kid).key"
        try FileManager.default.copyItem(atPath: s.dir + "/gateway-keys/\(s.kid).key", toPath: intruder)
        kill(sidecar.processIdentifier, SIGHUP)
        for _ in 0..<100 where !s.sidecarLogText.contains("key reload failed") { usleep(50_000) }
        text = try s.curl(s.sidecarSocket, "GET", "/metrics").1
        #expect(Self.value(text, "vault_reload_last_success ") == 0, "\(text)")
        #expect((Self.value(text, "vault_reload_last_timestamp_seconds ") ?? 0) >= started)
        try FileManager.default.removeItem(atPath: intruder)
        kill(sidecar.processIdentifier, SIGHUP)
        for _ in 0..<100 where !s.sidecarLogText.contains("keys reloaded") { usleep(50_000) }
        text = try s.curl(s.sidecarSocket, "GET", "/metrics").1
        #expect(Self.value(text, "vault_reload_last_success ") == 1, "\(text)")
        #expect(s.sidecarLogText.contains("keys reloaded"))
    }

    /// The primary key's age comes from the key ring's `created` time once a ring names it (before,
    /// from the key file's modification time), on both servers, after a SIGHUP reload; a ring the
    /// gateway cannot read fails its reload (0) and keeps the keys in use.
    @Test func keyAgeFollowsTheRingAndAFailedGatewayReloadIsExported() throws {
        let s = try PaymentsCLITests.Stack()
        try s.startGateway()
        try s.startSidecar()
        let series = #"vault_key_age_seconds{kid="\#(s.kid)",role="primary"} "#
        for socket in [s.sidecarSocket, s.gatewaySocket] {
            let age = try #require(Self.value(try s.curl(socket, "GET", "/metrics").1, series))
            #expect(age < 3600, "a key file made just now: \(age)")
        }
        // A ring that says the key was made on 2025-01-01.
        let ring = #"{"v":1,"keys":[{"kid":"\#(s.kid)","status":"primary","created":"2025-01-01T00:00:00Z"}]}"#
        let made = Date(timeIntervalSince1970: 1_735_689_600)
        for (dir, process, socket) in [("sidecar-keys", s.sidecar, s.sidecarSocket), ("gateway-keys", s.gateway, s.gatewaySocket)] {
            try Data(ring.utf8).write(to: URL(fileURLWithPath: "\(s.dir)/\(dir)/ring.json"))
            let before = Self.value(try s.curl(socket, "GET", "/metrics").1, "vault_reload_last_timestamp_seconds ") ?? 0
            kill(try #require(process).processIdentifier, SIGHUP)
            var text = ""
            for _ in 0..<100 {
                text = try s.curl(socket, "GET", "/metrics").1
                if (Self.value(text, "vault_reload_last_timestamp_seconds ") ?? 0) > before { break }
                usleep(50_000)
            }
            #expect(Self.value(text, "vault_reload_last_success ") == 1, "\(dir): \(text)")
            let age = try #require(Self.value(text, series), "\(dir): \(text)")
            #expect(abs(age - Date().timeIntervalSince(made)) < 3600, "\(dir): \(age)")
        }
        // The gateway refuses a ring it cannot read and says so in its metrics.
        try Data("{not a ring".utf8).write(to: URL(fileURLWithPath: "\(s.dir)/gateway-keys/ring.json"))
        kill(try #require(s.gateway).processIdentifier, SIGHUP)
        for _ in 0..<100 where !s.gatewayLogText.contains("key reload failed") { usleep(50_000) }
        let text = try s.curl(s.gatewaySocket, "GET", "/metrics").1
        #expect(Self.value(text, "vault_reload_last_success ") == 0, "\(text)")
        #expect(text.contains(series), "the keys in use are kept: \(text)")
    }
}
