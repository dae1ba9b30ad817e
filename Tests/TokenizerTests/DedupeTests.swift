import CardRules
import Foundation
import Payments
import Store
import Testing
import Tokenizer
import VaultCrypto
import VaultOpen

/// Dedupe (docs/dedupe.md), on every backend, with a real opener and real key files as the
/// gateway's fingerprints: tokenize's `dedupe` answers the newest live reusable token of the same
/// card, expiry and format; an attach of a card the customer holds answers its instrument.
@Suite struct DedupeTests {
    func card(_ number: String, month: Int = 12, year: Int = 2030, cvc: String? = nil) throws -> CardData {
        try CardData(
            number: SecureBytes(Array(number.utf8)), expiry: CardExpiry(month: month, year: year),
            cvc: cvc.map { SecureBytes(Array($0.utf8)) })
    }

    /// A store of `backend`, a gateway zone on disk (real key files) and a tokenizer over both.
    static func setUp(_ backend: Backend) async throws -> (StoreHarness, FingerprintRotationTests.Zone, Tokenizer) {
        let h = try await backend.make()
        let zone = try FingerprintRotationTests.Zone()
        return (h, zone, Tokenizer(store: h.store, primaryKey: zone.publicKey, fingerprinter: zone.fingerprinter))
    }

    /// The envelope an attach stores: the token's, carrying the gateway's fingerprint.
    func sealed(_ tokenizer: Tokenizer, _ number: String, month: Int = 12, year: Int = 2030) async throws -> CardEnvelope {
        let r = try await tokenizer.tokenize(card(number, month: month, year: year))
        var e = r.envelope
        e.card.fingerprint = r.fingerprint
        return e
    }

    @Test(arguments: Backend.available)
    func tokenizeAnswersTheExistingReusableTokenOfTheSameCard(_ backend: Backend) async throws {
        let (h, zone, tokenizer) = try await Self.setUp(backend)
        defer { Task { await h.cleanup() }; try? FileManager.default.removeItem(atPath: zone.dir) }
        let visa = "4242424242424242"

        let first = try await tokenizer.tokenize(card(visa), dedupe: true)
        #expect(!first.reused && !first.record.singleUse && first.record.fingerprint != nil)
        let again = try await tokenizer.tokenize(card(visa), dedupe: true)
        #expect(again.reused && again.record.token == first.record.token)
        #expect(try await h.store.count() == 1)

        // Not asked: a new token (single-use by default), never answered to a later dedupe.
        let plain = try await tokenizer.tokenize(card(visa), dedupe: false)
        #expect(!plain.reused && plain.record.singleUse && plain.record.token != first.record.token)
        #expect(try await tokenizer.tokenize(card(visa), dedupe: true).record.token == first.record.token)
        // Another expiry (a reissued card), another format, another card: new tokens.
        let reissued = try await tokenizer.tokenize(card(visa, month: 1, year: 2032), dedupe: true)
        #expect(!reissued.reused && reissued.record.token != first.record.token)
        let shaped = try await tokenizer.tokenize(card(visa), format: .card, dedupe: true)
        #expect(!shaped.reused && !shaped.record.token.hasPrefix("tok_"))
        #expect(try await tokenizer.tokenize(card(visa), format: .card, dedupe: true).record.token == shaped.record.token)
        let other = try await tokenizer.tokenize(card("5555555555554444"), dedupe: true)
        #expect(!other.reused)
        // A reusable token made without dedupe is found by a later one (the newest of the card).
        let reusable = try await tokenizer.tokenize(card(visa), singleUse: false, dedupe: false)
        #expect(!reusable.record.singleUse)
        #expect(try await tokenizer.tokenize(card(visa), dedupe: true).record.token == reusable.record.token)
        #expect(try await h.store.count() == 6)


        // A token whose CVC is still held is in its maker's first-payment window: never answered
        // (its CVC would go with another caller's payment).
        let withHeldCVC = try await tokenizer.tokenize(card(visa, cvc: "999"), singleUse: false, dedupe: false)
        #expect(withHeldCVC.record.hasCVC)
        #expect(try await tokenizer.tokenize(card(visa), dedupe: true).record.token == reusable.record.token)

        // With a CVC: the token's envelope becomes the new sealing, whose data key the CVC's field
        // is under, and the CVC is held for it: the gateway opens the CVC with the stored envelope.
        let before = try #require(try await h.store.get(reusable.record.token, now: Date())).envelope
        let withCVC = try await tokenizer.tokenize(card(visa, cvc: "123"), dedupe: true)
        #expect(withCVC.reused && withCVC.record.token == reusable.record.token && withCVC.record.hasCVC)
        let stored = try #require(try await h.store.get(reusable.record.token, now: Date())).envelope
        #expect(stored.id != before.id && stored.fields[.cvc] == nil)
        let read = try await tokenizer.record(reusable.record.token)
        #expect(read.hasCVC && read.envelope.id == stored.id)
        let opened = try zone.fingerprinter.opener.open(read.fullEnvelope)
        #expect(opened.card.cvc?.withUnsafeBytes { Array($0) } == Array("123".utf8))
        #expect(try await h.store.count() == 7)
        // Now both newer tokens hold a CVC: the oldest reusable one of the card is answered.
        #expect(try await tokenizer.tokenize(card(visa), dedupe: true).record.token == first.record.token)
        // The swap is refused when the envelope's data key changed (a rewrap in between).
        #expect(try await !h.store.replaceEnvelope(of: first.record.token, oldKey: "resealed", with: stored, now: Date()))

        // The gateway down: no fingerprint to match by, so a new token (its fingerprint filled later).
        zone.fingerprinter.available = false
        let blind = try await tokenizer.tokenize(card(visa), dedupe: true)
        #expect(!blind.reused && blind.record.fingerprint == nil && !blind.record.singleUse)
        zone.fingerprinter.available = true

        // A token with less than half a TTL to live, or expired, is not answered.
        let soon = Int64(Date().addingTimeInterval(60).timeIntervalSince1970 * 1000)
        try await h.sql("UPDATE vault_tokens SET expires_at = \(soon) WHERE token = '\(first.record.token)'")
        #expect(try await !tokenizer.tokenize(card(visa), dedupe: true).reused)
        try await h.sql("UPDATE vault_tokens SET expires_at = 0 WHERE single_use = \(backend == .sqlite ? "0" : "FALSE")")
        #expect(try await !tokenizer.tokenize(card(visa), dedupe: true).reused)

        // No gateway at all: dedupe cannot match, and says so.
        let alone = Tokenizer(store: h.store, primaryKey: zone.publicKey)
        await #expect(throws: VaultError.self) { _ = try await alone.tokenize(try card(visa), dedupe: true) }
    }

