import Foundation
import Payments
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
}
