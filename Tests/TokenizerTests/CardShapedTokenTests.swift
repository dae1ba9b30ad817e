import CardRules
import Foundation
import Testing
import Tokenizer
import VaultCrypto

/// Card-shaped tokens (docs/card-tokens.md): shape, Luhn, randomness, collisions, refusals, on both stores.
@Suite struct CardShapedTokenTests {
    func card(_ number: String) throws -> CardData {
        try CardData(number: SecureBytes(Array(number.utf8)), expiry: CardExpiry(month: 12, year: 2030), cvc: SecureBytes(Array((number.count == 15 ? "1234" : "123").utf8)))
    }

    func tokenizer(_ h: StoreHarness, luhnValid: Bool = false) -> Tokenizer {
        Tokenizer(store: h.store, primaryKey: publicKey, policy: TokenPolicy(format: .card, cardTokenLuhnValid: luhnValid))
    }

    /// A digit source that answers `script` for every draw (a store seeded with its token collides).
    static func scripted(_ script: [UInt8]) -> CardShapedToken.DigitSource {
        CardShapedToken.DigitSource { n in Array(script.prefix(n)) }
    }

    @Test(arguments: Backend.available)
    func keepsLengthVisiblePrefixLastFourAndFailsLuhn(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let t = tokenizer(h)
        var middles = Set<String>()
        for number in ["4242424242424242", "378282246310005"] {
            let visible = min(6, number.count - 10)   // DESIGN §1: 6 of a 16-digit card, 5 of an Amex
            for _ in 0..<20 {
                let r = try await t.tokenize(card(number))
                #expect(r.token.count == number.count)
                #expect(r.token.prefix(visible) == number.prefix(visible) && r.token.suffix(4) == number.suffix(4))
                #expect(!Luhn.isValid(Array(r.token.utf8)), "a card-shaped token fails the Luhn check by default")
                #expect(r.token != number)
                #expect(CardShapedToken.isWellFormed(r.token))
                middles.insert(String(r.token.dropFirst(visible).dropLast(4)))
                #expect(try await t.record(r.token).envelope.id == r.envelope.id, "it resolves like any token")
            }
        }
        #expect(middles.count > 30, "middles are drawn at random (40 tokens, \(middles.count) distinct middles)")
        // The request's format wins over the policy's; tok_ stays what it was.
        let plain = try await t.tokenize(card("4242424242424242"), format: .tok)
        #expect(RandomID.isWellFormed(plain.token, prefix: "tok_"))
        // Digits that name no token: TOKEN_NOT_FOUND, as any unknown token.
        let unknown = await #expect(throws: VaultError.self) { _ = try await t.record("4242421111111114") }
        #expect(unknown?.code == .tokenNotFound)
    }

    /// `card_token_luhn_valid` no longer makes Luhn-valid tokens (DESIGN §9: a card-shaped token
    /// never passes any brand's card rules): it only lets names of earlier ones be looked up. A
    /// source that draws nothing but a passing middle is refused after its draws.
    @Test func theLegacySettingMakesNoLuhnValidToken() async throws {
        let h = try await Backend.sqlite.make()
        defer { Task { await h.cleanup() } }
        var t = tokenizer(h, luhnValid: true)
        for _ in 0..<20 {
            let r = try await t.tokenize(card("4242424242424242"))
            #expect(!Luhn.isValid(Array(r.token.utf8)) && !BrandTable.standard.passesAnyBrand(r.token.utf8))
            #expect(r.token.hasPrefix("424242") && r.token.hasSuffix("4242"))
        }
        // 424242 424242 4242 is the card itself (it passes): never handed out, drawn again until refused.
        t.cardTokenDigits = Self.scripted(Array("424242".utf8))
        let e = await #expect(throws: VaultError.self) { _ = try await t.tokenize(card("4242424242424242")) }
        #expect(e?.code == .tokenSpaceExhausted)
        #expect(try await h.store.count() == 20, "nothing stored for the refusal")
        // Names: a Luhn-valid run of digits names a token only with the legacy setting.
        #expect(t.isTokenName("4242424242424242") && !tokenizer(h).isTokenName("4242424242424242"))
    }

