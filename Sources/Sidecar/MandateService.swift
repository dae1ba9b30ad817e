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

    /// Makes a mandate; with an idempotency key (`key`, in the caller's `scope`), a retry of the
    /// same request answers the mandate made the first time (`replayed`), as it is now.
    public func create(
        customer: String, instrument: String?, amount: Int, maxAmount: Int, currency: Currency, interval: MandateRecord.Interval,
        maxCycles: Int, expiresAt: Date, key: String? = nil, scope: String = "global"
    ) async throws(VaultError) -> (MandateRecord, replayed: Bool) {
        let (c, instruments) = try await customers.customer(customer)
        guard let chosen = instrument ?? c.defaultInstrument, instruments.contains(where: { $0.id == chosen }) else {
            throw VaultError(.instrumentNotFound, "this customer has no such instrument (or no default one)")
        }
        guard amount <= maxAmount else {
            throw VaultError(.mandateAmountExceeded, "the plan amount is above max_amount", field: "amount")
        }
        guard expiresAt > now() else {
            throw VaultError(.requestFieldInvalid, "expires_at is in the past", field: "expires_at")
        }
        let m = MandateRecord(
            id: RandomID.make(prefix: "mdt_"), customer: customer, instrument: chosen, amount: amount, maxAmount: maxAmount,
            currency: currency.code, interval: interval, maxCycles: maxCycles, createdAt: now(), expiresAt: expiresAt)
        let claim = key.map {
            CreateClaim(scope: scope, kind: "mandate", key: $0, requestHash: CreateClaim.requestHash([
                "customer": customer, "instrument": instrument, "amount": String(amount), "max_amount": String(maxAmount),
                "currency": currency.code, "interval": interval.rawValue, "max_cycles": String(maxCycles),
                "expires_at": String(Int(expiresAt.timeIntervalSince1970)),
            ]))
        }
        switch try await store({ () throws(StoreError) in try await mandates.createMandate(m, claim: claim) }) {
        case .claimed: return (m, false)
        case .replay(let id): return (try await mandate(id), true)
        case .reused: throw VaultError(.idempotencyKeyReused, "this idempotency key made a mandate with another request", field: "idempotency_key")
        }
    }

    public func mandate(_ id: String) async throws(VaultError) -> MandateRecord {
        guard let m = try await store({ () throws(StoreError) in try await mandates.mandate(id) }) else {
            throw VaultError(.mandateNotFound, "no mandate with that id")
        }
        return m
    }

    public func cancel(_ id: String) async throws(VaultError) {
        _ = try await mandate(id)
        _ = try await store { () throws(StoreError) in try await mandates.cancelMandate(id) }
    }

    /// Charges cycle `cycle` (from 1) for `amount` (default: the plan amount).
    public func charge(_ id: String, cycle: Int, amount: Int?) async throws(VaultError) -> (PaymentRecord, Bool) {
        let m = try await mandate(id)
        let amount = amount ?? m.amount
        let key = "\(Self.keyPrefix)\(m.id):cycle:\(cycle)"
        guard m.status == .active else { throw VaultError(.mandateCancelled, "this mandate was cancelled") }
        guard (1...m.maxCycles).contains(cycle) else {
            throw VaultError(.mandateCycleInvalid, "cycle is 1 to \(m.maxCycles)", field: "cycle")
        }
        guard amount >= 1, amount <= m.maxAmount else {
            throw VaultError(.mandateAmountExceeded, "a charge is at most \(m.maxAmount)", field: "amount")
        }
        let due = m.dueDate(ofCycle: cycle)
        // A cycle that was already charged replays (idempotent) whatever the date.
        // Cycles live in the global scope: their keys are made here, under a prefix no caller may
        // use, so a cycle is charged once whichever peer asks (and rows from before scopes match).
        if let done = try? await payments.payments.find(scope: PaymentScope.global, idempotencyKey: key) {
            return try await payments.pay(.init(source: .mandate(m.id, cycle: cycle, instrument: done.token), amount: amount,
                                                currency: Currency(m.currency)!, idempotencyKey: key, scope: PaymentScope.global))
        }
        guard due < m.expiresAt, now() < m.expiresAt else { throw VaultError(.mandateExpired, "this mandate has expired") }
        guard now() >= due else {
            throw VaultError(.mandateCycleNotDue, "cycle \(cycle) is due from \(JSONOut.iso(due))", field: "cycle")
        }
        guard let currency = Currency(m.currency) else { throw VaultError(.currencyInvalid, "bad currency") }
        return try await payments.pay(.init(source: .mandate(m.id, cycle: cycle, instrument: m.instrument), amount: amount, currency: currency, idempotencyKey: key,
                                            scope: PaymentScope.global))
    }

    private func store<T>(_ body: () async throws(StoreError) -> T) async throws(VaultError) -> T {
        do throws(StoreError) { return try await body() } catch {
            throw VaultError(store: error)
        }
    }

    /// Idempotency keys of mandate cycles; callers' keys may not start with it.
    public static let keyPrefix = "mandate:"

    public static func json(_ m: MandateRecord) -> String { AnswerJSON.encode(Answer.Mandate(m)) }
}
