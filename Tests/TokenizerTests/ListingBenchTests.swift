import Events
import Foundation
import Payments
import Store
import Testing
import Tokenizer
import VaultCrypto

/// Lists over 10,000 objects on each backend, timed per page (README "Listing and search"):
/// every page of 10 of 10,000 payments, pages of a status filter and of a customer, and a token
/// search by fingerprint (1,000 of 10,000 tokens share one), and the 20,000 events those rows made. Prints p50 and p99 per page request;
/// asserts only what the lists return (no timed assertion). Behind an env flag (it takes a minute):
///
///     VAULT_LIST_BENCH=1 scripts/test --filter ListingBenchTests
@Suite struct ListingBenchTests {
    static let enabled = ProcessInfo.processInfo.environment["VAULT_LIST_BENCH"] == "1"

    @Test(.enabled(if: enabled), arguments: Backend.available)
    func tenThousandObjects(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let payments = try await h.payments()
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        let customer = "cus_" + String(repeating: "b", count: 26)
        let n = 10_000
        // Rows go in by batches (the stores' own inserts would fsync each).
        let rows: [[SQLValue]] = (0..<n).map { i in
            let token = RandomID.make(prefix: "tok_")
            let request = i % 10 == 0 ? "customer=\(customer)&amount=100&currency=EUR" : "token=\(token)&amount=100&currency=EUR"
            let at = t0.addingTimeInterval(Double(i) / 4)
            return [.text(RandomID.make(prefix: "pay_")), .text("uid:1000"), .text("k\(i)"), .text(request), .text(token), .bool(false),
                    .int(100), .text("EUR"), .text(i % 4 == 0 ? "declined" : "succeeded"), at.sqlValue, at.sqlValue,
                    (i % 10 == 0 ? .text(customer) : .null)]
        }
        for chunk in stride(from: 0, to: n, by: 1000) {
            _ = try await h.db.batch("""
                INSERT INTO vault_payments (id, scope, idempotency_key, request, token, single_use, amount, currency, status, created_at,
                                            updated_at, customer) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, Array(rows[chunk..<min(n, chunk + 1000)]))
        }
        let fingerprint = String(repeating: "ef", count: 32)
        // One real envelope (without CVC) for every token row: what a page parses is real.
        let envelope = try sampleEnvelope().droppingCVC().json
        let tokenRows: [[SQLValue]] = (0..<n).map { i in
            let at = Date().addingTimeInterval(Double(i) / 4 - 3000)
            return [.text(RandomID.make(prefix: "tok_")), .text(envelope), .text("visa"), .text("42424242"), .text("4242"),
                    i % 10 == 0 ? .text(fingerprint) : .null, at.sqlValue, at.addingTimeInterval(86400).sqlValue, .bool(true)]
        }
        for chunk in stride(from: 0, to: n, by: 1000) {
            _ = try await h.db.batch("""
                INSERT INTO vault_tokens (token, envelope, brand, bin, last4, fingerprint, created_at, expires_at, single_use)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, Array(tokenRows[chunk..<min(n, chunk + 1000)]))
        }
        func timed<T>(_ label: String, expect count: Int, id: (T) -> String, _ page: (ListQuery) async throws -> ListPage<T>) async throws {
            var q = ListQuery(limit: 10), times: [Double] = [], total = 0
            while true {
                let start = ContinuousClock.now
                guard case .page(let items, let more) = try await page(q) else { Issue.record("cursor lost"); return }
                let d = ContinuousClock.now - start
                times.append(Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15)
                total += items.count
                guard more, let last = items.last else { break }
                q.startingAfter = id(last)
            }
            #expect(total == count, "\(label)")
            times.sort()
            let p50 = times[times.count / 2], p99 = times[min(times.count - 1, Int(Double(times.count) * 0.99))]
            print(String(format: "list-bench %@ %@: %d pages of 10, p50 %.2f ms, p99 %.2f ms", backend.rawValue, label, times.count, p50, p99))
        }
        try await timed("payments (all)", expect: n, id: \PaymentRecord.id) { q in try await payments.list(q, status: nil, customer: nil) }
        try await timed("payments status=declined", expect: n / 4, id: \PaymentRecord.id) { q in
            try await payments.list(q, status: .declined, customer: nil)
        }
        try await timed("payments customer=…", expect: n / 10, id: \PaymentRecord.id) { q in
            try await payments.list(q, status: nil, customer: customer)
        }
        try await timed("tokens (all)", expect: n, id: \TokenRecord.token) { q in try await h.store.list(q, fingerprint: nil, now: Date()) }
        try await timed("tokens fingerprint=…", expect: n / 10, id: \TokenRecord.token) { q in
            try await h.store.list(q, fingerprint: fingerprint, now: Date())
        }
        // The store's triggers wrote an event per row above: 10,000 payment events, 10,000 token.created.
        let events = EventStore(database: h.db)
        try await timed("events (all)", expect: 2 * n, id: \EventRecord.id) { q in try await events.list(q, type: nil, object: nil) }
        try await timed("events type=payment.*", expect: n, id: \EventRecord.id) { q in try await events.list(q, type: "payment.*", object: nil) }
        try await timed("events type=payment.declined", expect: n / 4, id: \EventRecord.id) { q in
            try await events.list(q, type: "payment.declined", object: nil)
        }
    }
}
