import Foundation
import Payments
import Store
import Testing
import Tokenizer
import VaultCrypto

/// Metadata on both backends (README "Metadata"): stored with tokens, payments, refunds and
/// customers, read back with the object, searched by exact `key=value` with cursor pages, merged
/// by a customer update, and forgotten (its search rows) when the object is deleted.
@Suite struct MetadataSuiteTests {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    /// `vault_metadata` rows of one object.
    static func rows(_ db: Database, _ owner: Metadata.Owner, _ id: String) async throws -> [String: String] {
        var out: [String: String] = [:]
        for r in try await db.query("SELECT key, value FROM vault_metadata WHERE object_type = ? AND object_id = ?", [owner.rawValue, id]) {
            out[try r.string(0)] = try r.string(1)
        }
        return out
    }

    @Test(arguments: Backend.available)
    func tokensKeepAndFindTheirMetadata(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let store = h.store
        var made: [(Date, String)] = []
        for i in 0..<13 {
            var r = record(try sampleEnvelope(), at: Self.t0.addingTimeInterval(Double(i)), ttl: 86_400)
            // Every third one has order=o-7; the others another order, or none at all.
            if i % 3 == 0 { r.metadata = Metadata(["order": "o-7", "n": "\(i)"]) } else if i % 3 == 1 { r.metadata = Metadata(["order": "p-\(i)"]) }
            try await store.insert(r)
            if i % 3 == 0 { made.append((r.createdAt, r.token)) }
            let got = try #require(try await store.get(r.token, now: Self.t0))
            #expect(got.metadata == r.metadata, "read back as stored (none: empty)")
            #expect(try await Self.rows(h.db, .token, r.token) == r.metadata.pairs)
        }
        let found = try await ListingSuiteTests.walk(limit: 2, id: \TokenRecord.token) { q in
            try await store.list(q, fingerprint: nil, metadata: [("order", "o-7")], now: Self.t0)
        }
        #expect(found.ids == ListingSuiteTests.newestFirst(made) && found.sizes == [2, 2, 1])
        let both = try await store.list(ListQuery(), fingerprint: nil, metadata: [("n", "3"), ("order", "o-7")], now: Self.t0)
        guard case .page(let items, false) = both else { Issue.record("one page"); return }
        #expect(items.map(\.token) == [made[1].1], "every pair must match")
        let none = try await store.list(ListQuery(), fingerprint: nil, metadata: [("order", "O-7")], now: Self.t0)
        #expect(none == .page([], hasMore: false), "exact match only")

        // Deleting a token (or its purge) deletes its metadata's search rows.
        #expect(try await store.delete(made[0].1))
        #expect(try await Self.rows(h.db, .token, made[0].1).isEmpty)
        _ = try await store.purgeExpired(now: Self.t0.addingTimeInterval(10 * 86_400))
        #expect(try await h.db.query("SELECT COUNT(*) FROM vault_metadata").first?.int(0) == 0)
    }

    @Test(arguments: Backend.available)
    func paymentsAndRefundsKeepAndFindTheirMetadata(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let store = try #require(try await h.payments() as? SQLPaymentStore)
        var tagged: [(Date, String)] = []
        var paid: [String] = []
        for i in 0..<7 {
            let t = Self.t0.addingTimeInterval(Double(i))
            let p = PaymentRecord(
                id: RandomID.make(prefix: "pay_"), scope: "uid:1", idempotencyKey: "k\(i)", request: "token=tok_x&amount=100&currency=EUR",
                token: RandomID.make(prefix: "tok_"), singleUse: false, amount: 100, currency: "EUR", createdAt: t,
                metadata: i.isMultiple(of: 2) ? Metadata(["order": "123", "café": "crème ☕"]) : Metadata())
            #expect(try await store.begin(p) == .created)
            #expect(try await store.finish(p.id, status: .succeeded, code: nil, reference: "r", nextAction: nil, now: t))
            #expect(try await store.get(p.id)?.metadata == p.metadata)
            if i.isMultiple(of: 2) { tagged.append((t, p.id)) }
            paid.append(p.id)
        }
        let found = try await ListingSuiteTests.walk(limit: 3, id: \PaymentRecord.id) { q in
            try await store.list(q, status: .succeeded, customer: nil, metadata: [("order", "123")])
        }
        #expect(found.ids == ListingSuiteTests.newestFirst(tagged) && found.more == [true, false])
        let unicode = try await store.list(ListQuery(limit: 100), status: nil, customer: nil, metadata: [("café", "crème ☕")])
        guard case .page(let items, _) = unicode else { Issue.record("a page"); return }
        #expect(items.count == tagged.count && items.allSatisfy { $0.metadata.pairs["order"] == "123" })

        // A replay of a payment's key stores nothing more.
        let replay = PaymentRecord(
            id: RandomID.make(prefix: "pay_"), scope: "uid:1", idempotencyKey: "k0", request: "token=tok_x&amount=100&currency=EUR",
            token: "tok_x", singleUse: false, amount: 100, currency: "EUR", createdAt: Self.t0, metadata: Metadata(["order": "999"]))
        guard case .existing(let first) = try await store.begin(replay) else { Issue.record("a replay"); return }
        #expect(first.metadata.pairs["order"] == "123")
        #expect(try await Self.rows(h.db, .payment, replay.id).isEmpty)

        var refunds: [(Date, String)] = []
        for (i, payment) in paid.enumerated() {
            let t = Self.t0.addingTimeInterval(100 + Double(i))
            let op = PaymentOperation(
                id: RandomID.make(prefix: "re_"), paymentID: payment, kind: .refund, scope: "uid:1", idempotencyKey: "r\(i)",
                request: "refund=\(payment)", amount: 10, currency: "EUR", createdAt: t,
                metadata: i < 5 ? Metadata(["reason": "damaged"]) : Metadata(["reason": "late"]))
            #expect(try await store.beginOperation(op, now: t) == .created)
            #expect(try await store.operation(op.id)?.metadata == op.metadata)
            if i < 5 { refunds.append((t, op.id)) }
        }
        let damaged = try await ListingSuiteTests.walk(limit: 2, id: \PaymentOperation.id) { q in
            try await store.listRefunds(q, status: nil, payment: nil, metadata: [("reason", "damaged")])
        }
        #expect(damaged.ids == ListingSuiteTests.newestFirst(refunds) && damaged.sizes == [2, 2, 1])
    }

