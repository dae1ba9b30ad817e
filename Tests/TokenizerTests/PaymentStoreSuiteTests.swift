import Foundation
import Payments
import Testing
import Tokenizer
import VaultCrypto

/// The payment store contract, run against both backends: idempotency keys, single-use tokens,
/// outcomes that are set once, reconciliation queries, durability.
@Suite struct PaymentStoreSuiteTests {
    static func intent(key: String = RandomID.make(prefix: "idem_"), token: String = RandomID.make(prefix: "tok_"), singleUse: Bool = true, amount: Int = 1050, at t: Date = Date()) -> PaymentRecord {
        PaymentRecord(
            id: RandomID.make(prefix: "pay_"), idempotencyKey: key, request: "token=\(token)&amount=\(amount)&currency=EUR", token: token,
            singleUse: singleUse, amount: amount, currency: "EUR", createdAt: t)
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
        #expect(try await store.find(idempotencyKey: first.idempotencyKey)?.id == first.id)
        #expect(try await store.find(idempotencyKey: "idem_nothing") == nil)
    }

    @Test(arguments: Backend.available)
    func aSingleUseTokenHasOneLivePayment(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let store = try await h.payments()
        let token = RandomID.make(prefix: "tok_")
        let a = Self.intent(token: token)
        #expect(try await store.begin(a) == .created)
        let error = await #expect(throws: PaymentStoreError.self) { _ = try await store.begin(Self.intent(token: token)) }
        #expect(error?.code == .tokenInUse)
        // Declined: the token may be tried again; succeeded: it is spent.
        _ = try await store.finish(a.id, status: .declined, code: "insufficient_funds", reference: nil, nextAction: nil, now: Date())
        let b = Self.intent(token: token)
        #expect(try await store.begin(b) == .created)
        _ = try await store.finish(b.id, status: .succeeded, code: nil, reference: "r", nextAction: nil, now: Date())
        await #expect(throws: PaymentStoreError.self) { _ = try await store.begin(Self.intent(token: token)) }
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
        let stale = try await store.processing(before: t0.addingTimeInterval(30))
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
        #expect(try await again.processing(before: Date().addingTimeInterval(60)).contains { $0.id == r.id })
    }
}
