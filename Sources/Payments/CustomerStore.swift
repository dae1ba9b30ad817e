import Foundation
import Store
import VaultCrypto

/// A customer (the Stripe model): an id, the merchant's own reference, stored instruments and a
/// default one. No personal data is required; `reference` is whatever the merchant keys on.
public struct CustomerRecord: Sendable, Equatable {
    public var id: String
    public var reference: String?
    public var defaultInstrument: String?
    public var createdAt: Date

    public init(id: String, reference: String?, defaultInstrument: String? = nil, createdAt: Date) {
        self.id = id
        self.reference = reference
        self.defaultInstrument = defaultInstrument
        self.createdAt = createdAt
    }
}

/// A stored instrument: a card envelope kept for reuse, without its CVC (PCI DSS 3.3.1), and
/// its metadata. It does not expire with a token's TTL; detaching deletes the envelope.
public struct InstrumentRecord: Sendable, Equatable {
    public var id: String
    public var customer: String
    /// The envelope (never with a CVC field).
    public var envelope: CardEnvelope
    public var createdAt: Date

    public init(id: String, customer: String, envelope: CardEnvelope, createdAt: Date) {
        self.id = id
        self.customer = customer
        self.envelope = envelope.fields[.cvc] == nil ? envelope : envelope.droppingCVC()
        self.createdAt = createdAt
    }
}

/// Where customers and their instruments live: `SQLCustomerStore` on either backend, one suite.
public protocol CustomerStore: Sendable {
    func create(_ customer: CustomerRecord) async throws(StoreError)
    func customer(_ id: String) async throws(StoreError) -> CustomerRecord?
    /// Instruments of a customer, oldest first.
    func instruments(of customer: String) async throws(StoreError) -> [InstrumentRecord]
    func instrument(_ id: String) async throws(StoreError) -> InstrumentRecord?
    /// Stores an instrument; it becomes the default when the customer has none (or when asked).
    /// False when the customer does not exist.
    func attach(_ instrument: InstrumentRecord, makeDefault: Bool) async throws(StoreError) -> Bool
    /// False when the instrument is not the customer's.
    func setDefault(customer: String, instrument: String) async throws(StoreError) -> Bool
    /// Deletes the instrument (and its envelope); clears the default if it was. False when the
    /// instrument is not the customer's.
    func detach(customer: String, instrument: String) async throws(StoreError) -> Bool
}