    @Test(arguments: Backend.available)
    func dedupeFindsTheCardAcrossAFingerprintKeyRotation(_ backend: Backend) async throws {
        let (h, zone, tokenizer) = try await Self.setUp(backend)
        defer { Task { await h.cleanup() }; try? FileManager.default.removeItem(atPath: zone.dir) }
        let visa = "4111111111111111"
        let underA = try await tokenizer.tokenize(card(visa), dedupe: true).record
        // B added and promoted: the gateway answers B's fingerprint first, A's beside it.
        let b = try KeyFiles.addFingerprintKey(directory: zone.dir)
        _ = try KeyFiles.promoteFingerprintKey(directory: zone.dir, kid: b)
        try zone.reload()
        let found = try await tokenizer.tokenize(card(visa), dedupe: true)
        #expect(found.reused && found.record.token == underA.token)
    }

    func instrument(_ customer: String, _ envelope: CardEnvelope) -> InstrumentRecord {
        InstrumentRecord(id: RandomID.make(prefix: "ins_"), customer: customer, envelope: envelope, createdAt: Date())
    }

    @Test(arguments: Backend.available)
    func attachingACardTheCustomerHoldsAnswersItsInstrument(_ backend: Backend) async throws {
        let (h, zone, tokenizer) = try await Self.setUp(backend)
        defer { Task { await h.cleanup() }; try? FileManager.default.removeItem(atPath: zone.dir) }
        let customers = try await h.customers()
        let alice = CustomerRecord(id: RandomID.make(prefix: "cus_"), reference: nil, createdAt: Date())
        let bob = CustomerRecord(id: RandomID.make(prefix: "cus_"), reference: nil, createdAt: Date())
        try await customers.create(alice)
        try await customers.create(bob)
        func sealed(_ number: String, month: Int = 12, year: Int = 2030) async throws -> CardEnvelope {
            try await self.sealed(tokenizer, number, month: month, year: year)
        }
        let visa = "4242424242424242"
        let events = { () async throws -> [String] in try await EventOutboxTests.events(h.db).map(\.type).filter { $0.hasPrefix("instrument.") } }

        let one = instrument(alice.id, try await sealed(visa))
        #expect(try await customers.attach(one, makeDefault: false, dedupe: true) == .attached)
        // The same card and expiry again: the instrument held, nothing stored.
        let same = instrument(alice.id, try await sealed(visa))
        guard case .existing(let held) = try await customers.attach(same, makeDefault: false, dedupe: true) else {
            Issue.record("the same card was stored twice")
            return
        }
        #expect(held.id == one.id && held.envelope.id == one.envelope.id)
        #expect(try await customers.instruments(of: alice.id).map(\.id) == [one.id])

        // A reissued card (new expiry): the instrument keeps its id, takes the new envelope.
        let reissue = try await sealed(visa, month: 3, year: 2033)
        guard case .updated(let updated) = try await customers.attach(instrument(alice.id, reissue), makeDefault: false, dedupe: true) else {
            Issue.record("a reissued card was not updated")
            return
        }
        #expect(updated.id == one.id && updated.envelope.card.expYear == 2033 && updated.envelope.id == reissue.id)
        let now = try await customers.instruments(of: alice.id)
        #expect(now.map(\.id) == [one.id] && now.first?.envelope.card.expMonth == 3)
        #expect(try await events() == ["instrument.created", "instrument.updated"])
        // The older card typed again: the instrument held, unchanged (never back to an earlier expiry).
        guard case .existing(let kept) = try await customers.attach(instrument(alice.id, try await sealed(visa)), makeDefault: false, dedupe: true) else {
            Issue.record("an older expiry was not answered with the instrument held")
            return
        }
        #expect(kept.id == one.id && kept.envelope.card.expYear == 2033)
        #expect(try await customers.instruments(of: alice.id).first?.envelope.card.expYear == 2033)
        #expect(try await events() == ["instrument.created", "instrument.updated"])

        // Another customer holding the card, another card, a card without a fingerprint, and dedupe off: new instruments.
        #expect(try await customers.attach(instrument(bob.id, try await sealed(visa)), makeDefault: false, dedupe: true) == .attached)
        #expect(try await customers.attach(instrument(alice.id, try await sealed("5555555555554444")), makeDefault: false, dedupe: true) == .attached)
        var bare = try await sealed("4000056655665556")
        bare.card.fingerprint = nil
        #expect(try await customers.attach(instrument(alice.id, bare), makeDefault: false, dedupe: true) == .attached)
        #expect(try await customers.attach(instrument(alice.id, bare), makeDefault: false, dedupe: true) == .attached)
        #expect(try await customers.attach(instrument(alice.id, try await sealed(visa)), makeDefault: false, dedupe: false) == .attached)
        #expect(try await customers.instruments(of: alice.id).count == 5)

        // Made the default when asked, even when it existed.
        let carol = CustomerRecord(id: RandomID.make(prefix: "cus_"), reference: nil, createdAt: Date())
        try await customers.create(carol)
        let mc = instrument(carol.id, try await sealed("5105105105105100"))
        #expect(try await customers.attach(mc, makeDefault: false, dedupe: true) == .attached)
        let amex = instrument(carol.id, try await sealed("378282246310005"))
        #expect(try await customers.attach(amex, makeDefault: false, dedupe: true) == .attached)
        #expect(try await customers.customer(carol.id)?.defaultInstrument == mc.id)
        _ = try await customers.attach(instrument(carol.id, try await sealed("378282246310005")), makeDefault: true, dedupe: true)
        #expect(try await customers.customer(carol.id)?.defaultInstrument == amex.id)

        // A rewrap replaces an envelope with the same card and expiry: no event.
        let table = SQLEnvelopeTable.instruments(h.db)
        let row = try #require(try await table.rows(after: nil, limit: 100).first { $0.id == mc.id })
        var resealed = try CardEnvelope(json: row.envelope)
        resealed.sealedKey = "AAAA" + resealed.sealedKey.dropFirst(4)
        #expect(try await table.replace([EnvelopeChange(row: row, envelope: resealed.json, cvc: nil)]) == [true])
        #expect(try await events().filter { $0 == "instrument.updated" }.count == 1)

        // Unknown customer: nothing stored.
        #expect(try await customers.attach(instrument("cus_nobody", try await sealed(visa)), makeDefault: false, dedupe: true) == .customerNotFound)
    }

    @Test(arguments: Backend.available)
    func concurrentAttachesOfOneCardStoreOneInstrument(_ backend: Backend) async throws {
        let (h, zone, tokenizer) = try await Self.setUp(backend)
        defer { Task { await h.cleanup() }; try? FileManager.default.removeItem(atPath: zone.dir) }
        let customers = try await h.customers()
        let c = CustomerRecord(id: RandomID.make(prefix: "cus_"), reference: nil, createdAt: Date())
        try await customers.create(c)
        var envelopes: [CardEnvelope] = []
        for _ in 0..<8 {
            envelopes.append(try await sealed(tokenizer, "4242424242424242"))
        }
        let outcomes = try await withThrowingTaskGroup(of: AttachOutcome.self) { group in
            for e in envelopes {
                group.addTask { try await customers.attach(self.instrument(c.id, e), makeDefault: false, dedupe: true) }
            }
            return try await group.reduce(into: [AttachOutcome]()) { $0.append($1) }
        }
        #expect(outcomes.filter { $0 == .attached }.count == 1)
        #expect(try await customers.instruments(of: c.id).count == 1)
    }
}
