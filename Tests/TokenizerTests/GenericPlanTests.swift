import Foundation
@testable import Payments
import Store
import Testing
@testable import Tokenizer

/// The hot reads of a payment and a token, as PostgreSQL plans them once prepared
/// (`PostgresStatements`): after its first runs a prepared statement may get one generic plan,
/// made for any parameter and kept while the table grows. Made on a new store of a few rows, it must
/// still be an index lookup. Issue 16 found the replay check's `scope IN (…)` form planned as a
/// sequential scan there (547 µs a payment after 5,000 payments); this fails on that form.
@Suite("Generic plans on a new PostgreSQL store", .enabled(if: Backend.postgresSocket != nil))
struct GenericPlanTests {
    /// (statement with `?` placeholders, the parameters' types, one value per parameter)
    static let statements: [(sql: String, types: [String], values: [String])] = [
        (SQLPaymentStore.findSQL(scopes: 2), ["text", "text", "text", "text"], ["'uid:0'", "'order-1'", "'global'", "'order-1'"]),
        (SQLPaymentStore.findSQL(scopes: 1), ["text", "text"], ["'uid:0'", "'order-1'"]),
        (SQLPaymentStore.getSQL, ["text"], ["'pay_x'"]),
        (SQLTokenStore.getSQL, ["text", "bigint"], ["'tok_x'", "0"]),
    ]

    /// `?` → `$1`, `$2`, … (the statements here have no quoted `?`).
    static func numbered(_ sql: String) -> String {
        var out = "", n = 0
        for ch in sql {
            if ch == "?" { n += 1; out += "$\(n)" } else { out.append(ch) }
        }
        return out
    }

    @Test("the hot reads' generic plans on a new store are index lookups, not sequential scans")
    func hotReadsUseTheirIndexes() async throws {
        let h = try await Backend.postgres.make()
        defer { Task { await h.cleanup() } }
        // A few rows, one page each table, not yet analyzed: a new store's first minutes. (On a
        // table of no pages at all the planner assumes ten, and even the `IN` form got its index.)
        let payments = try await h.payments()
        for i in 0..<10 { #expect(try await payments.begin(PaymentStoreSuiteTests.intent(key: "order-\(i)")) == .created) }
        let envelope = try sampleEnvelope()
        for _ in 0..<10 { try await h.store.insert(record(envelope)) }
        for (i, s) in Self.statements.enumerated() {
            let plan = try await h.db.transaction { (t) throws(StoreError) -> [String] in
                _ = try await t.query("SET LOCAL plan_cache_mode = force_generic_plan")
                _ = try await t.query("PREPARE vault_plan_probe_\(i) (\(s.types.joined(separator: ", "))) AS \(Self.numbered(s.sql))")
                let lines = try await t.query("EXPLAIN EXECUTE vault_plan_probe_\(i) (\(s.values.joined(separator: ", ")))").map { (r) throws(StoreError) in try r.string(0) }
                _ = try await t.query("DEALLOCATE vault_plan_probe_\(i)")
                return lines
            }
            let text = plan.joined(separator: "\n")
            #expect(text.contains("Index Scan") || text.contains("Index Only Scan"), "\(s.sql)\n\(text)")
            #expect(!text.contains("Seq Scan"), "\(s.sql)\n\(text)")
        }
    }
}
