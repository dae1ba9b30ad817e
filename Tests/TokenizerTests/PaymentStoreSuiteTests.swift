import Foundation
import GRDB
import Payments
import Store
import Testing
import Tokenizer
import VaultCrypto

/// The payment store contract, run against both backends: idempotency keys, single-use tokens,
/// outcomes that are set once, reconciliation queries, durability.
@Suite struct PaymentStoreSuiteTests {
    static func intent(
        key: String = RandomID.make(prefix: "idem_"), scope: String = "uid:1000", token: String = RandomID.make(prefix: "tok_"), singleUse: Bool = true,
        amount: Int = 1050, at t: Date = Date()
    ) -> PaymentRecord {
        PaymentRecord(
            id: RandomID.make(prefix: "pay_"), scope: scope, idempotencyKey: key, request: "token=\(token)&amount=\(amount)&currency=EUR", token: token,
            singleUse: singleUse, amount: amount, currency: "EUR", createdAt: t)
    }

    /// A new single-use token in the harness's store and a payment begun on it.
    static func begun(on h: StoreHarness, _ store: any PaymentStore) async throws -> (token: TokenRecord, payment: PaymentRecord) {
        let token = record(try sampleEnvelope())
        try await h.store.insert(token)
        let p = intent(token: token.token)
        #expect(try await store.begin(p) == .created)
        return (token, p)
    }

    @Test(arguments: Backend.available)
    func idempotencyKeysReturnTheFirstPayment(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let store = try await h.payments()
        let first = Self.intent()
        #expect(try await store.begin(first) == .created)
        var replay = Self.intent(key: first.idempotencyKey, token: first.token)
        replay.request = "token=\(first.token)&amount=999&currency=EUR"
        guard case .existing(let existing) = try await store.begin(replay) else { Issue.record("a second payment under one key"); return }
        #expect(existing.id == first.id && existing.request == first.request && existing.status == .processing)

        let t = Date().addingTimeInterval(1)
        #expect(try await store.finish(first.id, status: .succeeded, code: nil, reference: "sbx_1", nextAction: nil, now: t))
        // An outcome is set once: a late second outcome changes nothing.
        #expect(try await store.finish(first.id, status: .declined, code: "generic_decline", reference: nil, nextAction: nil, now: t) == false)
        let got = try #require(try await store.get(first.id))
        #expect(got.status == .succeeded && got.reference == "sbx_1" && got.code == nil && got.amount == 1050 && got.currency == "EUR")
        #expect(abs(got.updatedAt.timeIntervalSince(t)) < 0.01)
        #expect(try await store.get("pay_nothing") == nil)
        #expect(try await store.find(scope: first.scope, idempotencyKey: first.idempotencyKey)?.id == first.id)
        #expect(try await store.find(scope: first.scope, idempotencyKey: "idem_nothing") == nil)
    }

    /// A success that consumes a single-use token deletes it in the transaction that records the
    /// outcome (issue 16: one durable commit, not two); a late outcome still consumes it.
    @Test(arguments: Backend.available)
    func aSuccessConsumesItsSingleUseTokenInOneTransaction(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let store = try await h.payments()
        let (token, p) = try await Self.begun(on: h, store)
        #expect(try await store.finish(p.id, status: .succeeded, code: nil, reference: "sbx_1", nextAction: nil, now: Date(), consuming: token.token))
        #expect(try await h.store.get(token.token, now: Date()) == nil)
        let types = try await EventOutboxTests.events(h.db).map(\.type)
        // The payment's event, then the token's (on PostgreSQL both come from one statement).
        let succeeded = try #require(types.firstIndex(of: "payment.succeeded"), "\(types)")
        let deleted = try #require(types.firstIndex(of: "token.deleted"), "\(types)")
        #expect(succeeded < deleted, "\(types)")

        // Already final: the outcome is not changed, the token is consumed all the same.
        let (other, q) = try await Self.begun(on: h, store)
        #expect(try await store.finish(q.id, status: .succeeded, code: nil, reference: "sbx_2", nextAction: nil, now: Date()))
        #expect(try await h.store.get(other.token, now: Date()) != nil)
        #expect(try await store.finish(q.id, status: .succeeded, code: nil, reference: "sbx_3", nextAction: nil, now: Date(), consuming: other.token) == false)
        #expect(try await h.store.get(other.token, now: Date()) == nil)
        #expect(try await store.get(q.id)?.reference == "sbx_2")

        // A decline leaves the token: it may pay again.
        let (kept, d) = try await Self.begun(on: h, store)
        #expect(try await store.finish(d.id, status: .declined, code: "card_declined", reference: nil, nextAction: nil, now: Date(), consuming: kept.token))
        #expect(try await h.store.get(kept.token, now: Date()) != nil)
        #expect(try await store.get(d.id)?.status == .declined)
    }

