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
    /// The caller's metadata (README "Metadata").
    public var metadata: Metadata

    public init(id: String, reference: String?, defaultInstrument: String? = nil, createdAt: Date, metadata: Metadata = Metadata()) {
        self.metadata = metadata
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

/// What creating a customer did.
public enum CustomerCreation: Sendable, Equatable {
    case created
    /// The same request was made with this idempotency key: the customer it made.
    case replay(String)
    /// The idempotency key was used for another request.
    case keyReused
    /// `reference` is unique per store (`customer_reference_unique`) and another customer has it.
    case referenceTaken
}

/// A change to a customer: a field left nil is kept.
public struct CustomerChange: Sendable, Equatable {
    /// A new reference (`.some(nil)` removes it).
    public var reference: String??
    /// A new default instrument (one of the customer's).
    public var defaultInstrument: String?
    /// Metadata changes (`Metadata.merged(with:)`: a key given `""` is removed), nil: none.
    public var metadata: Metadata?

    public init(reference: String?? = nil, defaultInstrument: String? = nil, metadata: Metadata? = nil) {
        self.metadata = metadata
        self.reference = reference
        self.defaultInstrument = defaultInstrument
    }
}

/// What updating a customer did.
public enum CustomerUpdate: Sendable, Equatable {
    case updated
    case customerNotFound
    case instrumentNotFound
    case referenceTaken
    /// The metadata changes would leave more than `Metadata.maxKeys` pairs; nothing was changed.
    case metadataFull
}

/// What deleting a customer erased: its instruments (their envelopes deleted, not flagged), the
/// mandates cancelled, and whether its reference was removed.
public struct CustomerErasure: Sendable, Equatable {
    public var customer: String
    public var instruments: [String]
    public var mandatesCancelled: [String]

    public init(customer: String, instruments: [String], mandatesCancelled: [String]) {
        self.customer = customer
        self.instruments = instruments
        self.mandatesCancelled = mandatesCancelled
    }
}

/// What deleting a customer did.
public enum CustomerDeletion: Sendable, Equatable {
    case erased(CustomerErasure)
    case customerNotFound
    /// A payment of one of its instruments is still in flight (`processing` or
    /// `requires_action`): its envelope may be needed again. Nothing was deleted.
    case paymentInFlight
}

/// Where customers and their instruments live: `SQLCustomerStore` on either backend, one suite.
public protocol CustomerStore: Sendable {
    /// Creates a customer; with `claim`, under an idempotency key (`CreateClaim`); with
    /// `uniqueReference`, refused when another customer has its reference.
    func create(_ customer: CustomerRecord, claim: CreateClaim?, uniqueReference: Bool) async throws(StoreError) -> CustomerCreation
    /// Changes a customer's reference, default instrument and/or metadata, in one transaction.
    func update(_ id: String, _ change: CustomerChange, uniqueReference: Bool) async throws(StoreError) -> CustomerUpdate
    /// Deletes a customer with its instruments (envelopes deleted) and reference, cancelling its
    /// mandates, in one transaction.
    func delete(_ id: String) async throws(StoreError) -> CustomerDeletion
    /// `customer_reference_unique` turned on: records the references of existing customers (the
    /// oldest customer of a duplicated reference keeps it). Answers how many customers share a
    /// reference with an older one (they keep it; new duplicates are refused).
    func adoptUniqueReferences() async throws(StoreError) -> Int
    func customer(_ id: String) async throws(StoreError) -> CustomerRecord?
    /// Instruments of a customer, oldest first.
    func instruments(of customer: String) async throws(StoreError) -> [InstrumentRecord]
    func instrument(_ id: String) async throws(StoreError) -> InstrumentRecord?
    /// Stores an instrument; it becomes the default when the customer has none (or when asked).
    /// With `dedupe` and a fingerprint in its envelope, a card the customer holds already (an
    /// instrument with that fingerprint, or one linked to it) is not stored twice: the existing
    /// instrument is answered, its envelope replaced by this one's when this one expires later
    /// (docs/dedupe.md). In one transaction (two attaches of one card store one instrument).
    func attach(_ instrument: InstrumentRecord, makeDefault: Bool, dedupe: Bool) async throws(StoreError) -> AttachOutcome
    /// False when the instrument is not the customer's.
    func setDefault(customer: String, instrument: String) async throws(StoreError) -> Bool
    /// Deletes the instrument (and its envelope); clears the default if it was. False when the
    /// instrument is not the customer's.
    func detach(customer: String, instrument: String) async throws(StoreError) -> Bool

    /// A page of the store's customers, newest first; with `metadata`, those whose metadata holds every pair.
    func list(_ q: ListQuery, metadata: [(key: String, value: String)]) async throws(StoreError) -> ListPage<CustomerRecord>
    /// A page of stored instruments, newest first: of the card with `fingerprint` (the keyed
    /// fingerprint of its envelope's metadata) and of `customer`, each when given.
    func listInstruments(_ q: ListQuery, fingerprint: String?, customer: String?) async throws(StoreError) -> ListPage<InstrumentRecord>
}

/// What an attach did.
public enum AttachOutcome: Sendable, Equatable {
    /// A new instrument was stored.
    case attached
    /// The customer held this card with this expiry (or a later one): that instrument, unchanged
    /// (but made the default when asked).
    case existing(InstrumentRecord)
    /// The customer held this card with an earlier expiry: that instrument, with the new envelope.
    case updated(InstrumentRecord)
    /// No such customer: nothing was stored.
    case customerNotFound
}

extension CustomerStore {
    /// Stores an instrument (no dedupe). False when the customer does not exist.
    public func attach(_ instrument: InstrumentRecord, makeDefault: Bool) async throws(StoreError) -> Bool {
        try await attach(instrument, makeDefault: makeDefault, dedupe: false) != .customerNotFound
    }

    /// A page without a metadata search.
    public func list(_ q: ListQuery) async throws(StoreError) -> ListPage<CustomerRecord> { try await list(q, metadata: []) }

    /// Creates a customer without an idempotency key or a unique reference.
    public func create(_ customer: CustomerRecord) async throws(StoreError) {
        _ = try await create(customer, claim: nil, uniqueReference: false)
    }
}
