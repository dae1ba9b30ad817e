import Foundation
import Store
import Testing

/// The ledger operations that settling unknown outcomes needs (LedgerStore+Settlement), on both
/// backends: every change by the holder of a lease is a compare-and-swap on the attempt count and
/// the lease it holds, a row is given up once whichever gateway sees it, and an operator's outcome
/// never overwrites another.
@Suite("Settling the processor ledger, on both backends")
struct LedgerSettlementTests {
    func sending(_ id: String = "pay_" + UUID().uuidString.prefix(8).lowercased(), at t: Date, lease: TimeInterval = 30) -> LedgerEntry {
        LedgerEntry(
            paymentID: id, processor: "relay:test", amount: 1000, currency: "EUR", envelopeID: "env_1", state: .sending,
            leaseUntil: t.addingTimeInterval(lease), deadlineAt: t.addingTimeInterval(3600), createdAt: t)
    }

    @Test(arguments: StoreBackend.available)
    func onlyTheHolderOfALeaseRenewsForgetsOrLeavesItUnknown(_ backend: StoreBackend) async throws {
        let (a, b, cleanup) = try await backend.make()
        defer { Task { await cleanup() } }
        let one = LedgerStore(database: a), two = LedgerStore(database: b)
        let t = Date()
        let e = sending(at: t)
        #expect(try await one.claim(e) == .claimed)
        let held = try #require(e.leaseUntil)
        // Another lease value (a call that lost its lease) changes nothing.
        #expect(try await two.renew(e.paymentID, attempts: 1, heldUntil: held.addingTimeInterval(1), leaseUntil: t.addingTimeInterval(60), countSend: true, now: t) == false)
        #expect(try await two.markUnknown(e.paymentID, attempts: 1, heldUntil: held.addingTimeInterval(1), reason: "x", nextTryAt: t, deadlineAt: t, now: t) == false)
        #expect(try await two.forget(e.paymentID, attempts: 1, heldUntil: held.addingTimeInterval(1)) == false)
        // The holder renews, counting a send; its old lease value is no longer its.
        let renewed = t.addingTimeInterval(45)
        #expect(try await one.renew(e.paymentID, attempts: 1, heldUntil: held, leaseUntil: renewed, countSend: true, now: t))
        #expect(try await one.renew(e.paymentID, attempts: 1, heldUntil: held, leaseUntil: renewed, countSend: false, now: t) == false)
        let row = try #require(try await two.entry(e.paymentID))
        #expect(row.attempts == 2 && row.leaseUntil.map(Millis.of) == Millis.of(renewed) && row.state == .sending)
        #expect(try await two.markUnknown(e.paymentID, attempts: 2, heldUntil: renewed, reason: "timeout", nextTryAt: t, deadlineAt: t.addingTimeInterval(10), now: t))
        let unknown = try #require(try await one.entry(e.paymentID))
        #expect(unknown.state == .unknown && unknown.leaseUntil == nil && unknown.reason == "timeout" && unknown.deadlineAt.map(Millis.of) == e.deadlineAt.map(Millis.of))
        // Forgotten only under a lease (a status query's), never from `unknown` directly.
        #expect(try await one.forget(e.paymentID, attempts: 2, heldUntil: renewed) == false)
        let lease = t.addingTimeInterval(20)
        let leased = try #require(try await one.lease(e.paymentID, attempts: 2, leaseUntil: lease, now: t))
        #expect(try await two.forget(e.paymentID, attempts: 2, heldUntil: try #require(leased.leaseUntil)))
        #expect(try await one.entry(e.paymentID) == nil)
    }

    @Test(arguments: StoreBackend.available)
    func dueRowsPastDeadlinesAndGivingUpOnce(_ backend: StoreBackend) async throws {
        let (a, b, cleanup) = try await backend.make()
        defer { Task { await cleanup() } }
        let one = LedgerStore(database: a), two = LedgerStore(database: b)
        let t = Date()
        let crashed = sending(at: t.addingTimeInterval(-100), lease: 10)        // a gateway died mid-call
        let waiting = sending(at: t.addingTimeInterval(-100), lease: 10)        // unknown, due
        let late = sending(at: t.addingTimeInterval(-7200), lease: 10)          // past its deadline
        var other = sending(at: t.addingTimeInterval(-100), lease: 10)          // another template's
        other.processor = "relay:other"
        for e in [crashed, waiting, late, other] { _ = try await one.claim(e) }
        #expect(try await one.markUnknown(waiting.paymentID, reason: "500", nextTryAt: t.addingTimeInterval(-1), deadlineAt: t.addingTimeInterval(3600), now: t))
        let due = try await two.dueForSettlement(processor: "relay:test", now: t).map(\.paymentID)
        #expect(Set(due) == [crashed.paymentID, waiting.paymentID], "\(due)")
        let past = try await two.pastDeadline(now: t, defaultDeadline: 86400)
        #expect(past.map(\.paymentID) == [late.paymentID])
        // Two gateways give it up at once: one does.
        async let x = one.giveUp(late.paymentID, attempts: 1, reason: "timeout", now: t)
        async let y = two.giveUp(late.paymentID, attempts: 1, reason: "timeout", now: t)
        #expect(try await [x, y].filter { $0 }.count == 1)
        let given = try #require(try await one.entry(late.paymentID))
        #expect(given.state == .unknown && given.nextTryAt == nil && given.reason == "timeout")
        #expect(try await one.pastDeadline(now: t, defaultDeadline: 86400).isEmpty)
        #expect(try await one.due(now: t.addingTimeInterval(86400)).map(\.paymentID).contains(late.paymentID) == false)
        let counts = try await one.unsettledCount(now: t)
        #expect(counts.unsettled == 4 && counts.pastDeadline == 1)
    }

    @Test(arguments: StoreBackend.available)
    func anOperatorSettlesOnceAndNeverOverAnotherOutcome(_ backend: StoreBackend) async throws {
        let (a, _, cleanup) = try await backend.make()
        defer { Task { await cleanup() } }
        let store = LedgerStore(database: a)
        let t = Date()
        let unknown = sending(at: t.addingTimeInterval(-100), lease: 10), live = sending(at: t), gone = sending(at: t.addingTimeInterval(-100), lease: 10)
        for e in [unknown, live, gone] { _ = try await store.claim(e) }
        #expect(try await store.settleByHand(live.paymentID, status: "succeeded", declineCode: nil, reference: "ch_1", now: t) == .inFlight)
        #expect(try await store.settleByHand(unknown.paymentID, status: "declined", declineCode: nil, reference: nil, now: t) == .settled)
        let row = try #require(try await store.entry(unknown.paymentID))
        #expect(row.state == .done && row.status == "declined" && row.declineCode == "generic_decline")
        #expect(try await store.settleByHand(unknown.paymentID, status: "declined", declineCode: nil, reference: nil, now: t) == .alreadySettled)
        #expect(try await store.settleByHand(unknown.paymentID, status: "declined", declineCode: "fraud", reference: nil, now: t) == .conflict(status: "declined"))
        #expect(try await store.settleByHand(unknown.paymentID, status: nil, declineCode: nil, reference: nil, now: t) == .conflict(status: "declined"))
        #expect(try await store.settleByHand(gone.paymentID, status: nil, declineCode: nil, reference: nil, now: t) == .settled)
        #expect(try await store.entry(gone.paymentID) == nil)
        #expect(try await store.settleByHand("pay_none", status: "succeeded", declineCode: nil, reference: nil, now: t) == .noRow)
    }
}
