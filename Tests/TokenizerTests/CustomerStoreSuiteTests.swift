import Foundation
import Payments
import Store
import Testing
import Tokenizer
import VaultCrypto

/// The customer store contract on both backends: instruments without CVC, the default
/// instrument, detaching, and nothing attached to a customer that does not exist.
@Suite struct CustomerStoreSuiteTests {
    @Test(arguments: Backend.available)
    func customersInstrumentsAndDefaults(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let store = try await h.customers()
        let t = Date(timeIntervalSince1970: 1_800_000_000)
        let customer = CustomerRecord(id: RandomID.make(prefix: "cus_"), reference: "merchant-42", createdAt: t)
        try await store.create(customer)
        #expect(try await store.customer(customer.id) == customer)
        #expect(try await store.customer("cus_nothing") == nil)

        let visa = InstrumentRecord(id: RandomID.make(prefix: "ins_"), customer: customer.id, envelope: try sampleEnvelope(), createdAt: t)
        let mc = InstrumentRecord(
            id: RandomID.make(prefix: "ins_"), customer: customer.id, envelope: try sampleEnvelope("5555555555554444"), createdAt: t.addingTimeInterval(1))
        #expect(visa.envelope.fields[.cvc] == nil, "an instrument never keeps a CVC")
        #expect(try await store.attach(visa, makeDefault: false))
        #expect(try await store.customer(customer.id)?.defaultInstrument == visa.id, "the first instrument becomes the default")
        #expect(try await store.attach(mc, makeDefault: false))
        #expect(try await store.customer(customer.id)?.defaultInstrument == visa.id)
        #expect(try await store.instruments(of: customer.id).map(\.id) == [visa.id, mc.id])
        #expect(try await store.instrument(mc.id)?.envelope == mc.envelope)
        #expect(try await store.instrument(mc.id)?.envelope.card.last4 == "4444")

        #expect(try await store.setDefault(customer: customer.id, instrument: mc.id))
        #expect(try await store.customer(customer.id)?.defaultInstrument == mc.id)
        // Someone else's instrument cannot become this customer's default, nor be detached.
        let other = CustomerRecord(id: RandomID.make(prefix: "cus_"), reference: nil, createdAt: t)
        try await store.create(other)
        #expect(try await store.setDefault(customer: other.id, instrument: mc.id) == false)
        #expect(try await store.detach(customer: other.id, instrument: mc.id) == false)
        // Nothing attaches to a customer that does not exist.
        let orphan = InstrumentRecord(id: RandomID.make(prefix: "ins_"), customer: "cus_nothing", envelope: try sampleEnvelope(), createdAt: t)
        #expect(try await store.attach(orphan, makeDefault: true) == false)
        #expect(try await store.instrument(orphan.id) == nil)

        // Detaching the default clears it and deletes the envelope.
        #expect(try await store.detach(customer: customer.id, instrument: mc.id))
        #expect(try await store.customer(customer.id)?.defaultInstrument == nil)
        #expect(try await store.instrument(mc.id) == nil)
        #expect(try await store.instruments(of: customer.id).map(\.id) == [visa.id])
    }

