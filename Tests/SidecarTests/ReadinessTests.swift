import Foundation
import Hummingbird
import HummingbirdTesting
import Sidecar
import SocketHTTP
import Testing
import Tokenizer
import VaultCrypto

/// `GET /v1/health/ready` through the router, and `Readiness` itself: a check that does not answer
/// fails at its timeout, results are reused while fresh, the 503 body names the failed checks.
@Suite struct ReadinessTests {
    /// Counts how often a probe ran.
    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var n = 0
        func next() -> Int { lock.withLock { n += 1; return n } }
        var count: Int { lock.withLock { n } }
    }

    @Test func sidecarIsReadyOverSQLite() async throws {
        let dir = NSTemporaryDirectory() + "vault-ready-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let key = try PublicKey(rawBytes: Array(repeating: 7, count: 32))
        let tokenizer = Tokenizer(store: try await sqliteTokenStore(dir + "/t.sqlite"), primaryKey: key)
        let router = Router()
        SidecarRoutes(tokenizer: tokenizer).register(on: router)
        try await Application(router: router).test(.router) { client in
            try await client.execute(uri: "/v1/health/ready", method: .get) { r in
                #expect(r.status == .ok)
                #expect(String(buffer: r.body) == #"{"status":"ready","checks":{"store":{"status":"ok"},"keys":{"status":"ok","detail":"primary \#(key.kid), 1 kids"}}}"#)
            }
        }
    }

    @Test func aCheckThatDoesNotAnswerFailsAtItsTimeout() async throws {
        let readiness = Readiness([
            ReadinessCheck("store") { .ok(nil) },
            ReadinessCheck("gateway") {
                // Never answers in time (cancelled once the timeout has answered for it).
                try? await Task.sleep(for: .seconds(3600))
                return .ok(nil)
            },
        ], timeout: .milliseconds(200), maxAge: .zero)
        let report = await readiness.report()
        #expect(!report.isReady)
        #expect(report.results.map(\.name) == ["store", "gateway"])
        #expect(report.results[0].outcome == .ok(nil))
        #expect(report.results[1].outcome == .failed("no answer within 0.2 s"))
        #expect(report.failures == "gateway: no answer within 0.2 s")
    }

    @Test func notReadyIs503NotReadyWithEveryCheck() async throws {
        let readiness = Readiness([
            ReadinessCheck("store") { .failed("the \"store\" is gone") },
            ReadinessCheck("keys") { .ok("primary 0123456789abcdef, 1 kids") },
        ])
        let router = Router()
        router.get("/ready") { _, _ in await readiness.response() }
        try await Application(router: router).test(.router) { client in
            try await client.execute(uri: "/ready", method: .get) { r in
                #expect(Int(r.status.code) == ErrorCode.notReady.status)
                #expect(String(buffer: r.body) == #"{"error":{"code":"NOT_READY","message":"not ready: store: the \"store\" is gone"},"status":"not_ready","checks":{"store":{"status":"failed","reason":"the \"store\" is gone"},"keys":{"status":"ok","detail":"primary 0123456789abcdef, 1 kids"}}}"#)
            }
        }
    }

    @Test func aFreshResultIsReusedAndAStaleOneRunsTheChecksAgain() async throws {
        let counter = Counter()
        let cached = Readiness([ReadinessCheck("store") { .ok("round \(counter.next())") }], maxAge: .seconds(3600))
        let first = await cached.report(), second = await cached.report()
        #expect(first == second && counter.count == 1)

        let fresh = Counter()
        let uncached = Readiness([ReadinessCheck("store") { .ok("round \(fresh.next())") }], maxAge: .zero)
        let a = await uncached.report(), b = await uncached.report()
        #expect(a.results[0].outcome == .ok("round 1") && b.results[0].outcome == .ok("round 2"))
    }

    /// Concurrent requests while a round runs share it: one round, one answer.
    @Test func concurrentRequestsShareOneRound() async throws {
        let counter = Counter()
        let readiness = Readiness([
            ReadinessCheck("store") {
                let n = counter.next()
                try? await Task.sleep(for: .milliseconds(100))
                return .ok("round \(n)")
            }
        ], maxAge: .seconds(3600))
        let reports = await withTaskGroup(of: Readiness.Report.self) { group in
            for _ in 0..<8 { group.addTask { await readiness.report() } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(counter.count == 1 && Set(reports.map { "\($0.results[0].outcome)" }).count == 1)
    }
}
