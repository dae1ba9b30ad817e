import Foundation
import Payments
import Store
import Testing
import VaultCrypto

/// Captures, cancels and refunds in the payment store (`PaymentOperationStore`), on both
/// backends: the checks against the payment made in one transaction with the intent, their
/// effect on the payment, replays by key, expiry, and concurrent refunds from two store
/// instances (two sidecars) that never refund more than was captured.
@Suite struct PaymentOperationStoreTests {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    /// An authorization (`requires_capture`) of `amount`, expiring an hour after `t0`.
    static func authorized(_ store: SQLPaymentStore, amount: Int = 5000) async throws -> PaymentRecord {
        var p = PaymentStoreSuiteTests.intent(amount: amount, at: t0)
        p.manualCapture = true
        p.authorizationExpiresAt = t0.addingTimeInterval(3600)
        #expect(try await store.begin(p) == .created)
        #expect(try await store.finish(p.id, status: .requiresCapture, code: nil, reference: "sbx_a", nextAction: nil, now: t0))
        return try #require(try await store.get(p.id))
    }

    static func op(_ kind: PaymentOperation.Kind, _ p: PaymentRecord, amount: Int, key: String = RandomID.make(prefix: "k_")) -> PaymentOperation {
        PaymentOperation(
            id: RandomID.make(prefix: kind.idPrefix), paymentID: p.id, kind: kind, scope: "uid:1000", idempotencyKey: key,
            request: "\(kind.rawValue)=\(p.id)&amount=\(amount)", amount: amount, currency: p.currency, createdAt: t0)
    }

    @Test(arguments: Backend.available)
    func captureThenRefundsUpToTheCapturedAmount(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let store = SQLPaymentStore(database: h.db)
        let p = try await Self.authorized(store)
        #expect(try await store.beginOperation(Self.op(.refund, p, amount: 1), now: Self.t0) == .refused(.notRefundable))
        #expect(try await store.beginOperation(Self.op(.capture, p, amount: 5001), now: Self.t0) == .refused(.exceedsAuthorized(authorized: 5000)))
        let capture = Self.op(.capture, p, amount: 3000)
        #expect(try await store.beginOperation(capture, now: Self.t0) == .created)
        // One live capture or cancel per payment.
        #expect(try await store.beginOperation(Self.op(.cancel, p, amount: 5000), now: Self.t0) == .refused(.notCancelable))
        // The same key: the first operation, whatever is asked.
        #expect(try await store.beginOperation(Self.op(.capture, p, amount: 10, key: capture.idempotencyKey), now: Self.t0) == .existing(capture))
        #expect(try await store.finishOperation(capture.id, status: .succeeded, code: nil, reference: "sbx_c", now: Self.t0))
        #expect(try await store.finishOperation(capture.id, status: .failed, code: "x", reference: nil, now: Self.t0) == false)
        let captured = try #require(try await store.get(p.id))
        #expect(captured.status == .succeeded && captured.capturedAmount == 3000)

        let r1 = Self.op(.refund, captured, amount: 1000), r2 = Self.op(.refund, captured, amount: 1500)
        #expect(try await store.beginOperation(r1, now: Self.t0) == .created)
        #expect(try await store.beginOperation(r2, now: Self.t0) == .created)
        // In flight, both count: 500 left.
        #expect(try await store.beginOperation(Self.op(.refund, captured, amount: 501), now: Self.t0) == .refused(.exceedsCaptured(available: 500)))
        #expect(try await store.finishOperation(r1.id, status: .succeeded, code: nil, reference: nil, now: Self.t0))
        #expect(try await store.finishOperation(r2.id, status: .failed, code: "refund_failed", reference: nil, now: Self.t0))
        // A failed refund frees its amount; only succeeded refunds are refunded.
        #expect(try await store.get(p.id)?.amountRefunded == 1000)
        #expect(try await store.beginOperation(Self.op(.refund, captured, amount: 2000), now: Self.t0) == .created)
        #expect(try await store.unsettledOperations(before: Self.t0.addingTimeInterval(1), limit: 10).count == 1)
    }

    @Test(arguments: Backend.available)
    func concurrentRefundsNeverExceedTheCapturedAmount(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let stores = [try #require(try await h.payments() as? SQLPaymentStore), try #require(try await h.payments() as? SQLPaymentStore)]
        var p = PaymentStoreSuiteTests.intent(amount: 1000, at: Self.t0)
        p.singleUse = false
        #expect(try await stores[0].begin(p) == .created)
        _ = try await stores[0].finish(p.id, status: .succeeded, code: nil, reference: "sbx", nextAction: nil, now: Self.t0)
        let paid = p
        let made = try await withThrowingTaskGroup(of: Bool.self) { group in
            for i in 0..<20 {
                let store = stores[i % 2]
                group.addTask { try await store.beginOperation(Self.op(.refund, paid, amount: 100), now: Self.t0) == .created }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(made == 10, "ten refunds of 100 fit in 1000, never more")
    }

    @Test(arguments: Backend.available)
    func cancelAndExpiry(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let store = SQLPaymentStore(database: h.db)
        let p = try await Self.authorized(store)
        let cancel = Self.op(.cancel, p, amount: p.amount)
        #expect(try await store.beginOperation(cancel, now: Self.t0) == .created)
        #expect(try await store.finishOperation(cancel.id, status: .succeeded, code: nil, reference: nil, now: Self.t0))
        let canceled = try #require(try await store.get(p.id))
        #expect(canceled.status == .canceled && canceled.code == "requested")
        #expect(try await store.beginOperation(Self.op(.capture, p, amount: 1), now: Self.t0) == .refused(.notCapturable))

        // An authorization past its expiry: swept (or refused at capture) as canceled, expired.
        let late = Self.t0.addingTimeInterval(3601)
        let a = try await Self.authorized(store), b = try await Self.authorized(store)
        #expect(try await store.beginOperation(Self.op(.capture, a, amount: 1), now: late) == .refused(.authorizationExpired))
        #expect(try await store.get(a.id)?.code == "expired")
        #expect(try await store.expireAuthorizations(nil, now: Self.t0) == [])
        #expect(try await store.expireAuthorizations(nil, now: late) == [b.id])
        #expect(try await store.get(b.id)?.status == .canceled)
        // A dropped intent frees its key and its payment.
        let c = try await Self.authorized(store)
        let capture = Self.op(.capture, c, amount: 1)
        #expect(try await store.beginOperation(capture, now: Self.t0) == .created)
        try await store.abandonOperation(capture.id)
        #expect(try await store.operation(capture.id) == nil)
        #expect(try await store.beginOperation(Self.op(.capture, c, amount: 1, key: capture.idempotencyKey), now: Self.t0) == .created)
    }
}