    /// Creation under an idempotency key: the first request makes the customer, the same request
    /// again answers it, another request with the key is refused; keys are per scope.
    @Test(arguments: Backend.available)
    func idempotentCreationAndUniqueReferences(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let store = try await h.customers()
        let t = Date(timeIntervalSince1970: 1_800_000_000)
        func customer(_ reference: String?) -> CustomerRecord { CustomerRecord(id: RandomID.make(prefix: "cus_"), reference: reference, createdAt: t) }
        let claim = CreateClaim(scope: "uid:1000", kind: "customer", key: "k-1", requestHash: "h-a")
        let first = customer("a")
        #expect(try await store.create(first, claim: claim, uniqueReference: false) == .created)
        #expect(try await store.create(customer("a"), claim: claim, uniqueReference: false) == .replay(first.id))
        let other = CreateClaim(scope: "uid:1000", kind: "customer", key: "k-1", requestHash: "h-b")
        #expect(try await store.create(customer("b"), claim: other, uniqueReference: false) == .keyReused)
        let elsewhere = CreateClaim(scope: "uid:2000", kind: "customer", key: "k-1", requestHash: "h-b")
        #expect(try await store.create(customer("b"), claim: elsewhere, uniqueReference: false) == .created)

        // Unique references: "a" is adopted for the oldest customer holding it; a new "a" is refused
        // (and its key is not kept), an update to a taken reference too.
        let duplicate = CustomerRecord(id: RandomID.make(prefix: "cus_"), reference: "a", createdAt: t.addingTimeInterval(5))
        try await store.create(duplicate)
        #expect(try await store.adoptUniqueReferences() == 1, "the later customer sharing a is counted")
        let refused = CreateClaim(scope: "uid:1000", kind: "customer", key: "k-2", requestHash: "h-c")
        #expect(try await store.create(customer("a"), claim: refused, uniqueReference: true) == .referenceTaken)
        let fresh = customer("c")
        #expect(try await store.create(fresh, claim: refused, uniqueReference: true) == .created, "the refused creation kept no claim")
        #expect(try await store.update(fresh.id, CustomerChange(reference: "b"), uniqueReference: true) == .referenceTaken)
        #expect(try await store.update(fresh.id, CustomerChange(reference: "d"), uniqueReference: true) == .updated)
        #expect(try await store.create(customer("c"), claim: nil, uniqueReference: true) == .created, "c was given up by the update")
        #expect(try await store.customer(fresh.id)?.reference == "d")
        #expect(try await store.update(fresh.id, CustomerChange(reference: .some(nil)), uniqueReference: true) == .updated)
        #expect(try await store.customer(fresh.id)?.reference == nil)
        #expect(try await store.create(customer("d"), claim: nil, uniqueReference: true) == .created, "d was given up by removing it")
        #expect(try await store.update("cus_nothing", CustomerChange(reference: "e"), uniqueReference: true) == .customerNotFound)
        #expect(try await store.update(fresh.id, CustomerChange(defaultInstrument: "ins_nothing"), uniqueReference: false) == .instrumentNotFound)
    }

    /// Erasure: a customer's instruments (envelopes) are deleted, its mandates cancelled and its
    /// reference freed, in one transaction; refused, changing nothing, while a payment of one of
    /// its instruments is in flight.
    @Test(arguments: Backend.available)
    func deletingACustomerErasesItsInstruments(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let store = SQLCustomerStore(database: h.db)
        let payments = try await h.payments()
        let t = Date(timeIntervalSince1970: 1_800_000_000)
        let c = CustomerRecord(id: RandomID.make(prefix: "cus_"), reference: "subject", createdAt: t)
        #expect(try await store.create(c, claim: nil, uniqueReference: true) == .created)
        let visa = InstrumentRecord(id: RandomID.make(prefix: "ins_"), customer: c.id, envelope: try sampleEnvelope(), createdAt: t)
        let mc = InstrumentRecord(id: RandomID.make(prefix: "ins_"), customer: c.id, envelope: try sampleEnvelope("5555555555554444"), createdAt: t)
        #expect(try await store.attach(visa, makeDefault: true))
        #expect(try await store.attach(mc, makeDefault: false))
        let mandate = MandateRecord(
            id: RandomID.make(prefix: "mdt_"), customer: c.id, instrument: visa.id, amount: 100, maxAmount: 100, currency: "EUR", interval: .month,
            maxCycles: 3, status: .active, createdAt: t, expiresAt: t.addingTimeInterval(86400 * 90))
        try await store.createMandate(mandate)

        var inFlight = PaymentStoreSuiteTests.intent(token: mc.id, singleUse: false)
        inFlight.request = "customer=\(c.id)&amount=1050&currency=EUR"
        #expect(try await payments.begin(inFlight) == .created)
        #expect(try await store.delete(c.id) == .paymentInFlight)
        #expect(try await store.instruments(of: c.id).count == 2, "nothing was deleted")
        #expect(try await payments.finish(inFlight.id, status: .succeeded, code: nil, reference: "sbx_1", nextAction: nil, now: t))

        let erased = CustomerErasure(customer: c.id, instruments: [visa.id, mc.id].sorted(), mandatesCancelled: [mandate.id])
        #expect(try await store.delete(c.id) == .erased(erased))
        #expect(try await store.customer(c.id) == nil)
        #expect(try await store.instrument(visa.id) == nil)
        #expect(try await store.instrument(mc.id) == nil)
        #expect(try await store.mandate(mandate.id)?.status == .cancelled)
        #expect(try await store.delete(c.id) == .customerNotFound)
        // The envelopes are gone from the table, not flagged.
        #expect(try await store.envelopeTable.kidCounts().values.reduce(0, +) == 0)
        // Its reference is free again.
        let next = CustomerRecord(id: RandomID.make(prefix: "cus_"), reference: "subject", createdAt: t)
        #expect(try await store.create(next, claim: nil, uniqueReference: true) == .created)
        // The payment stays, naming the erased instrument's id only.
        #expect(try await payments.get(inFlight.id)?.status == .succeeded)
    }
}
