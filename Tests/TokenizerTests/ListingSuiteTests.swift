import Foundation
import Payments
import Store
import Testing
import Tokenizer
import VaultCrypto

/// Lists on both backends (README "Listing and search"): newest first (`created_at`, then id),
/// cursor pages without duplicates or gaps, `has_more`, filters, and a cursor naming nothing.
@Suite struct ListingSuiteTests {
    /// Every page of a list of `limit`, following `starting_after`: the pages' sizes, their
    /// `hasMore`, and the ids in order.
    static func walk<T>(
        limit: Int = 10, _ base: ListQuery = ListQuery(), id: (T) -> String, _ page: (ListQuery) async throws -> ListPage<T>
    ) async throws -> (sizes: [Int], more: [Bool], ids: [String]) {
        var q = base
        q.limit = limit
        var sizes: [Int] = [], more: [Bool] = [], ids: [String] = []
        while true {
            guard case .page(let items, let hasMore) = try await page(q) else {
                Issue.record("a cursor of the previous page was unknown")
                return (sizes, more, ids)
            }
            sizes.append(items.count)
            more.append(hasMore)
            ids += items.map(id)
            guard hasMore, let last = items.last else { return (sizes, more, ids) }
            q.startingAfter = id(last)
            if sizes.count > 100 { return (sizes, more, ids) }
        }
    }

    /// `(created, id)` pairs newest first, as the lists order them.
    static func newestFirst(_ rows: [(Date, String)]) -> [String] {
        rows.sorted { $0.0 != $1.0 ? $0.0 > $1.0 : $0.1 > $1.1 }.map(\.1)
    }

    @Test(arguments: Backend.available)
    func paymentsAndRefundsPageNewestFirstWithFilters(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let store = SQLPaymentStore(database: h.db)
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        let customer = "cus_" + String(repeating: "a", count: 26)
        var all: [(Date, String)] = [], succeeded: [(Date, String)] = [], ofCustomer: [(Date, String)] = []
        for i in 0..<25 {
            // Five pairs share a creation time: the id orders them.
            let t = t0.addingTimeInterval(Double(i - i % 2 * (i < 10 ? 1 : 0)))
            let token = i % 3 == 0 ? RandomID.make(prefix: "ins_") : RandomID.make(prefix: "tok_")
            let request = i % 3 == 0 ? "customer=\(customer)&amount=1050&currency=EUR" : "token=\(token)&amount=1050&currency=EUR"
            let p = PaymentRecord(
                id: RandomID.make(prefix: "pay_"), scope: "uid:\(1000 + i % 2)", idempotencyKey: "k\(i)", request: request, token: token,
                singleUse: false, amount: 1050, currency: "EUR", createdAt: t)
            #expect(try await store.begin(p) == .created)
            if i % 2 == 0 {
                #expect(try await store.finish(p.id, status: .succeeded, code: nil, reference: "r", nextAction: nil, now: t))
                succeeded.append((t, p.id))
            }
            if i % 3 == 0 { ofCustomer.append((t, p.id)) }
            all.append((t, p.id))
        }
        let everything = try await Self.walk(id: \PaymentRecord.id) { q in try await store.list(q, status: nil, customer: nil) }
        #expect(everything.sizes == [10, 10, 5] && everything.more == [true, true, false])
        #expect(everything.ids == Self.newestFirst(all), "newest first, no duplicate, no gap (every scope)")
        let ok = try await Self.walk(limit: 4, id: \PaymentRecord.id) { q in try await store.list(q, status: .succeeded, customer: nil) }
        #expect(ok.ids == Self.newestFirst(succeeded) && ok.sizes == [4, 4, 4, 1])
        let theirs = try await Self.walk(limit: 3, id: \PaymentRecord.id) { q in try await store.list(q, status: nil, customer: customer) }
        #expect(theirs.ids == Self.newestFirst(ofCustomer) && theirs.more.last == false)
        let range = ListQuery(createdFrom: t0.addingTimeInterval(12), createdTo: t0.addingTimeInterval(20))
        let ranged = try await Self.walk(limit: 5, range, id: \PaymentRecord.id) { q in try await store.list(q, status: nil, customer: nil) }
        #expect(ranged.ids == Self.newestFirst(all.filter { $0.0 >= t0.addingTimeInterval(12) && $0.0 <= t0.addingTimeInterval(20) }))
        #expect(ranged.ids.count == 9)
        let unknown = try await store.list(ListQuery(startingAfter: "pay_nothing"), status: nil, customer: nil)
        #expect(unknown == .unknownCursor)

        // Refunds of one payment, 25 of them, and one of another payment.
        let paid = succeeded.map(\.1)
        var refunds: [(Date, String)] = []
        for i in 0..<26 {
            let t = t0.addingTimeInterval(100 + Double(i / 2))
            let op = PaymentOperation(
                id: RandomID.make(prefix: "re_"), paymentID: i == 25 ? paid[1] : paid[0], kind: .refund, scope: "uid:1000",
                idempotencyKey: "refund\(i)", request: "refund", amount: 10, currency: "EUR", createdAt: t)
            #expect(try await store.beginOperation(op, now: t) == .created)
            if i % 4 == 0 { #expect(try await store.finishOperation(op.id, status: .succeeded, code: nil, reference: nil, now: t)) }
            if i < 25 { refunds.append((t, op.id)) }
        }
        let ofPayment = try await Self.walk(id: \PaymentOperation.id) { q in try await store.listRefunds(q, status: nil, payment: paid[0]) }
        #expect(ofPayment.sizes == [10, 10, 5] && ofPayment.more == [true, true, false])
        #expect(ofPayment.ids == Self.newestFirst(refunds))
        let settled = try await Self.walk(id: \PaymentOperation.id) { q in try await store.listRefunds(q, status: .succeeded, payment: nil) }
        #expect(settled.ids == Self.newestFirst(refunds.enumerated().filter { $0.offset % 4 == 0 }.map(\.element)))
        #expect(try await store.listRefunds(ListQuery(startingAfter: paid[0]), status: nil, payment: nil) == .unknownCursor,
                "a payment's id is no refund cursor")
    }