    @Test(arguments: Backend.available)
    func aCollisionIsDrawnAgainAndExhaustionIsRefused(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        var t = tokenizer(h)
        let taken = Array("000001".utf8)   // 424242 000001 4242 fails the Luhn check
        t.cardTokenDigits = Self.scripted(taken)
        let first = try await t.tokenize(card("4242424242424242"))
        #expect(first.token == "4242420000014242")
        // The next draw collides once, then a fresh middle is stored.
        final class Draws: @unchecked Sendable { var n = 0 }
        let draws = Draws()
        t.cardTokenDigits = CardShapedToken.DigitSource { n in
            draws.n += 1
            return draws.n == 1 ? taken : Array("000002".utf8)
        }
        let second = try await t.tokenize(card("4242424242424242"))
        #expect(second.token == "4242420000024242" && draws.n == 2)
        // Every draw taken: TOKEN_SPACE_EXHAUSTED after the bounded attempts, nothing more stored.
        t.cardTokenDigits = Self.scripted(taken)
        let e = await #expect(throws: VaultError.self) { _ = try await t.tokenize(card("4242424242424242")) }
        #expect(e?.code == .tokenSpaceExhausted)
        #expect(try await h.store.count() == 2)
    }

    /// A brand whose numbers need not pass the Luhn check (UnionPay): every number of a token's
    /// shape would be a valid card of it, so none is made, for a card or an envelope. A card number
    /// in a token's place is not looked up.
    @Test func aBrandWithoutLuhnGetsNoCardShapedToken() async throws {
        let h = try await Backend.sqlite.make()
        defer { Task { await h.cleanup() } }
        let t = tokenizer(h)
        let unionPay = "6212345678901234"   // fails the Luhn check, as UnionPay numbers may
        #expect(!Luhn.isValid(Array(unionPay.utf8)) && CardValidator().validate(digits: Array(unionPay.utf8)).valid)
        let e = await #expect(throws: VaultError.self) { _ = try await t.tokenize(card(unionPay)) }
        #expect(e?.code == .cardTokenBrandUnsupported)
        let envelope = try CardEnvelope.seal(card(unionPay), to: publicKey, validator: CardValidator(), now: CalendarMonth(year: 2026, month: 11))
        let refused = await #expect(throws: VaultError.self) { _ = try await t.tokenize(envelope: envelope) }
        #expect(refused?.code == .cardTokenBrandUnsupported)
        #expect(try await h.store.count() == 0, "nothing stored for the refusals")
        let ok = try await t.tokenize(card(unionPay), format: .tok)
        #expect(ok.token.hasPrefix("tok_"))
        // A card number where a token goes: TOKEN_NOT_FOUND before the store is asked.
        #expect(!t.isTokenName("4242424242424242") && !t.isTokenName(unionPay) && t.isTokenName(RandomID.make(prefix: "tok_")))
        let pan = await #expect(throws: VaultError.self) { _ = try await t.record("4242424242424242") }
        #expect(pan?.code == .tokenNotFound)
    }

    @Test func shortCardsAreRefusedAndTheSpaceIsCounted() async throws {
        let h = try await Backend.sqlite.make()
        defer { Task { await h.cleanup() } }
        let t = tokenizer(h)
        let e = await #expect(throws: VaultError.self) { _ = try await t.tokenize(card("36227206271667")) }   // 14 digits
        #expect(e?.code == .cardTokenSpaceTooSmall)
        #expect(try await h.store.count() == 0)
        // The middle is what the visible prefix and last 4 leave: 6 digits up to 16, then more.
        #expect(CardShapedToken.space(length: 12, luhnValid: false) == 900_000)
        #expect(CardShapedToken.space(length: 14, luhnValid: false) == 900_000)
        #expect(CardShapedToken.space(length: 15, luhnValid: false) == 900_000)
        #expect(CardShapedToken.space(length: 16, luhnValid: false) == 900_000)
        #expect(CardShapedToken.space(length: 16, luhnValid: true) == 100_000)
        #expect(CardShapedToken.space(length: 19, luhnValid: false) == 900_000_000)
        // The count is exact: one completion in ten passes the Luhn check.
        let prefix = Array("3782822".utf8), suffix = Array("0005".utf8)   // a 15-digit card, 4 middle digits free
        var passing = 0
        for m in 0..<10_000 {
            let middle = Array(String(format: "%04d", m).utf8)
            if Luhn.isValid(prefix.dropLast() + middle.prefix(4) + [prefix.last!] + suffix) { passing += 1 }
        }
        #expect(passing == 1_000)
        #expect(!CardShapedToken.isWellFormed("tok_abc") && !CardShapedToken.isWellFormed("42424242424") && !CardShapedToken.isWellFormed("42424242424242424242"))
    }
}
