import Foundation
import Hummingbird
import Money
import Payments
import SocketHTTP
import Store
import VaultCrypto

/// Recurring mandates on stored instruments: each cycle is one payment, idempotent by
/// (mandate, cycle); a charge outside the mandate is refused with its own code.
public struct MandateService: Sendable {
    let mandates: any MandateStore
    let customers: CustomerService
    let payments: PaymentService
    let now: @Sendable () -> Date

    public init(mandates: any MandateStore, customers: CustomerService, payments: PaymentService, now: @escaping @Sendable () -> Date = Date.init) {
        self.mandates = mandates
        self.customers = customers
        self.payments = payments
        self.now = now
    }

    public func create(
        customer: String, instrument: String?, amount: Int, maxAmount: Int, currency: Currency, interval: MandateRecord.Interval,
        maxCycles: Int, expiresAt: Date
    ) async throws(APIError) -> MandateRecord {
        let (c, instruments) = try await customers.customer(customer)
        guard let chosen = instrument ?? c.defaultInstrument, instruments.contains(where: { $0.id == chosen }) else {
            throw APIError(.instrumentNotFound, "this customer has no such instrument (or no default one)")
        }
        guard amount <= maxAmount else {
            throw APIError(.mandateAmountExceeded, "the plan amount is above max_amount", field: "amount")
        }
        guard expiresAt > now() else {
            throw APIError(.requestFieldInvalid, "expires_at is in the past", field: "expires_at")
        }
        let m = MandateRecord(
            id: RandomID.make(prefix: "mdt_"), customer: customer, instrument: chosen, amount: amount, maxAmount: maxAmount,
            currency: currency.code, interval: interval, maxCycles: maxCycles, createdAt: now(), expiresAt: expiresAt)
        try await store { () throws(StoreError) in try await mandates.createMandate(m) }
        return m
    }

    public func mandate(_ id: String) async throws(APIError) -> MandateRecord {
        guard let m = try await store({ () throws(StoreError) in try await mandates.mandate(id) }) else {
            throw APIError(.mandateNotFound, "no mandate with that id")
        }
        return m
    }

    public func cancel(_ id: String) async throws(APIError) {
        _ = try await mandate(id)
        _ = try await store { () throws(StoreError) in try await mandates.cancelMandate(id) }
    }

    /// Charges cycle `cycle` (from 1) for `amount` (default: the plan amount).
    public func charge(_ id: String, cycle: Int, amount: Int?) async throws(APIError) -> (PaymentRecord, Bool) {
        let m = try await mandate(id)
        let amount = amount ?? m.amount
        let key = "\(Self.keyPrefix)\(m.id):cycle:\(cycle)"
        guard m.status == .active else { throw APIError(.mandateCancelled, "this mandate was cancelled") }
        guard (1...m.maxCycles).contains(cycle) else {
            throw APIError(.mandateCycleInvalid, "cycle is 1 to \(m.maxCycles)", field: "cycle")
        }
        guard amount >= 1, amount <= m.maxAmount else {
            throw APIError(.mandateAmountExceeded, "a charge is at most \(m.maxAmount)", field: "amount")
        }
        let due = m.dueDate(ofCycle: cycle)
        // A cycle that was already charged replays (idempotent) whatever the date.
        // Cycles live in the global scope: their keys are made here, under a prefix no caller may
        // use, so a cycle is charged once whichever peer asks (and rows from before scopes match).
        if let done = try? await payments.payments.find(scope: PaymentScope.global, idempotencyKey: key) {
            return try await payments.pay(.init(source: .mandate(m.id, cycle: cycle, instrument: done.token), amount: amount,
                                                currency: Currency(m.currency)!, idempotencyKey: key, scope: PaymentScope.global))
        }
        guard due < m.expiresAt, now() < m.expiresAt else { throw APIError(.mandateExpired, "this mandate has expired") }
        guard now() >= due else {
            throw APIError(.mandateCycleNotDue, "cycle \(cycle) is due from \(SidecarRoutes.iso(due))", field: "cycle")
        }
        guard let currency = Currency(m.currency) else { throw APIError(.currencyInvalid, "bad currency") }
        return try await payments.pay(.init(source: .mandate(m.id, cycle: cycle, instrument: m.instrument), amount: amount, currency: currency, idempotencyKey: key,
                                            scope: PaymentScope.global))
    }

    private func store<T>(_ body: () async throws(StoreError) -> T) async throws(APIError) -> T {
        do throws(StoreError) { return try await body() } catch {
            throw APIError(VaultError(store: error))
        }
    }

    /// Idempotency keys of mandate cycles; callers' keys may not start with it.
    public static let keyPrefix = "mandate:"

    public static func json(_ m: MandateRecord) -> String {
        "{\"id\":\"\(m.id)\",\"status\":\"\(m.status.rawValue)\",\"customer\":\"\(m.customer)\",\"instrument\":\"\(m.instrument)\","
            + "\"amount\":\(m.amount),\"max_amount\":\(m.maxAmount),\"currency\":\"\(m.currency)\",\"interval\":\"\(m.interval.rawValue)\","
            + "\"max_cycles\":\(m.maxCycles),\"created_at\":\"\(SidecarRoutes.iso(m.createdAt))\",\"expires_at\":\"\(SidecarRoutes.iso(m.expiresAt))\"}"
    }
}