    @Test(arguments: Backend.available)
    func customersInstrumentsAndTokensPageAndSearchByFingerprint(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let customers = try await h.customers()
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        var made: [(Date, String)] = []
        for i in 0..<25 {
            let c = CustomerRecord(id: RandomID.make(prefix: "cus_"), reference: "ref-\(i)", createdAt: t0.addingTimeInterval(Double(i / 3)))
            try await customers.create(c)
            made.append((c.createdAt, c.id))
        }
        let listed = try await Self.walk(id: \CustomerRecord.id) { q in try await customers.list(q) }
        #expect(listed.sizes == [10, 10, 5] && listed.more == [true, true, false] && listed.ids == Self.newestFirst(made))

        // Instruments: the same card (one fingerprint) on several customers.
        let fingerprint = String(repeating: "ab", count: 32), other = String(repeating: "cd", count: 32)
        var sameCard: [(Date, String)] = []
        for i in 0..<12 {
            var envelope = try sampleEnvelope(cvc: nil)
            envelope.card.fingerprint = i % 4 == 3 ? other : fingerprint
            let ins = InstrumentRecord(
                id: RandomID.make(prefix: "ins_"), customer: made[i % 5].1, envelope: envelope, createdAt: t0.addingTimeInterval(Double(i)))
            #expect(try await customers.attach(ins, makeDefault: false))
            if i % 4 != 3 { sameCard.append((ins.createdAt, ins.id)) }
        }
        let found = try await Self.walk(limit: 5, id: \InstrumentRecord.id) { q in
            try await customers.listInstruments(q, fingerprint: fingerprint, customer: nil)
        }
        #expect(found.ids == Self.newestFirst(sameCard) && found.sizes == [5, 4])
        let one = try await Self.walk(id: \InstrumentRecord.id) { q in
            try await customers.listInstruments(q, fingerprint: fingerprint, customer: made[0].1)
        }
        #expect(one.ids.count == 3, "instruments 0, 5 and 10 are customer 0's and of that card")

        // Tokens: live ones only, newest first, searchable by the gateway's fingerprint.
        let tokens = h.store
        let now = Date()
        var live: [(Date, String)] = [], marked: [(token: String, fingerprint: String)] = []
        for i in 0..<25 {
            let r = record(try sampleEnvelope(), at: now.addingTimeInterval(Double(i / 2) - 30))
            try await tokens.insert(r)
            live.append((r.createdAt, r.token))
            if i % 5 == 0 { marked.append((r.token, fingerprint)) }
        }
        let expired = record(try sampleEnvelope(), at: now.addingTimeInterval(-2000))
        try await tokens.insert(expired)
        #expect(try await tokens.setFingerprints(marked) == 5)
        let pages = try await Self.walk(id: \TokenRecord.token) { q in try await tokens.list(q, fingerprint: nil, now: now) }
        #expect(pages.sizes == [10, 10, 5] && pages.more == [true, true, false])
        // Creation times are stored in milliseconds: compare with them rounded so.
        let rounded = live.map { (Date(timeIntervalSince1970: ($0.0.timeIntervalSince1970 * 1000).rounded() / 1000), $0.1) }
        #expect(pages.ids == Self.newestFirst(rounded) && !pages.ids.contains(expired.token))
        let byFingerprint = try await Self.walk(id: \TokenRecord.token) { q in try await tokens.list(q, fingerprint: fingerprint, now: now) }
        #expect(Set(byFingerprint.ids) == Set(marked.map(\.token)) && byFingerprint.sizes == [5])
    }

