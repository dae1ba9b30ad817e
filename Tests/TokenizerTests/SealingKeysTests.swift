import CardRules
import Foundation
import Testing
import Tokenizer
import VaultCrypto

/// The tokenizer's sealing keys (`SealingKeys`): which kids an incoming envelope may be sealed to
/// (primary and active yes, retired and unlisted no), and that a swapped-in snapshot is used at
/// once for new cards.
@Suite struct SealingKeysTests {
    static let activeKey = try! PublicKey(rawBytes: Array(repeating: 8, count: 32))
    static let retiredKey = try! PublicKey(rawBytes: Array(repeating: 9, count: 32))
    static let unlistedKey = try! PublicKey(rawBytes: Array(repeating: 10, count: 32))
    static let newPrimary = try! PublicKey(rawBytes: Array(repeating: 11, count: 32))

    /// The suite's `publicKey` is primary; one key active, one retired.
    static func ring() -> SealingKeys {
        SealingKeys(.init(primary: publicKey, statuses: [activeKey.kid: .active, retiredKey.kid: .retired]))
    }

    /// A tokenizer over `keys` with a fresh SQLite store and a fixed clock (January 2027).
    func make(_ keys: SealingKeys) async throws -> (Tokenizer, any TokenStore, @Sendable () -> Void) {
        let h = try await Backend.sqlite.make()
        let t = Tokenizer(store: h.store, keys: keys, now: { Date(timeIntervalSince1970: 1_800_000_000) })
        return (t, h.store, { Task { await h.cleanup() } })
    }

    static func testCard(_ number: String = "4242424242424242") throws -> CardData {
        try CardData(number: SecureBytes(Array(number.utf8)), expiry: CardExpiry(month: 12, year: 2030), cvc: SecureBytes(Array("123".utf8)))
    }

    /// An envelope sealed (by a caller) to `key`.
    static func sealed(to key: PublicKey) throws -> CardEnvelope {
        try CardEnvelope.seal(testCard(), to: key, now: CalendarMonth(year: 2026, month: 11))
    }

    /// An envelope sealed to a retired kid is refused with KEY_RETIRED and nothing is stored.
    @Test func envelopeToARetiredKidIsRefused() async throws {
        let (tokenizer, store, cleanup) = try await make(Self.ring())
        defer { cleanup() }
        let e = await #expect(throws: VaultError.self) { _ = try await tokenizer.tokenize(envelope: Self.sealed(to: Self.retiredKey)) }
        #expect(e?.code == .keyRetired)
        #expect(e?.field == "envelope.kid")
        #expect(try await store.count() == 0)
    }

    /// An envelope sealed to a kid the ring does not list is refused with KEY_MISMATCH.
    @Test func envelopeToAnUnlistedKidIsRefused() async throws {
        let (tokenizer, store, cleanup) = try await make(Self.ring())
        defer { cleanup() }
        let e = await #expect(throws: VaultError.self) { _ = try await tokenizer.tokenize(envelope: Self.sealed(to: Self.unlistedKey)) }
        #expect(e?.code == .keyMismatch)
        #expect(e?.field == "envelope.kid")
        #expect(try await store.count() == 0)
    }

    /// Envelopes sealed to an active kid or to the primary are accepted and stored as sealed.
    @Test func envelopesToActiveAndPrimaryKidsAreAccepted() async throws {
        let (tokenizer, store, cleanup) = try await make(Self.ring())
        defer { cleanup() }
        let active = try await tokenizer.tokenize(envelope: Self.sealed(to: Self.activeKey))
        #expect(active.envelope.kid == Self.activeKey.kid)
        let primary = try await tokenizer.tokenize(envelope: Self.sealed(to: publicKey))
        #expect(primary.envelope.kid == publicKey.kid)
        #expect(try await store.count() == 2)
        #expect(try await tokenizer.record(active.token).envelope.kid == Self.activeKey.kid)
    }

    /// Raw cards are sealed to the primary, never to an active key.
    @Test func rawCardsAreSealedToThePrimary() async throws {
        let (tokenizer, _, cleanup) = try await make(Self.ring())
        defer { cleanup() }
        let r = try await tokenizer.tokenize(Self.testCard())
        #expect(r.envelope.kid == publicKey.kid)
        #expect(tokenizer.primaryKey == publicKey)
    }

    /// After `replace(with:)` a new primary, raw cards are sealed to it at once; the old primary,
    /// now active, still accepts envelopes; a snapshot read before the swap is unchanged.
    @Test func replacingTheSnapshotSwitchesThePrimary() async throws {
        let keys = Self.ring()
        let (tokenizer, _, cleanup) = try await make(keys)
        defer { cleanup() }
        let before = keys.snapshot
        keys.replace(with: .init(
            primary: Self.newPrimary, statuses: [publicKey.kid: .active, Self.activeKey.kid: .active, Self.retiredKey.kid: .retired]))
        #expect(before.primary == publicKey, "a snapshot in hand is not changed by the swap")
        #expect(tokenizer.primaryKey == Self.newPrimary)

        let r = try await tokenizer.tokenize(Self.testCard("5555555555554444"))
        #expect(r.envelope.kid == Self.newPrimary.kid)
        let old = try await tokenizer.tokenize(envelope: Self.sealed(to: publicKey))
        #expect(old.envelope.kid == publicKey.kid)

        // Retiring the old primary in a later swap refuses envelopes sealed to it.
        keys.replace(with: .init(primary: Self.newPrimary, statuses: [publicKey.kid: .retired]))
        let e = await #expect(throws: VaultError.self) { _ = try await tokenizer.tokenize(envelope: Self.sealed(to: publicKey)) }
        #expect(e?.code == .keyRetired)
        // And a key the new snapshot no longer lists at all is unknown.
        let gone = await #expect(throws: VaultError.self) { _ = try await tokenizer.tokenize(envelope: Self.sealed(to: Self.activeKey)) }
        #expect(gone?.code == .keyMismatch)
    }

    /// A snapshot always lists its primary as primary, whatever `statuses` says about it; the
    /// one-key initialiser lists the other keys as active.
    @Test func snapshotListsItsPrimaryAsPrimary() {
        let s = SealingKeys.Snapshot(primary: publicKey, statuses: [publicKey.kid: .retired, Self.activeKey.kid: .active])
        #expect(s.statuses[publicKey.kid] == .primary)
        #expect(s.statuses[Self.activeKey.kid] == .active)
        let simple = SealingKeys.Snapshot(primary: publicKey, others: [Self.activeKey])
        #expect(simple.statuses == [publicKey.kid: .primary, Self.activeKey.kid: .active])
    }
}
