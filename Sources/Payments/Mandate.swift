import Foundation
import Store

/// A recurring mandate (the Cashfree subscription model): a customer's stored instrument may be
/// charged up to `maxCycles` times, once per `interval`, each charge at most `maxAmount`, until
/// `expiresAt` or cancellation. Each cycle is one idempotent payment.
public struct MandateRecord: Sendable, Equatable {
    public enum Interval: String, Sendable, CaseIterable { case day, week, month }
    public enum Status: String, Sendable { case active, cancelled }

    public var id: String
    public var customer: String
    public var instrument: String
    /// The plan amount (the default charge), minor units.
    public var amount: Int
    public var maxAmount: Int
    public var currency: String
    public var interval: Interval
    public var maxCycles: Int
    public var status: Status
    public var createdAt: Date
    public var expiresAt: Date

    public init(
        id: String, customer: String, instrument: String, amount: Int, maxAmount: Int, currency: String, interval: Interval,
        maxCycles: Int, status: Status = .active, createdAt: Date, expiresAt: Date
    ) {
        self.id = id
        self.customer = customer
        self.instrument = instrument
        self.amount = amount
        self.maxAmount = maxAmount
        self.currency = currency
        self.interval = interval
        self.maxCycles = maxCycles
        self.status = status
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }

    /// When cycle `n` (from 1) may be charged: the start plus n-1 intervals (UTC calendar).
    public func dueDate(ofCycle n: Int) -> Date {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let steps = n - 1
        switch interval {
        case .day: return calendar.date(byAdding: .day, value: steps, to: createdAt) ?? createdAt
        case .week: return calendar.date(byAdding: .day, value: 7 * steps, to: createdAt) ?? createdAt
        case .month: return calendar.date(byAdding: .month, value: steps, to: createdAt) ?? createdAt
        }
    }
}

/// Where mandates live (`SQLCustomerStore` implements it, on either backend).
public protocol MandateStore: Sendable {
    /// Stores a new mandate; with `claim`, under an idempotency key (`CreateClaim`: `.claimed`
    /// when it was made now).
    func createMandate(_ mandate: MandateRecord, claim: CreateClaim?) async throws(StoreError) -> CreateClaim.Outcome
    func mandate(_ id: String) async throws(StoreError) -> MandateRecord?
    /// False when there was no active mandate with that id.
    func cancelMandate(_ id: String) async throws(StoreError) -> Bool
}

extension MandateStore {
    /// Stores a new mandate without an idempotency key.
    public func createMandate(_ mandate: MandateRecord) async throws(StoreError) {
        _ = try await createMandate(mandate, claim: nil)
    }
}