    /// A store of the previous version (before `0006-listing`: its indexes and columns taken away
    /// again) upgrades with the payments' customer filled from their requests (a customer's, a
    /// mandate's) and the instruments' fingerprint from their envelopes.
    @Test(arguments: Backend.available)
    func theUpgradeFillsCustomersAndFingerprints(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        for index in ["vault_payments_list", "vault_payments_list_status", "vault_payments_list_customer", "vault_payment_operations_list",
                      "vault_payment_operations_list_status", "vault_payment_operations_list_payment", "vault_customers_list",
                      "vault_tokens_list", "vault_tokens_list_fingerprint", "vault_instruments_fingerprint"] {
            try await h.db.write("DROP INDEX \(index)")
        }
        // The events migration that follows (its triggers name these columns) goes too; it is
        // applied again after 0006, as on a store of that version.
        try await dropEventsMigration(h.db, backend)
        try await h.db.write("ALTER TABLE vault_payments DROP COLUMN customer")
        try await h.db.write("ALTER TABLE vault_instruments DROP COLUMN fingerprint")
        try await h.db.write("DELETE FROM vault_migrations WHERE name = '0006-listing'")

        let t = Date(timeIntervalSince1970: 1_800_000_000)
        let customers = SQLCustomerStore(database: h.db)
        let customer = CustomerRecord(id: RandomID.make(prefix: "cus_"), reference: nil, createdAt: t)
        try await customers.create(customer)
        var envelope = try sampleEnvelope(cvc: nil)
        let fingerprint = String(repeating: "12", count: 32)
        envelope.card.fingerprint = fingerprint
        let instrument = RandomID.make(prefix: "ins_"), mandate = RandomID.make(prefix: "mdt_")
        try await h.db.write(
            "INSERT INTO vault_instruments (id, customer, envelope, created_at) VALUES (?, ?, ?, ?)", [instrument, customer.id, envelope.json, t])
        try await h.db.write("""
            INSERT INTO vault_mandates (id, customer, instrument, amount, max_amount, currency, interval, max_cycles, status, created_at, expires_at)
            VALUES (?, ?, ?, 100, 100, 'EUR', 'month', 12, 'active', ?, ?)
            """, [mandate, customer.id, instrument, t, t.addingTimeInterval(86400 * 365)])
        let requests = [
            "customer=\(customer.id)&amount=100&currency=EUR", "mandate=\(mandate)&cycle=1&amount=100&currency=EUR",
            "token=tok_abc&amount=100&currency=EUR",
        ]
        var ids: [String] = []
        for (i, request) in requests.enumerated() {
            let id = RandomID.make(prefix: "pay_")
            ids.append(id)
            try await h.db.write("""
                INSERT INTO vault_payments (id, scope, idempotency_key, request, token, single_use, amount, currency, status, created_at, updated_at)
                VALUES (?, 'uid:1000', ?, ?, ?, FALSE, 100, 'EUR', 'succeeded', ?, ?)
                """, [id, "k\(i)", request, instrument, t.addingTimeInterval(Double(i)), t])
        }
        try await h.db.migrate()
        // 0006 is applied again after the later ones it was removed from between.
        #expect(try await h.db.appliedMigrations().sorted() == Migrations.all.map(\.name))
        let payments = SQLPaymentStore(database: h.db)
        let theirs = try await payments.list(ListQuery(), status: nil, customer: customer.id)
        #expect(theirs == .page([try #require(try await payments.get(ids[1])), try #require(try await payments.get(ids[0]))], hasMore: false))
        let found = try await customers.listInstruments(ListQuery(), fingerprint: fingerprint, customer: nil)
        guard case .page(let items, false) = found else { Issue.record("\(found)"); return }
        #expect(items.map(\.id) == [instrument])
    }
}

/// Takes the events migration (`0008-events`) out of a store again: its triggers (and their
/// functions on PostgreSQL), its tables and its record.
func dropEventsMigration(_ db: Database, _ backend: Backend) async throws {
    if backend == .sqlite {
        for row in try await db.query("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'vault_events_%'") {
            try await db.write("DROP TRIGGER \(try row.string(0))")
        }
    } else {
        for row in try await db.query("SELECT tgname, tgrelid::regclass::text FROM pg_trigger WHERE tgname LIKE 'vault_events_%'") {
            try await db.write("DROP TRIGGER \(try row.string(0)) ON \(try row.string(1))")
            try await db.write("DROP FUNCTION \(try row.string(0))()")
        }
    }
    try await db.write("DROP TABLE vault_events")
    try await db.write("DROP TABLE vault_leases")
    try await db.write("DELETE FROM vault_migrations WHERE name IN ('0008-events', '0010-payment-event-tokens')")
}
