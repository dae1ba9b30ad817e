import Foundation
import Store
import Testing

/// The velocity window reads of concurrent requests share statements (`CoalescedReads`, on by
/// default on PostgreSQL), and each read still gets exactly what a read of its own would: its own
/// counters, each from its own first bucket on. Run on both stores with coalescing forced on.
@Suite struct CoalescedVelocityReadsTests {
    typealias Counter = VelocityCounters.Counter

    /// A comparable form of a read's answer.
    static func normal(_ b: [Counter: [(bucket: Int64, count: Int)]]) -> [String: [[Int64]]] {
        var out: [String: [[Int64]]] = [:]
        for (c, rows) in b { out["\(c.scope)|\(c.key)|\(c.action)|\(c.kind)|\(c.width)"] = rows.map { [$0.bucket, Int64($0.count)] }.sorted { $0[0] < $1[0] } }
        return out
    }

    @Test(arguments: Backend.available)
    func concurrentReadsShareStatementsAndEachGetsItsOwnWindow(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let plain = VelocityCounters(database: h.db, coalesce: false)
        let coalesced = VelocityCounters(database: h.db, coalesce: true)
        #expect(plain.coalescedStatements == nil && coalesced.coalescedStatements == 0)
        #expect(VelocityCounters(database: h.db).coalescedStatements == (backend == .postgres ? 0 : nil))

        // Five BINs with six one-minute buckets each, counts that tell the buckets apart.
        let t: Int64 = 1_800_000_000 - 1_800_000_000 % 60
        let counter = { (key: Int) in Counter(scope: "bin", key: "41111\(key)", action: "pay", kind: "declines", width: 60) }
        for key in 0..<5 {
            for b in 0..<6 {
                _ = try await h.db.write(
                    "INSERT INTO vault_velocity (scope, key, action, kind, width, bucket, count) VALUES ('bin', ?, 'pay', 'declines', 60, ?, ?)",
                    ["41111\(key)", t - Int64(60 * b), 10 * key + b + 1])
            }
        }
        // Forty reads: two BINs each (one of them sometimes without any row) from various starts.
        let reads: [[Counter: Int64]] = (0..<40).map { i in
            var since = [counter(i % 5): t - Int64(60 * (i % 6))]
            since[counter(i % 7)] = min(since[counter(i % 7)] ?? .max, t - Int64(60 * (i % 4)))
            return since
        }
        let answers = try await withThrowingTaskGroup(of: (Int, [String: [[Int64]]]).self) { group in
            for (i, since) in reads.enumerated() { group.addTask { (i, Self.normal(try await coalesced.buckets(since))) } }
            var all: [Int: [String: [[Int64]]]] = [:]
            for try await (i, answer) in group { all[i] = answer }
            return all
        }
        for (i, since) in reads.enumerated() {
            let own = Self.normal(try await plain.buckets(since))
            #expect(answers[i] == own, "read \(i)")
            // Each counter from its own start: key k from bucket t - 60 * (i % 6) on has i % 6 + 1 buckets.
            #expect(own["bin|41111\(i % 5)|pay|declines|60"]?.count == (i % 7 == i % 5 ? max(i % 6, i % 4) : i % 6) + 1, "read \(i)")
        }
        let statements = try #require(coalesced.coalescedStatements)
        #expect(statements >= 1 && statements < reads.count, "\(statements) statements for \(reads.count) concurrent reads")
        // A read alone goes at once, in a statement of its own.
        #expect(Self.normal(try await coalesced.buckets([counter(1): t])) == ["bin|411111|pay|declines|60": [[t, 11]]])
        #expect(coalesced.coalescedStatements == statements + 1)
    }
}
