import Foundation
import Store

/// A checkout session (the Payrails and Cashfree model): a trusted backend fixes amount,
/// currency, accepted brands and optionally the customer; a less-trusted caller (the checkout
/// page's server, role `tokenize`) may then tokenize one card and pay exactly that, once, before
/// the session expires.
public struct SessionRecord: Sendable, Equatable {
    public enum Status: String, Sendable {
        /// Waiting for a card.
        case open
        /// A payment is being made in it (claimed; back to open if it is declined).
        case paying
        /// Paid (or waiting for 3-D Secure): it cannot be used again.
        case completed
        /// Closed after too many declined attempts (the sidecar's `session_max_attempts`): it
        /// cannot be used again (`SESSION_ATTEMPTS_EXCEEDED`).
        case closed
    }

    public var id: String
    public var amount: Int
    public var currency: String
    /// Accepted brands (`visa`, `mastercard`, …); empty: any.
    public var acceptedBrands: [String]
    public var customer: String?
    public var status: Status
    public var paymentID: String?
    /// Payment attempts that reached the gateway and did not complete the session (declined or
    /// refused).
    public var attempts: Int
    public var createdAt: Date
    public var expiresAt: Date

    public init(
        id: String, amount: Int, currency: String, acceptedBrands: [String], customer: String?, status: Status = .open,
        paymentID: String? = nil, attempts: Int = 0, createdAt: Date, expiresAt: Date
    ) {
        self.attempts = attempts
        self.id = id
        self.amount = amount
        self.currency = currency
        self.acceptedBrands = acceptedBrands
        self.customer = customer
        self.status = status
        self.paymentID = paymentID
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

/// Where sessions live (`SQLPaymentStore` implements it, on either backend).
public protocol SessionStore: Sendable {
    /// Stores a new session; with `claim`, under an idempotency key (`CreateClaim`: `.claimed`
    /// when it was made now).
    func createSession(_ session: SessionRecord, claim: CreateClaim?) async throws(StoreError) -> CreateClaim.Outcome
    func session(_ id: String) async throws(StoreError) -> SessionRecord?
    /// Moves a session from `from` to `to` (recording `paymentID` if given), atomically. False
    /// when it was not in `from` (someone else claimed or completed it). Claiming an `open`
    /// session (`open` to `paying`) clears the payment of its last attempt: a `paying` session's
    /// payment is always the attempt in flight.
    func transitionSession(_ id: String, from: SessionRecord.Status, to: SessionRecord.Status, paymentID: String?) async throws(StoreError) -> Bool
    /// Ends a failed attempt of a session that is `paying`, atomically: counts it, and moves the
    /// session back to `open`, or to `closed` once `maxAttempts` attempts have failed. Returns
    /// the new status, or nil when the session was not `paying`.
    func failSessionAttempt(_ id: String, maxAttempts: Int) async throws(StoreError) -> SessionRecord.Status?
}

extension SessionStore {
    /// Stores a new session without an idempotency key.
    public func createSession(_ session: SessionRecord) async throws(StoreError) {
        _ = try await createSession(session, claim: nil)
    }
}