    /// The race a review found in the one-statement outcome (PostgreSQL, issue 16): another
    /// transaction (`vault payments settle`) holds the payment's row and makes it succeeded while
    /// the outcome statement waits for that row. The statement's UPDATE then changes nothing, and
    /// its snapshot (taken before the other commit) still shows the payment processing, so the
    /// statement alone would leave the single-use token alive. The token must be consumed all the
    /// same, and the hand-settled outcome kept. SQLite has one writer: no such interleaving.
    @Test(arguments: Backend.available.filter { $0 == .postgres })
    func aPaymentSettledByAnotherTransactionMeanwhileStillConsumesItsToken(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let store = try await h.payments()
        let (token, p) = try await Self.begun(on: h, store)
        let db = h.db
        let (outcome, waited) = try await db.transaction { (tx) throws(StoreError) in
            // The settle's UPDATE takes the row's lock; its COMMIT comes when this body returns.
            let settled = try await tx.query(
                "UPDATE vault_payments SET status = 'succeeded', reference = 'by_hand' WHERE id = ? AND status = 'processing' RETURNING id", [p.id])
            #expect(settled.count == 1)
            let outcome = Task {
                try await store.finish(p.id, status: .succeeded, code: nil, reference: "sbx_late", nextAction: nil, now: Date(), consuming: token.token)
            }
            // Until the outcome statement is seen waiting for the row's lock (at most 10 s).
            var waited = false
            for _ in 0..<1000 {
                let blocked = try await db.query(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'WITH changed AS%'")
                if !blocked.isEmpty { waited = true; break }
                try? await Task.sleep(for: .milliseconds(10))
            }
            return (outcome, waited)
        }
        #expect(waited, "the outcome statement never waited for the settle's row lock")
        #expect(try await outcome.value == false)
        #expect(try await h.store.get(token.token, now: Date()) == nil, "the single-use token of a succeeded payment is still there")
        let got = try #require(try await store.get(p.id))
        #expect(got.status == .succeeded && got.reference == "by_hand")
    }

    /// Keys are unique per scope only (issue: one global key space let a peer see, block or
    /// claim another's key): the same key in two scopes makes two payments, and a lookup never
    /// crosses scopes.
    @Test(arguments: Backend.available)
    func idempotencyKeysAreScoped(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let store = try await h.payments()
        let a = Self.intent(key: "order-1", scope: "uid:1000"), b = Self.intent(key: "order-1", scope: "uid:65534")
        let c = Self.intent(key: "order-1", scope: "session:sess_one")
        for r in [a, b, c] { #expect(try await store.begin(r) == .created, "\(r.scope)") }
        guard case .existing(let again) = try await store.begin(Self.intent(key: "order-1", scope: "uid:65534")) else {
            Issue.record("a second payment under one scope and key"); return
        }
        #expect(again.id == b.id && again.scope == "uid:65534")
        #expect(try await store.find(scope: "uid:1000", idempotencyKey: "order-1")?.id == a.id)
        #expect(try await store.find(scope: "uid:65534", idempotencyKey: "order-1")?.id == b.id)
        #expect(try await store.find(scope: "session:sess_one", idempotencyKey: "order-1")?.id == c.id)
        #expect(try await store.find(scope: "session:sess_two", idempotencyKey: "order-1") == nil)
        #expect(try await store.find(scope: PaymentScope.global, idempotencyKey: "order-1") == nil)
        // Several scopes in one read: each scope's own payment, none of another.
        let found = try await store.find(scopes: ["uid:1000", "session:sess_one", PaymentScope.global], idempotencyKey: "order-1")
        #expect(found.mapValues(\.id) == ["uid:1000": a.id, "session:sess_one": c.id])
        #expect(try await store.find(scopes: ["uid:65534"], idempotencyKey: "order-2").isEmpty)
        #expect(try await store.get(b.id)?.scope == "uid:65534")
    }

    /// A store made before scopes existed is upgraded in place: its payments keep their keys in
    /// the global scope (still found there, still unique there), the same key is free in every
    /// other scope, sessions gain an attempt count of 0, and upgrading again changes nothing.
    @Test(arguments: Backend.available)
    func aStoreFromBeforeScopesIsUpgradedInPlace(_ backend: Backend) async throws {
        let h = try await backend.make(migrated: false)
        defer { Task { await h.cleanup() } }
        let legacyRow = """
            INSERT INTO \(backend == .sqlite ? "payments" : "vault_payments")
                (id, idempotency_key, request, token, single_use, amount, currency, status, code, reference, next_action, created_at, updated_at)
            VALUES ('pay_legacy', 'order-1', 'token=tok_legacy&amount=1050&currency=EUR', 'tok_legacy', \(backend == .sqlite ? "1" : "true"),
                    1050, 'EUR', 'succeeded', NULL, 'sbx_1', NULL, 1700000000000, 1700000000000)
            """
        let legacySession = """
            INSERT INTO \(backend == .sqlite ? "sessions" : "vault_sessions")
                (id, amount, currency, brands, customer, status, payment_id, created_at, expires_at)
            VALUES ('sess_legacy', 100, 'EUR', '', NULL, 'open', NULL, 1700000000000, 4102444800000)
            """
        switch backend {
        case .sqlite:
            // The schema as the first release made it (migrations payments-v1 and sessions-v1).
            var m = DatabaseMigrator()
            m.registerMigration("payments-v1") { db in
                try db.execute(sql: """
                    CREATE TABLE payments (
                        id TEXT PRIMARY KEY NOT NULL, idempotency_key TEXT NOT NULL UNIQUE, request TEXT NOT NULL, token TEXT NOT NULL,
                        single_use INTEGER NOT NULL, amount INTEGER NOT NULL, currency TEXT NOT NULL, status TEXT NOT NULL, code TEXT,
                        reference TEXT, next_action TEXT, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);
                    CREATE UNIQUE INDEX payments_single_use_token ON payments(token)
                        WHERE single_use = 1 AND status IN ('processing','requires_action','succeeded');
                    CREATE INDEX payments_processing ON payments(updated_at) WHERE status = 'processing';
                    """)
            }
            m.registerMigration("sessions-v1") { db in
                try db.execute(sql: """
                    CREATE TABLE sessions (
                        id TEXT PRIMARY KEY NOT NULL, amount INTEGER NOT NULL, currency TEXT NOT NULL, brands TEXT NOT NULL, customer TEXT,
                        status TEXT NOT NULL, payment_id TEXT, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL)
                    """)
            }
            let pool = try #require(h.db.sqlitePool)
            try m.migrate(pool)
            try await pool.write { db in
                try db.execute(sql: legacyRow)
                try db.execute(sql: legacySession)
            }
        case .postgres:
            try await h.sql("""
                CREATE TABLE vault_payments (
                    id TEXT PRIMARY KEY, idempotency_key TEXT NOT NULL UNIQUE, request TEXT NOT NULL, token TEXT NOT NULL,
                    single_use BOOLEAN NOT NULL, amount BIGINT NOT NULL, currency TEXT NOT NULL, status TEXT NOT NULL, code TEXT,
                    reference TEXT, next_action TEXT, created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL)
                """)
            try await h.sql("""
                CREATE TABLE vault_sessions (
                    id TEXT PRIMARY KEY, amount BIGINT NOT NULL, currency TEXT NOT NULL, brands TEXT NOT NULL, customer TEXT,
                    status TEXT NOT NULL, payment_id TEXT, created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL)
                """)
            try await h.sql(legacyRow)
            try await h.sql(legacySession)
        }
        for _ in 0..<2 {   // the upgrade, then a second start on the upgraded store
            let store = try await h.payments()
            let legacy = try #require(try await store.find(scope: PaymentScope.global, idempotencyKey: "order-1"))
            #expect(legacy.id == "pay_legacy" && legacy.status == .succeeded && legacy.scope == PaymentScope.global)
            #expect(try await store.find(scope: "uid:1000", idempotencyKey: "order-1") == nil)
            let both = try await store.find(scopes: ["uid:1000", PaymentScope.global], idempotencyKey: "order-1")
            #expect(both.count == 1 && both[PaymentScope.global]?.id == "pay_legacy")
            guard case .existing(let same) = try await store.begin(Self.intent(key: "order-1", scope: PaymentScope.global)) else {
                Issue.record("the global scope lost its uniqueness"); return
            }
            #expect(same.id == "pay_legacy")
            let sessions = try #require(store as? any SessionStore)
            #expect(try await sessions.session("sess_legacy")?.attempts == 0)
        }
        let store = try await h.payments()
        #expect(try await store.begin(Self.intent(key: "order-1", scope: "uid:1000")) == .created)
    }

    /// A failed attempt moves a paying session back to open, and the last allowed one closes it.
    @Test(arguments: Backend.available)
    func sessionAttemptsAreCountedAndCapped(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let sessions = try #require(try await h.payments() as? any SessionStore)
        let s = SessionRecord(id: RandomID.make(prefix: "sess_"), amount: 100, currency: "EUR", acceptedBrands: [], customer: nil,
                              createdAt: Date(), expiresAt: Date().addingTimeInterval(600))
        try await sessions.createSession(s)
        #expect(try await sessions.failSessionAttempt(s.id, maxAttempts: 3) == nil, "only a paying session has an attempt to end")
        for expected in [SessionRecord.Status.open, .open, .closed] {
            #expect(try await sessions.transitionSession(s.id, from: .open, to: .paying, paymentID: nil))
            #expect(try await sessions.failSessionAttempt(s.id, maxAttempts: 3) == expected)
        }
        #expect(try await sessions.transitionSession(s.id, from: .open, to: .paying, paymentID: nil) == false)
        let closed = try #require(try await sessions.session(s.id))
        #expect(closed.status == .closed && closed.attempts == 3)
    }

    @Test(arguments: Backend.available)
    func aSingleUseTokenHasOneLivePayment(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let store = try await h.payments()
        let token = RandomID.make(prefix: "tok_")
        let a = Self.intent(token: token)
        #expect(try await store.begin(a) == .created)
        let error = await #expect(throws: StoreError.self) { _ = try await store.begin(Self.intent(token: token)) }
        #expect(error?.code == .tokenInUse)
        // Declined: the token may be tried again; succeeded: it is spent.
        _ = try await store.finish(a.id, status: .declined, code: "insufficient_funds", reference: nil, nextAction: nil, now: Date())
        let b = Self.intent(token: token)
        #expect(try await store.begin(b) == .created)
        _ = try await store.finish(b.id, status: .succeeded, code: nil, reference: "r", nextAction: nil, now: Date())
        await #expect(throws: StoreError.self) { _ = try await store.begin(Self.intent(token: token)) }
        // A reusable token (a stored instrument) may carry many.
        let reusable = RandomID.make(prefix: "tok_")
        #expect(try await store.begin(Self.intent(token: reusable, singleUse: false)) == .created)
        #expect(try await store.begin(Self.intent(token: reusable, singleUse: false)) == .created)
    }

    /// Duplicates racing on one key (from two store instances, as two sidecars would): one
    /// payment; every other caller sees it.
    @Test(arguments: Backend.available)
    func concurrentDuplicatesMakeOnePayment(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let stores = [try await h.payments(), try await h.payments()]
        let key = RandomID.make(prefix: "idem_"), token = RandomID.make(prefix: "tok_")
        let outcomes = try await withThrowingTaskGroup(of: (String, Bool).self) { group in
            for i in 0..<24 {
                let store = stores[i % 2]
                group.addTask {
                    let mine = Self.intent(key: key, token: token)
                    switch try await store.begin(mine) {
                    case .created: return (mine.id, true)
                    case .existing(let r): return (r.id, false)
                    }
                }
            }
            return try await group.reduce(into: [(String, Bool)]()) { $0.append($1) }
        }
        #expect(outcomes.filter(\.1).count == 1)
        #expect(Set(outcomes.map(\.0)).count == 1)
    }

    @Test(arguments: Backend.available)
    func reconciliationAndAbandon(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let store = try await h.payments()
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        let old = Self.intent(at: t0), fresh = Self.intent(at: t0.addingTimeInterval(60)), done = Self.intent(at: t0)
        for r in [old, fresh, done] { #expect(try await store.begin(r) == .created) }
        _ = try await store.finish(done.id, status: .declined, code: "generic_decline", reference: nil, nextAction: nil, now: t0)
        let stale = try await store.unsettled(before: t0.addingTimeInterval(30), limit: 100)
        #expect(stale.map(\.id) == [old.id])
        // Abandon removes an intent that never reached a processor, and nothing final.
        try await store.abandon(old.id)
        try await store.abandon(done.id)
        #expect(try await store.get(old.id) == nil)
        #expect(try await store.get(done.id)?.status == .declined)
        // The key is free again.
        #expect(try await store.begin(Self.intent(key: old.idempotencyKey)) == .created)
    }

    @Test(arguments: Backend.available)
    func intentsAreDurable(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let r = Self.intent()
        #expect(try await h.payments().begin(r) == .created)
        _ = try await h.reopen()
        let again = try await h.payments()
        #expect(try await again.get(r.id)?.idempotencyKey == r.idempotencyKey)
        #expect(try await again.unsettled(before: Date().addingTimeInterval(60), limit: 100).contains { $0.id == r.id })
    }

    /// Settlement gave up: a processing payment becomes `unknown` with its reason, keeps holding
    /// its single-use token (it may have been charged), is listed for reconciliation, and a late
    /// outcome still settles it (clearing the reason); nothing else becomes unknown.
    @Test(arguments: Backend.available)
    func unknownPaymentsHoldTheirTokenAndSettleLate(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let store = try await h.payments()
        let t0 = Date(timeIntervalSince1970: 1_800_000_000), t1 = t0.addingTimeInterval(90)
        let token = RandomID.make(prefix: "tok_")
        let a = Self.intent(token: token, at: t0)
        #expect(try await store.begin(a) == .created)
        #expect(try await store.markUnknown(a.id, reason: "processor timed out after 3 tries", now: t1))
        #expect(try await store.markUnknown(a.id, reason: "again", now: t1) == false, "only a processing payment becomes unknown")
        let unknown = try #require(try await store.get(a.id))
        #expect(unknown.status == .unknown && !unknown.status.isFinal)
        #expect(unknown.reason == "processor timed out after 3 tries" && unknown.updatedAt == t1)
        #expect(try await store.find(scope: a.scope, idempotencyKey: a.idempotencyKey)?.reason == unknown.reason)
        // It may have been charged: the single-use token stays held.
        let error = await #expect(throws: StoreError.self) { _ = try await store.begin(Self.intent(token: token)) }
        #expect(error?.code == .tokenInUse)
        // A replay of its key is still that payment.
        guard case .existing(let replayed) = try await store.begin(Self.intent(key: a.idempotencyKey, token: token)) else {
            Issue.record("a second payment under one key"); return
        }
        #expect(replayed.id == a.id && replayed.status == .unknown)
        #expect(try await store.unsettled(before: t1.addingTimeInterval(1), limit: 10).map(\.id) == [a.id])
        #expect(try await store.unsettled(before: t1, limit: 10).isEmpty, "touched at t1, not before")
        // Abandon never drops an unknown payment (it may have been charged).
        try await store.abandon(a.id)
        #expect(try await store.get(a.id)?.status == .unknown)

        // The processor's late answer settles it; the reason goes; the first outcome stands.
        let t2 = t1.addingTimeInterval(60)
        #expect(try await store.finish(a.id, status: .succeeded, code: nil, reference: "ref_late", nextAction: nil, now: t2))
        let settled = try #require(try await store.get(a.id))
        #expect(settled.status == .succeeded && settled.reason == nil && settled.reference == "ref_late" && settled.updatedAt == t2)
        #expect(try await store.finish(a.id, status: .declined, code: "generic_decline", reference: nil, nextAction: nil, now: t2) == false)
        #expect(try await store.markUnknown(a.id, reason: "late", now: t2) == false)
        #expect(try await store.unsettled(before: t2.addingTimeInterval(1), limit: 10).isEmpty)
        await #expect(throws: StoreError.self) { _ = try await store.begin(Self.intent(token: token)) }
    }

    /// `unsettled` lists processing and unknown payments last touched before the cutoff, oldest
    /// first, at most `limit`; `finish` takes a payment waiting for 3-D Secure too.
    @Test(arguments: Backend.available)
    func unsettledIsOldestFirstAndLimited(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let store = try await h.payments()
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        let p1 = Self.intent(at: t0), p2 = Self.intent(at: t0.addingTimeInterval(10)), p3 = Self.intent(at: t0.addingTimeInterval(20))
        let done = Self.intent(at: t0), waiting = Self.intent(at: t0)
        for r in [p1, p2, p3, done, waiting] { #expect(try await store.begin(r) == .created) }
        #expect(try await store.markUnknown(p2.id, reason: "connection dropped", now: t0.addingTimeInterval(30)))
        _ = try await store.finish(done.id, status: .declined, code: "generic_decline", reference: nil, nextAction: nil, now: t0)
        #expect(try await store.finish(waiting.id, status: .requiresAction, code: nil, reference: nil, nextAction: #"{"type":"x"}"#, now: t0))
        let cutoff = t0.addingTimeInterval(100)
        #expect(try await store.unsettled(before: cutoff, limit: 10).map(\.id) == [p1.id, p3.id, p2.id])
        #expect(try await store.unsettled(before: cutoff, limit: 2).map(\.id) == [p1.id, p3.id])
        #expect(try await store.unsettled(before: t0.addingTimeInterval(25), limit: 10).map(\.id) == [p1.id, p3.id])
        #expect(try await store.unsettled(before: cutoff, limit: 10).first?.reason == nil)
        #expect(try await store.unsettled(before: cutoff, limit: 10).last?.reason == "connection dropped")
        #expect(try await store.finish(waiting.id, status: .succeeded, code: nil, reference: "r", nextAction: nil, now: t0))
        #expect(try await store.get(waiting.id)?.status == .succeeded)
    }

    /// The counts behind `vault_payments_by_state`: every state (0 for none) or the backlog's, and
    /// the creation time of the oldest payment still processing, on both backends.
    @Test(arguments: Backend.available)
    func paymentsAreCountedByState(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let store = try await h.payments()
        let empty = try await store.stateCounts(all: true)
        #expect(empty.byStatus.count == PaymentRecord.Status.allCases.count && empty.byStatus.values.allSatisfy { $0 == 0 })
        #expect(empty.oldestProcessing == nil)

        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        let old = Self.intent(at: t0), young = Self.intent(at: t0.addingTimeInterval(120))
        let paid = Self.intent(at: t0), declined = Self.intent(at: t0), lost = Self.intent(at: t0)
        for r in [old, young, paid, declined, lost] { #expect(try await store.begin(r) == .created) }
        let t1 = t0.addingTimeInterval(300)
        #expect(try await store.finish(paid.id, status: .succeeded, code: nil, reference: "sbx_1", nextAction: nil, now: t1))
        #expect(try await store.finish(declined.id, status: .declined, code: "generic_decline", reference: nil, nextAction: nil, now: t1))
        #expect(try await store.markUnknown(lost.id, reason: "timeout", now: t1))

        let counts = try await store.stateCounts(all: true)
        #expect(
            counts.byStatus == [.processing: 2, .succeeded: 1, .declined: 1, .unknown: 1, .requiresAction: 0, .failed: 0, .requiresCapture: 0, .canceled: 0],
            "\(counts)")
        #expect(counts.oldestProcessing.map { abs($0.timeIntervalSince(t0)) < 0.01 } == true, "\(String(describing: counts.oldestProcessing))")
        // The backlog only (the partial index): processing and unknown, nothing else.
        let backlog = try await store.stateCounts(all: false)
        #expect(backlog.byStatus == [.processing: 2, .unknown: 1] && backlog.oldestProcessing == counts.oldestProcessing, "\(backlog)")
    }
}
