import CardRules
import Foundation
import Testing
import Tokenizer
import VaultCrypto
import VaultOpen

@Suite struct TokenizerTests {
    final class Clock: @unchecked Sendable { var now = Date(timeIntervalSince1970: 1_800_000_000) }

    func make() async throws -> (Tokenizer, any TokenStore, Clock, @Sendable () -> Void) {
        let h = try await Backend.sqlite.make()
        let clock = Clock()
        let t = Tokenizer(store: h.store, primaryKey: publicKey, now: { clock.now })
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
        #expect(a.card.fingerprint == nil)                           // no gateway: no fingerprint (never one made here)
        #expect(a.card.brand == .visa && a.card.bin == "424242" && a.card.last4 == "4242")
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
        let foreign = try CardEnvelope.seal(card("4242424242424242"), to: otherKey, now: CalendarMonth(year: 2026, month: 11))
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
        // A CVC field longer than a 4-digit CVC's (the sidecar holds CVC fields in fixed records).
        var longCVC = try sampleEnvelope()
        longCVC.fields[.cvc] = Data(repeating: 7, count: 48).base64EncodedString()
        let e5 = await #expect(throws: VaultError.self) { _ = try await tokenizer.tokenize(envelope: longCVC) }
        #expect(e5?.code == .envelopeMalformed && e5?.field == "envelope.fields.cvc")
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

    // MARK: - Fingerprints from the gateway zone, CVCs held in memory

    /// A gateway fixture: a real key pair and fingerprint key, and the opener the gateway uses.
    struct Gateway {
        let dir: String
        let publicKey: PublicKey
        let fingerprinter: OpenerFingerprinter

        init() throws {
            dir = NSTemporaryDirectory() + "vault-fp-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            let kid = try KeyFiles.generateKeyPair(directory: dir)
            try KeyFiles.generateFingerprintKey(path: dir + "/fingerprint.fk")
            publicKey = try KeyFiles.loadPublicKey(path: "\(dir)/\(kid.rawValue).pub")
            let opener = EnvelopeOpener(
                ring: try KeyRing(paths: ["\(dir)/\(kid.rawValue).key"]), fingerprintKey: try KeyFiles.loadFingerprintKey(path: dir + "/fingerprint.fk"))
            fingerprinter = OpenerFingerprinter(opener: opener)
        }
    }

    func makeWithGateway() async throws -> (Tokenizer, any TokenStore, Clock, Gateway, @Sendable () -> Void) {
        let h = try await Backend.sqlite.make()
        let clock = Clock()
        let g = try Gateway()
        let t = Tokenizer(store: h.store, primaryKey: g.publicKey, fingerprinter: g.fingerprinter, now: { clock.now })
        let dir = g.dir
        return (t, h.store, clock, g, { Task { await h.cleanup(); try? FileManager.default.removeItem(atPath: dir) } })
    }

    @Test func fingerprintsComeFromTheGatewayAndAreKeyed() async throws {
        let (tokenizer, store, _, g, cleanup) = try await makeWithGateway()
        defer { cleanup() }
        let a = try await tokenizer.tokenize(card("4242 4242 4242 4242"))
        let b = try await tokenizer.tokenize(card("4242424242424242", cvc: nil))
        let c = try await tokenizer.tokenize(card("5555555555554444"))
        let fp = try #require(a.card.fingerprint)
        #expect(FingerprintAnswer.isWellFormed(fp))
        #expect(b.card.fingerprint == fp && c.card.fingerprint != fp)   // same card, same fingerprint
        #expect(try await store.get(a.token, now: Date(timeIntervalSince1970: 1_800_000_000))?.card.fingerprint == fp)
        // The envelope the gateway saw never had the CVC in it.
        #expect(g.fingerprinter.sawCVC == false)
        // It is the keyed hash of the digits (what the gateway's key gives), not something else.
        let key = try KeyFiles.loadFingerprintKey(path: g.dir + "/fingerprint.fk")
        #expect(Array("4242424242424242".utf8).withUnsafeBytes { key.namedFingerprint(ofDigits: $0) } == fp)
        #expect(fp.hasPrefix("fp1_\(key.kid)_"))
    }

    @Test func theGatewayRefusesATamperedEnvelopeAtTokenizeTime() async throws {
        let (tokenizer, store, _, g, cleanup) = try await makeWithGateway()
        defer { cleanup() }
        let good = try CardEnvelope.seal(card("4242424242424242"), to: g.publicKey, now: CalendarMonth(year: 2026, month: 11))
        var lying = good
        lying.card.last4 = "1111"                       // plausible, but not this card's
        let e1 = await #expect(throws: VaultError.self) { _ = try await tokenizer.tokenize(envelope: lying) }
        #expect(e1?.code == .envelopeMetadataMismatch)
        var swapped = good
        swapped.fields[.pan] = try CardEnvelope.seal(card("5555555555554444"), to: g.publicKey).fields[.pan]
        let e2 = await #expect(throws: VaultError.self) { _ = try await tokenizer.tokenize(envelope: swapped) }
        #expect(e2?.code == .envelopeFieldCorrupt)
        var badForm = good
        badForm.card.fingerprint = "not-a-fingerprint"
        let e3 = await #expect(throws: VaultError.self) { _ = try await tokenizer.tokenize(envelope: badForm) }
        #expect(e3?.code == .envelopeMetadataInvalid)
        #expect(try await store.count() == 0)
        let ok = try await tokenizer.tokenize(envelope: good)
        #expect(ok.card.fingerprint != nil)
    }

    /// A gateway that cannot open what the sidecar sealed (it does not hold the primary yet) is
    /// not the caller's fault: a raw card is stored and waits for its fingerprint. A caller's
    /// envelope the gateway refuses is refused with the gateway's code.
    @Test func aGatewayRefusalFailsCallerEnvelopesOnly() async throws {
        let h = try await Backend.sqlite.make()
        defer { Task { await h.cleanup() } }
        let g = try Gateway()
        defer { try? FileManager.default.removeItem(atPath: g.dir) }
        // The sidecar seals to `publicKey`, which the gateway's ring does not hold.
        let tokenizer = Tokenizer(store: h.store, primaryKey: publicKey, fingerprinter: g.fingerprinter)
        let raw = try await tokenizer.tokenize(card("4242424242424242"))
        #expect(raw.card.fingerprint == nil)
        #expect(try await h.store.count() == 1)
        let e = await #expect(throws: VaultError.self) { _ = try await tokenizer.tokenize(envelope: try sampleEnvelope()) }
        #expect(e?.code == .keyMismatch)
        #expect(try await h.store.count() == 1)
    }

    @Test func withoutTheGatewayTokensWaitForTheirFingerprint() async throws {
        let (tokenizer, store, clock, g, cleanup) = try await makeWithGateway()
        defer { cleanup() }
        g.fingerprinter.available = false
        let a = try await tokenizer.tokenize(card("4242424242424242"))
        let b = try await tokenizer.tokenize(card("378282246310005", cvc: "1234"))
        #expect(a.card.fingerprint == nil && b.card.fingerprint == nil)
        #expect(try await tokenizer.fillFingerprints() == (0, 0, true))
        g.fingerprinter.available = true
        let filled = try await tokenizer.fillFingerprints(batch: 1)
        #expect(filled == (2, 0, false))
        let read = try await tokenizer.record(a.token)
        #expect(read.card.fingerprint != nil)
        #expect(try await store.withoutFingerprint(after: "", limit: 10, now: clock.now).isEmpty)
    }

    @Test func theCVCIsHeldInMemoryUntilDroppedOrExpired() async throws {
        let (tokenizer, store, clock, _, cleanup) = try await makeWithGateway()
        defer { cleanup() }
        let a = try await tokenizer.tokenize(card("4242424242424242"))
        let b = try await tokenizer.tokenize(card("5555555555554444"))
        #expect(a.hasCVC)
        // The store has no CVC; the tokenizer gives the held one back, sealed.
        #expect(try await store.get(a.token, now: clock.now)?.cvcField == nil)
        let read = try await tokenizer.record(a.token)
        #expect(read.cvcField == a.cvcField && read.fullEnvelope.fields[.cvc] != nil)
        // Taken once: a second payment racing on the same token gets no CVC.
        #expect(tokenizer.takeCVC(of: read) == a.cvcField)
        #expect(tokenizer.takeCVC(of: read) == nil)
        let c2 = try await tokenizer.tokenize(card("4000056655665556"))
        #expect(tokenizer.dropCVC(c2.token))
        #expect(!tokenizer.dropCVC(c2.token))
        #expect(try await tokenizer.record(a.token).hasCVC == false)
        // b's CVC lives until its TTL (300 s), then is not returned and is purged.
        clock.now = clock.now.addingTimeInterval(299)
        #expect(try await tokenizer.record(b.token).hasCVC)
        clock.now = clock.now.addingTimeInterval(2)
        #expect(try await tokenizer.record(b.token).hasCVC == false)
        let c = try await tokenizer.tokenize(card("6011111111111117"))
        clock.now = clock.now.addingTimeInterval(301)
        #expect(try await tokenizer.purgeExpired().cvcsDropped == 1)
        #expect(tokenizer.cvcs.count == 0)
        _ = c
    }

    @Test func aRewrappedEnvelopeDoesNotGetTheOldCVC() async throws {
        let (tokenizer, store, clock, g, cleanup) = try await makeWithGateway()
        defer { cleanup() }
        let a = try await tokenizer.tokenize(card("4242424242424242"))
        // Another sealing of the same envelope (what rewrap writes): the held CVC no longer belongs.
        let resealed = try CardEnvelope.seal(card("4242424242424242"), to: g.publicKey)
        _ = try await store.delete(a.token)
        var moved = a
        moved.envelope = resealed.droppingCVC()
        moved.cvcField = nil
        try await store.insert(moved)
        #expect(try await tokenizer.record(a.token).hasCVC == false)
        _ = clock
    }

    @Test func heldCVCsAreBounded() {
        let held = HeldCVCs(capacity: 2)
        let t = Date()
        for i in 0..<5 { held.hold("c\(i)", token: "tok_\(i)", sealedKey: "k", expiresAt: t.addingTimeInterval(60)) }
        #expect(held.count == 2)
        // The newest stay; the evicted count as dropped at the next purge.
        #expect(held.field(for: "tok_4", sealedKey: "k", now: t)?.field == "c4")
        #expect(held.field(for: "tok_0", sealedKey: "k", now: t) == nil)
        #expect(held.purge(now: t) == 3)
    }
}

/// The gateway's fingerprint route, in-process: a real opener with a real fingerprint key.
final class OpenerFingerprinter: Fingerprinter, @unchecked Sendable {
    private var _opener: EnvelopeOpener
    private let lock = NSLock()
    private var _available = true
    private var _sawCVC = false
    init(opener: EnvelopeOpener) { _opener = opener }
    /// The opener (a test replaces it as a gateway's reload does).
    var opener: EnvelopeOpener {
        get { lock.withLock { _opener } }
        set { lock.withLock { _opener = newValue } }
    }
    var available: Bool {
        get { lock.withLock { _available } }
        set { lock.withLock { _available = newValue } }
    }
    var sawCVC: Bool { lock.withLock { _sawCVC } }

    func fingerprints(of envelopes: [CardEnvelope]) async throws(FingerprintFailure) -> [FingerprintAnswer] {
        guard available else { throw .unavailable("the gateway is down") }
        if envelopes.contains(where: { $0.fields[.cvc] != nil }) { lock.withLock { _sawCVC = true } }
        let opener = self.opener
        return envelopes.map { e in
            do throws(VaultError) {
                let all = try opener.fingerprints(of: e)
                return .fingerprint(all[0], others: Array(all.dropFirst()))
            } catch {
                return .refused(code: error.code, message: error.message)
            }
        }
    }
}
