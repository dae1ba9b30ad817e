import CardRules
import Foundation
import Testing
import Tokenizer
import VaultCrypto

@Suite struct TokenizerTests {
    final class Clock: @unchecked Sendable { var now = Date(timeIntervalSince1970: 1_800_000_000) }

    func make() async throws -> (Tokenizer, any TokenStore, Clock, @Sendable () -> Void) {
        let h = try await Backend.sqlite.make()
        let clock = Clock()
        let t = Tokenizer(store: h.store, primaryKey: publicKey, fingerprintKey: fingerprintKey, now: { clock.now })
        return (t, h.store, clock, { Task { await h.cleanup() } })
    }

    func card(_ number: String, cvc: String? = "123") throws -> CardData {
        try CardData(number: SecureBytes(Array(number.utf8)), expiry: CardExpiry(month: 12, year: 2030), cvc: cvc.map { SecureBytes(Array($0.utf8)) })
    }

    @Test func tokensAreRandomAndCarryMetadataOnly() async throws {
        let (tokenizer, _, clock, cleanup) = try await make()
        defer { cleanup() }
        let a = try await tokenizer.tokenize(card("4242 4242 4242 4242"))
        let b = try await tokenizer.tokenize(card("4242424242424242"))
        #expect(a.token.hasPrefix("tok_") && a.token.count == 30)
        #expect(RandomID.isWellFormed(a.token, prefix: "tok_"))
        #expect(a.token != b.token)                                  // never derived from the PAN
        #expect(a.card.fingerprint == b.card.fingerprint)            // same card, same keyed fingerprint
        #expect(a.card.brand == .visa && a.card.bin == "42424242" && a.card.last4 == "4242")
        #expect(a.expiresAt == clock.now.addingTimeInterval(900))
        #expect(a.cvcExpiresAt == clock.now.addingTimeInterval(300))
        #expect(a.hasCVC && a.envelope.fields[.cvc] == nil)
        let read = try await tokenizer.record(a.token)
        #expect(read.card == a.card)
        clock.now = clock.now.addingTimeInterval(901)
        let gone = await #expect(throws: VaultError.self) { _ = try await tokenizer.record(a.token) }
        #expect(gone?.code == .tokenNotFound)
    }

    @Test func invalidCardsStoreNothing() async throws {
        let (tokenizer, store, _, cleanup) = try await make()
        defer { cleanup() }
        for (number, code) in [("4242424242424241", "LUHN_CHECK_FAILED"), ("9999999999999995", "UNKNOWN_CARD_BRAND")] {
            let e = await #expect(throws: VaultError.self) { _ = try await tokenizer.tokenize(card(number)) }
            #expect(e?.code.rawValue == code)
        }
        let cvc = await #expect(throws: VaultError.self) { _ = try await tokenizer.tokenize(card("4242424242424242", cvc: "12")) }
        #expect(cvc?.code.rawValue == "INVALID_CVC_LENGTH")
        #expect(try await store.count() == 0)
    }

    @Test func envelopesFromCallersAreCheckedForKidAndMetadata() async throws {
        let (tokenizer, store, _, cleanup) = try await make()
        defer { cleanup() }
        let ok = try await tokenizer.tokenize(envelope: try sampleEnvelope())
        #expect(ok.card.last4 == "4242")

        let otherKey = try PublicKey(rawBytes: Array(repeating: 8, count: 32))
        let foreign = try CardEnvelope.seal(card("4242424242424242"), to: otherKey, fingerprintKey: nil, now: CalendarMonth(year: 2026, month: 11))
        let e1 = await #expect(throws: VaultError.self) { _ = try await tokenizer.tokenize(envelope: foreign) }
        #expect(e1?.code == .keyMismatch)

        var lying = try sampleEnvelope()
        lying.card.bin = "4242"
        let e2 = await #expect(throws: VaultError.self) { _ = try await tokenizer.tokenize(envelope: lying) }
        #expect(e2?.code == .envelopeMetadataInvalid)
        var unknown = try sampleEnvelope()
        unknown.card.brand = CardBrand(rawValue: "nonesuch")
        let e3 = await #expect(throws: VaultError.self) { _ = try await tokenizer.tokenize(envelope: unknown) }
        #expect(e3?.code == .envelopeMetadataInvalid)
        var expired = try sampleEnvelope()
        expired.card.expYear = 2020
        let e4 = await #expect(throws: VaultError.self) { _ = try await tokenizer.tokenize(envelope: expired) }
        #expect(e4?.code.rawValue == "CARD_EXPIRED")
        #expect(try await store.count() == 1)
    }

    @Test func deleteRemovesTheEnvelope() async throws {
        let (tokenizer, store, _, cleanup) = try await make()
        defer { cleanup() }
        let r = try await tokenizer.tokenize(card("5555555555554444"))
        try await tokenizer.delete(r.token)
        #expect(try await store.count() == 0)
        let again = await #expect(throws: VaultError.self) { try await tokenizer.delete(r.token) }
        #expect(again?.code == .tokenNotFound)
        let malformed = await #expect(throws: VaultError.self) { _ = try await tokenizer.record("tok_4242424242424242") }
        #expect(malformed?.code == .tokenNotFound)
    }
}