    @Test(arguments: Backend.available)
    func customersKeepMergeAndForgetTheirMetadata(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let store = try await h.customers()
        var vip: [(Date, String)] = []
        for i in 0..<5 {
            let c = CustomerRecord(
                id: RandomID.make(prefix: "cus_"), reference: "ref-\(i)", createdAt: Self.t0.addingTimeInterval(Double(i)),
                metadata: Metadata(["tier": i < 3 ? "vip" : "basic", "crm": "c\(i)"]))
            #expect(try await store.create(c, claim: nil, uniqueReference: false) == .created)
            #expect(try await store.customer(c.id) == c)
            if i < 3 { vip.append((c.createdAt, c.id)) }
        }
        let found = try await ListingSuiteTests.walk(limit: 2, id: \CustomerRecord.id) { q in try await store.list(q, metadata: [("tier", "vip")]) }
        #expect(found.ids == ListingSuiteTests.newestFirst(vip))

        // An update merges: "" removes a key, a value sets one, the others stay.
        let id = vip[0].1
        #expect(try await store.update(id, CustomerChange(metadata: Metadata(["tier": "", "region": "eu"])), uniqueReference: false) == .updated)
        #expect(try await store.customer(id)?.metadata == Metadata(["crm": "c0", "region": "eu"]))
        #expect(try await Self.rows(h.db, .customer, id) == ["crm": "c0", "region": "eu"])
        let stillVIP = try await store.list(ListQuery(), metadata: [("tier", "vip")])
        guard case .page(let items, _) = stillVIP else { Issue.record("a page"); return }
        #expect(!items.map(\.id).contains(id), "the removed pair is no longer found")

        // Past 50 pairs after the merge: refused, nothing changed.
        var many: [String: String] = [:]
        for k in 0..<49 { many["k\(k)"] = "v" }
        #expect(try await store.update(id, CustomerChange(reference: .some("new"), metadata: Metadata(many)), uniqueReference: false) == .metadataFull)
        let unchanged = try #require(try await store.customer(id))
        #expect(unchanged.metadata == Metadata(["crm": "c0", "region": "eu"]) && unchanged.reference == "ref-0")

        // Deleting a customer deletes its metadata rows (erasure).
        guard case .erased = try await store.delete(id) else { Issue.record("erased"); return }
        #expect(try await Self.rows(h.db, .customer, id).isEmpty)
    }

    /// The search walks `vault_metadata_search` (SQLite's plan, the index both backends have).
    @Test func searchUsesTheMetadataIndex() async throws {
        let h = try await Backend.sqlite.make()
        defer { Task { await h.cleanup() } }
        for table in [("vault_payments", "id", "payment"), ("vault_tokens", "token", "token")] {
            let plan = try await h.db.query("""
                EXPLAIN QUERY PLAN SELECT \(table.1) FROM \(table.0)
                WHERE \(table.1) IN (SELECT object_id FROM vault_metadata WHERE object_type = ? AND key = ? AND value = ?)
                ORDER BY created_at DESC, \(table.1) DESC LIMIT 11
                """, [table.2, "order", "123"]).map { (r) throws(StoreError) in try r.string(3) }
            #expect(plan.contains { $0.contains("vault_metadata_search") }, "\(plan)")
        }
    }
}
