import Audit
import CardRules
import Foundation
import Hummingbird
import HummingbirdTesting
import Sidecar
import SocketHTTP
import Testing
import Tokenizer
import VaultCrypto

/// `GET /metrics`: Prometheus text with request, error and token counters; labels never carry
/// what a caller sent.
@Suite struct MetricsTests {
    @Test func countsRequestsErrorsAndTokensWithoutCallerData() async throws {
        let dir = NSTemporaryDirectory() + "vault-metrics-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try await sqliteTokenStore(dir + "/t.sqlite")
        let tokenizer = Tokenizer(
            store: store, primaryKey: try PublicKey(rawBytes: Array(repeating: 9, count: 32)))
        let metrics = SidecarMetrics()
        let router = Router()
        router.add(middleware: MetricsMiddleware(metrics: metrics.server))
        SidecarRoutes(tokenizer: tokenizer, metrics: metrics).register(on: router)
        let json: HTTPFields = [.contentType: "application/json"]
        try await Application(router: router).test(.router) { client in
            let card = #"{"card":{"number":"4111111111111111","exp_month":12,"exp_year":2030,"cvc":"123"}}"#
            for _ in 0..<3 {
                try await client.execute(uri: "/v1/tokens", method: .post, headers: json, body: ByteBuffer(string: card)) { r in
                    #expect(r.status == .created)
                }
            }
            // Caller data in the path, in a bad body and in a custom method must not become labels.
            try await client.execute(uri: "/v1/tokens/4111111111111111", method: .get) { r in #expect(r.status == .notFound) }
            try await client.execute(uri: "/4111111111111111", method: .get) { r in #expect(r.status == .notFound) }
            try await client.execute(
                uri: "/v1/tokens", method: .post, headers: json,
                body: ByteBuffer(string: #"{"card":{"number":"4111111111111112","exp_month":12,"exp_year":2030}}"#)
            ) { r in #expect(r.status == .unprocessableContent) }
            try await client.execute(uri: "/v1/tokens", method: HTTPRequest.Method("X4111111111111111")!, headers: json) { _ in }

            let text = try await client.execute(uri: "/metrics", method: .get) { r in
                #expect(r.status == .ok)
                #expect(r.headers[.contentType]?.hasPrefix("text/plain; version=0.0.4") == true)
                return String(buffer: r.body)
            }
            #expect(text.contains(#"vault_tokens_created_total{source="card"} 3"#), "\(text)")
            #expect(text.contains(#"vault_errors_total{code="LUHN_CHECK_FAILED"} 1"#))
            #expect(text.contains(#"vault_errors_total{code="TOKEN_NOT_FOUND"} 1"#))
            let created = text.split(separator: "\n").first { $0.hasPrefix("vault_http_requests_total{") && $0.contains(#"status="201""#) }
            #expect(created?.contains(#"method="POST""#) == true && created?.hasSuffix(" 3") == true, "\(created ?? "none")")
            #expect(text.contains(#"route="NotFound""#))
            #expect(text.contains(#"method="OTHER""#))
            #expect(text.contains("vault_http_request_duration_seconds_bucket"))
            for digits in ["4111111111111111", "4111111111111112", "111111"] {
                #expect(!text.contains(digits), "metrics carry caller data")
            }
        }
    }

    /// The request log (`--log-requests`) and the metrics write the method through one label:
    /// a method token made of card digits never reaches a log line or a label as sent.
    @Test func methodsOutsideTheStandardSetAreWrittenAsOther() {
        #expect(MethodLabel.label("POST") == "POST" && MethodLabel.label("DELETE") == "DELETE")
        #expect(MethodLabel.label("4242424242424242") == "OTHER")
        #expect(MethodLabel.label("post") == "OTHER")
    }

    @Test func sweeperPurgesAreCounted() async throws {
        let dir = NSTemporaryDirectory() + "vault-metrics-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try await sqliteTokenStore(dir + "/t.sqlite")
        let metrics = SidecarMetrics()
        final class Clock: @unchecked Sendable { var now = Date() }
        let clock = Clock()
        let tokenizer = Tokenizer(
            store: store, primaryKey: try PublicKey(rawBytes: Array(repeating: 9, count: 32)),
            policy: TokenPolicy(tokenTTL: 60, cvcTTL: 10), now: { clock.now })
        let card = try CardData(
            number: SecureBytes(Array("4242424242424242".utf8)), expiry: CardExpiry(month: 12, year: 2030), cvc: SecureBytes(Array("123".utf8)))
        _ = try await tokenizer.tokenize(card)
        _ = try await tokenizer.tokenize(card)
        clock.now = clock.now.addingTimeInterval(30)
        let sweeper = TokenSweeper(tokenizer: tokenizer, logger: .init(label: "test"), metrics: metrics)
        #expect(await sweeper.sweep() == PurgeResult(tokensDeleted: 0, cvcsDropped: 2))
        let text = String(decoding: metrics.exposition(), as: UTF8.self)
        #expect(text.contains("vault_sweeper_cvcs_dropped_total 2"), "\(text)")
        #expect(text.contains("vault_sweeper_tokens_deleted_total 0"))
    }

    /// What both servers export beside requests: build info, the primary key's age (from the
    /// time given, at each scrape; a new primary replaces the old kid's series), the last
    /// reload's result and time, and audit write failures read from the audit log.
    @Test func buildInfoKeyAgeReloadsAndAuditFailures() throws {
        final class Clock: @unchecked Sendable { var now = Date(timeIntervalSince1970: 1_800_000_000) }
        let clock = Clock()
        let metrics = ServerMetrics(component: "gateway", now: { clock.now })
        func text() -> String { String(decoding: metrics.exposition(), as: UTF8.self) }
        #expect(text().contains(#"vault_build_info{version="\#(VaultVersion.string)",component="gateway"} 1"#), "\(text())")
        #expect(text().contains("vault_reload_last_success 1") && text().contains("vault_reload_last_timestamp_seconds 1800000000"), "\(text())")
        #expect(text().contains("vault_audit_write_failures_total 0"))
        #expect(text().contains(#"vault_store_errors_total{code="STORE_UNAVAILABLE"} 0"#))

        metrics.primaryKey(kid: "0123456789abcdef", created: clock.now.addingTimeInterval(-86400))
        #expect(text().contains(#"vault_key_age_seconds{kid="0123456789abcdef",role="primary"} 86400"#), "\(text())")
        clock.now = clock.now.addingTimeInterval(60)
        #expect(text().contains(#"vault_key_age_seconds{kid="0123456789abcdef",role="primary"} 86460"#))
        metrics.primaryKey(kid: "fedcba9876543210", created: clock.now)
        #expect(text().contains(#"vault_key_age_seconds{kid="fedcba9876543210",role="primary"} 0"#))
        #expect(!text().contains("0123456789abcdef"))

        clock.now = clock.now.addingTimeInterval(5)
        metrics.reloaded(success: false)
        #expect(text().contains("vault_reload_last_success 0") && text().contains("vault_reload_last_timestamp_seconds 1800000065"), "\(text())")
        metrics.reloaded(success: true)
        #expect(text().contains("vault_reload_last_success 1"))

        let dir = NSTemporaryDirectory() + "vault-metrics-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let audit = try AuditLog(path: dir + "/audit.jsonl", process: "gateway")
        metrics.auditLog(audit)
        #expect(audit.record(AuditEvent(action: "key_reload", uid: 0)))
        audit.close()
        // Records after close fail (AUDIT_LOG_CLOSED): counted, and exported at the next scrape.
        #expect(!audit.record(AuditEvent(action: "key_reload", uid: 0)) && !audit.record(AuditEvent(action: "key_reload", uid: 0)))
        #expect(text().contains("vault_audit_write_failures_total 2"), "\(text())")
        #expect(text().contains("vault_audit_write_failures_total 2"))
    }
}
