import Foundation
import Hummingbird
import Payments
import SocketHTTP
import Store
import Tokenizer
import VaultCrypto

/// Customers and stored instruments (the Stripe seed): attaching a token turns it into a
/// reusable instrument (its envelope kept without the CVC, the token consumed); payments by
/// customer use the default instrument, without a CVC.
public struct CustomerService: Sendable {
    let tokenizer: Tokenizer
    let customers: any CustomerStore
    let now: @Sendable () -> Date
    /// `customer_reference_unique`: a reference names at most one customer of the store.
    let uniqueReference: Bool

    public init(
        tokenizer: Tokenizer, customers: any CustomerStore, uniqueReference: Bool = false, now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.tokenizer = tokenizer
        self.customers = customers
        self.uniqueReference = uniqueReference
        self.now = now
    }

    /// Makes a customer; with an idempotency key (`key`, in the caller's `scope`), a retry of the
    /// same request answers the customer made the first time (`replayed`), as it is now.
    public func create(
        reference: String?, metadata: Metadata = Metadata(), key: String? = nil, scope: String = "global"
    ) async throws(VaultError) -> (CustomerRecord, replayed: Bool) {
        let metadata = metadata.droppingEmptyValues
        let c = CustomerRecord(id: RandomID.make(prefix: "cus_"), reference: reference, createdAt: now(), metadata: metadata)
        // Metadata is part of the request a key stands for only when given (keys made before metadata existed still replay).
        let fields: [String: String?] = metadata.isEmpty ? ["reference": reference] : ["reference": reference, "metadata": metadata.column]
        let claim = key.map { CreateClaim(scope: scope, kind: "customer", key: $0, requestHash: CreateClaim.requestHash(fields)) }
        switch try await store({ () throws(StoreError) in try await customers.create(c, claim: claim, uniqueReference: uniqueReference) }) {
        case .created: return (c, false)
        case .replay(let id):
            guard let made = try await store({ () throws(StoreError) in try await customers.customer(id) }) else {
                throw VaultError(.customerNotFound, "the customer this idempotency key made has been deleted")
            }
            return (made, true)
        case .keyReused: throw VaultError(.idempotencyKeyReused, "this idempotency key made a customer with another request", field: "idempotency_key")
        case .referenceTaken: throw VaultError(.customerReferenceTaken, "another customer has this reference", field: "reference")
        }
    }

    /// Changes a customer's reference, default instrument and/or metadata.
    public func update(_ id: String, _ change: CustomerChange) async throws(VaultError) {
        switch try await store({ () throws(StoreError) in try await customers.update(id, change, uniqueReference: uniqueReference) }) {
        case .updated: return
        case .customerNotFound: throw VaultError(.customerNotFound, "no customer with that id")
        case .instrumentNotFound: throw VaultError(.instrumentNotFound, "this customer has no instrument with that id", field: "default_instrument")
        case .referenceTaken: throw VaultError(.customerReferenceTaken, "another customer has this reference", field: "reference")
        case .metadataFull: throw VaultError(.metadataInvalid, "metadata has at most \(Metadata.maxKeys) keys", field: "metadata")
        }
    }

    /// Deletes a customer: its instruments' envelopes are deleted, its mandates cancelled.
    public func delete(_ id: String) async throws(VaultError) -> CustomerErasure {
        switch try await store({ () throws(StoreError) in try await customers.delete(id) }) {
        case .erased(let erasure): return erasure
        case .customerNotFound: throw VaultError(.customerNotFound, "no customer with that id")
        case .paymentInFlight:
            throw VaultError(.customerPaymentInFlight, "a payment of this customer's instruments is still in flight; retry once it has settled")
        }
    }

    /// `{"id","deleted":true,"erased":{"instruments":[…],"mandates_cancelled":[…]}}`.
    public static func erasureJSON(_ e: CustomerErasure) -> String { AnswerJSON.encode(Answer.Erasure(e)) }

    public func customer(_ id: String) async throws(VaultError) -> (CustomerRecord, [InstrumentRecord]) {
        guard let c = try await store({ () throws(StoreError) in try await customers.customer(id) }) else {
            throw VaultError(.customerNotFound, "no customer with that id")
        }
        return (c, try await store { () throws(StoreError) in try await customers.instruments(of: id) })
    }

    /// Attaches a token: it becomes an instrument (no CVC); a single-use token is consumed. A card the
    /// customer holds already (same fingerprint) is not stored twice: the existing instrument is
    /// answered (`reused`), with the token's envelope when its expiry differs (docs/dedupe.md).
    public func attach(customer id: String, token: String, makeDefault: Bool) async throws(VaultError) -> (InstrumentRecord, reused: Bool) {
        _ = try await customer(id)
        let record: TokenRecord
        record = try await tokenizer.record(token)
        // A single-use token is consumed: claimed first, so that of two attaches racing on it one
        // wins. A reusable token stays for its other holders (`dedupe` may have answered it to
        // several callers); its held CVC is not the instrument's either way.
        if record.singleUse {
            let claimed: Bool
            do throws(StoreError) { claimed = try await tokenizer.store.delete(token) } catch { throw VaultError(store: error) }
            guard claimed else { throw VaultError(.tokenNotFound, "no live token with that id") }
            tokenizer.dropCVC(token)   // an instrument never carries a CVC (PCI DSS 3.3.1)
        }
        // The instrument keeps the fingerprint the gateway gave the token (and only that one: a
        // fingerprint a caller wrote into its envelope is dropped): its envelope carries it, and
        // the gateway checks it against the card whenever it opens the envelope.
        var envelope = record.envelope
        envelope.card.fingerprint = record.fingerprint
        let instrument = InstrumentRecord(id: RandomID.make(prefix: "ins_"), customer: id, envelope: envelope, createdAt: now())
        switch try await store({ () throws(StoreError) in try await customers.attach(instrument, makeDefault: makeDefault, dedupe: true) }) {
        case .attached: return (instrument, false)
        case .existing(let held), .updated(let held): return (held, true)
        case .customerNotFound: throw VaultError(.customerNotFound, "no customer with that id")
        }
    }

    public func setDefault(customer id: String, instrument: String) async throws(VaultError) {
        guard try await store({ () throws(StoreError) in try await customers.setDefault(customer: id, instrument: instrument) }) else {
            throw VaultError(.instrumentNotFound, "this customer has no instrument with that id")
        }
    }

    public func detach(customer id: String, instrument: String) async throws(VaultError) {
        guard try await store({ () throws(StoreError) in try await customers.detach(customer: id, instrument: instrument) }) else {
            throw VaultError(.instrumentNotFound, "this customer has no instrument with that id")
        }
    }

    /// The instrument a payment by customer uses: the default one.
    func defaultInstrument(of id: String) async throws(VaultError) -> InstrumentRecord {
        let (c, instruments) = try await customer(id)
        guard let def = c.defaultInstrument, let instrument = instruments.first(where: { $0.id == def }) else {
            throw VaultError(.customerHasNoInstrument, "this customer has no default instrument: attach a token first")
        }
        return instrument
    }

    private func store<T>(_ body: () async throws(StoreError) -> T) async throws(VaultError) -> T {
        do throws(StoreError) { return try await body() } catch {
            throw VaultError(store: error)
        }
    }

    /// A customer's JSON; without `instruments` (nil: lists) the field is left out.
    public static func json(_ c: CustomerRecord, _ instruments: [InstrumentRecord]?) -> String {
        AnswerJSON.encode(Answer.Customer(c, instruments))
    }

    public static func instrumentJSON(_ i: InstrumentRecord) -> String { AnswerJSON.encode(Answer.Instrument(i)) }
}
