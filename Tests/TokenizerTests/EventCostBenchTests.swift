import Foundation
import Store
import Testing
import Tokenizer
import VaultCrypto

/// What the events outbox costs the tokenize path's store write (docs/events.md): 20,000 tokens
/// inserted through the token store's group commit by 64 concurrent callers, with the store's
/// `token.created` trigger and with it dropped, on each backend, in one run. Prints the rates and
/// their ratio; asserts only that every token was stored (no timed assertion). Behind an env
/// flag:
///
///     VAULT_EVENT_BENCH=1 scripts/test --filter EventCostBenchTests
@Suite struct EventCostBenchTests {
    static let enabled = ProcessInfo.processInfo.environment["VAULT_EVENT_BENCH"] == "1"

    func rate(_ backend: Backend, trigger: Bool, tokens n: Int) async throws -> Double {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        if !trigger {
            if backend == .postgres {
                _ = try await h.db.write("DROP TRIGGER vault_events_tokens_insert ON vault_tokens")
            } else {
                _ = try await h.db.write("DROP TRIGGER vault_events_tokens_insert")
            }
        }
        let envelope = try sampleEnvelope()
        let records = (0..<n).map { _ in record(envelope, at: Date()) }
        let store = h.store
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for lane in 0..<64 {
                group.addTask {
                    for i in stride(from: lane, to: n, by: 64) { try await store.insert(records[i]) }
                }
            }
            try await group.waitForAll()
        }
        let d = ContinuousClock.now - start
        let seconds = Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
        let stored = try await h.db.query("SELECT COUNT(*) FROM vault_tokens").first?.int(0)
        let events = try await h.db.query("SELECT COUNT(*) FROM vault_events").first?.int(0)
        #expect(stored == n && events == (trigger ? n : 0))
        return Double(n) / seconds
    }

    @Test(.enabled(if: enabled), arguments: Backend.available)
    func tokenInsertsWithAndWithoutTheirEvent(_ backend: Backend) async throws {
        var with: [Double] = [], without: [Double] = []
        for _ in 0..<3 {
            without.append(try await rate(backend, trigger: false, tokens: 20_000))
            with.append(try await rate(backend, trigger: true, tokens: 20_000))
        }
        let w = with.sorted()[1], wo = without.sorted()[1]
        print(String(format: "event-bench %@: %.0f tokens/s with token.created events, %.0f/s without, ratio %.2f (medians of 3)", backend.rawValue, w, wo, w / wo))
    }

    /// WAL frames (pages written) per token on SQLite, with the gateway's fingerprint on every row
    /// as a sidecar with a gateway stores it: 2,000 tokens one commit each, then 2,000 in commits
    /// of 8 (group commit). A count, not a time: what each commit writes before its fsync.
    @Test(.enabled(if: enabled))
    func walFramesPerToken() async throws {
        for lanes in [1, 8] {
            let h = try await Backend.sqlite.make()
            defer { Task { await h.cleanup() } }
            _ = try await h.db.write("PRAGMA wal_autocheckpoint = 0")
            let envelope = try sampleEnvelope()
            let records = (0..<2_000).map { _ in
                var r = record(envelope, at: Date())
                r.fingerprint = "fp1_0123456789abcdef_" + RandomID.make(prefix: "").utf8.map { String(format: "%02x", $0) }.joined().prefix(64)
                return r
            }
            let wal = h.files[1]
            let before = (try? FileManager.default.attributesOfItem(atPath: wal)[.size] as? Int) ?? 0
            let store = h.store
            try await withThrowingTaskGroup(of: Void.self) { group in
                for lane in 0..<lanes {
                    group.addTask { for i in stride(from: lane, to: records.count, by: lanes) { try await store.insert(records[i]) } }
                }
                try await group.waitForAll()
            }
            let after = (try? FileManager.default.attributesOfItem(atPath: wal)[.size] as? Int) ?? 0
            let frames = Double(after - before) / Double(4096 + 24)
            print(String(format: "wal-frames lanes=%d: %.2f frames per token (%.0f frames for %d tokens)", lanes, frames / Double(records.count), frames, records.count))
            #expect(try await h.store.count() == records.count)
        }
    }
}
