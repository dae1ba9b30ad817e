import CardRules
import Foundation
import Store
import Testing
import Tokenizer
import VaultCrypto
import VaultOpen

/// Issue 37: outside the gateway zone a card shows at most its brand, length, last 4 and a prefix
/// of min(6, length − 10) digits (DESIGN §1); a withheld fingerprint still makes the token; card-
/// shaped tokens pass no brand's card rules (DESIGN §9).
@Suite struct VisibleDigitsTests {
    final class Clock: @unchecked Sendable { var now = Date(timeIntervalSince1970: 1_800_000_000) }

    static func card(_ number: String, cvc: String? = nil) throws -> CardData {
        try CardData(number: SecureBytes(Array(number.utf8)), expiry: CardExpiry(month: 12, year: 2030), cvc: cvc.map { SecureBytes(Array($0.utf8)) })
    }

    /// A Luhn-valid number of `length` digits beginning with `prefix`.
    static func luhn(_ prefix: String, length: Int) -> String {
        var body = prefix + String(repeating: "3", count: length - prefix.count - 1)
        for d in 0...9 where Luhn.isValid((body + "\(d)").utf8) {
            body += "\(d)"
            break
        }
        return body
    }

    @Test func tokensAndStoredRowsShowTheVisiblePrefixOnly() async throws {
        let h = try await Backend.sqlite.make()
        let g = try TokenizerTests.Gateway()
        defer { Task { await h.cleanup(); try? FileManager.default.removeItem(atPath: g.dir) } }
        let tokenizer = Tokenizer(store: h.store, primaryKey: g.publicKey, fingerprinter: g.fingerprinter)
        // Maestro 12, Visa 13, Diners 14, Amex 15, Visa 16, Maestro 19.
        let cards = [("6759", 12, "67"), ("4", 13, "4"), ("36", 14, "36"), ("37", 15, "37"), ("4242", 16, "4242"), ("6759", 19, "6759")]
        for (prefix, length, _) in cards {
            let pan = Self.luhn(prefix, length: length)
            let r = try await tokenizer.tokenize(Self.card(pan))
            let visible = min(6, length - 10)
            #expect(r.card.bin == String(pan.prefix(visible)), "\(length)")
            #expect(r.card.fingerprint != nil, "\(length)")
            // The row's column and the stored envelope's clear metadata alike: at least 6 digits hidden.
            let row = try await h.db.query("SELECT bin, envelope FROM vault_tokens WHERE token = ?", [r.token])
            #expect(try row[0].string(0) == String(pan.prefix(visible)))
            let stored = try CardEnvelope(json: try row[0].string(1))
            #expect(stored.card.bin == String(pan.prefix(visible)))
            let text = try row[0].string(1)
            #expect(!text.contains(String(pan.prefix(visible + 1))), "\(length)")
            #expect(length - stored.card.bin.count - 4 >= 6)
        }
    }

    @Test func anEnvelopeSealedWithTheLongerBINIsAcceptedAndStoredCut() async throws {
        let h = try await Backend.sqlite.make()
        let g = try TokenizerTests.Gateway()
        defer { Task { await h.cleanup(); try? FileManager.default.removeItem(atPath: g.dir) } }
        let tokenizer = Tokenizer(store: h.store, primaryKey: g.publicKey, fingerprinter: g.fingerprinter)
        var old = try CardEnvelope.seal(Self.card("4242424242424242"), to: g.publicKey, now: CalendarMonth(year: 2026, month: 1))
        old.card.bin = "42424242"   // as an earlier version sealed it
        let r = try await tokenizer.tokenize(envelope: old)
        #expect(r.card.bin == "424242" && r.envelope.card.bin == "424242" && r.card.fingerprint != nil)
        let text = try await h.db.query("SELECT envelope FROM vault_tokens WHERE token = ?", [r.token])[0].string(0)
        #expect(!text.contains("42424242\""))
        // The gateway opens the cut envelope and the old one alike (its metadata check accepts both).
        #expect(try g.fingerprinter.opener.fingerprint(of: r.envelope) == r.card.fingerprint)
        #expect(try g.fingerprinter.opener.fingerprint(of: old) == r.card.fingerprint)
        // A BIN of neither length, or one that is not the card's, is refused.
        var wrong = old
        wrong.card.bin = "4242424"
        let refused = await #expect(throws: VaultError.self) { _ = try await tokenizer.tokenize(envelope: wrong) }
        #expect(refused?.code == .envelopeMetadataInvalid)
        // Past the visible prefix the older BIN is never compared (an answer that depended on
        // those digits would tell an envelope's sealer whether it guessed hidden digits right); a
        // prefix that is not the card's is refused.
        var past = old
        past.card.bin = "42424243"
        #expect(try g.fingerprinter.opener.fingerprint(of: past) == r.card.fingerprint)
        var lying = old
        lying.card.bin = "42434242"
        #expect(throws: VaultError.self) { _ = try g.fingerprinter.opener.fingerprint(of: lying) }
    }

    /// A gateway whose guessing limit withholds every fingerprint (as past a group's limit).
    final class WithholdingFingerprinter: Fingerprinter, @unchecked Sendable {
        let real: OpenerFingerprinter
        private let lock = NSLock()
        private var _withhold = true
        var withhold: Bool {
            get { lock.withLock { _withhold } }
            set { lock.withLock { _withhold = newValue } }
        }
        init(_ real: OpenerFingerprinter) { self.real = real }
        func fingerprints(of envelopes: [CardEnvelope]) async throws(FingerprintFailure) -> [FingerprintAnswer] {
            if withhold { return envelopes.map { _ in .withheld } }
            return try await real.fingerprints(of: envelopes)
        }
    }

    @Test func aWithheldFingerprintStillMakesTheTokenWritesTheEventAndIsFilledLater() async throws {
        let h = try await Backend.sqlite.make()
        let g = try TokenizerTests.Gateway()
        defer { Task { await h.cleanup(); try? FileManager.default.removeItem(atPath: g.dir) } }
        let gateway = WithholdingFingerprinter(g.fingerprinter)
        let clock = Clock()
        let tokenizer = Tokenizer(store: h.store, primaryKey: g.publicKey, fingerprinter: gateway, policy: TokenPolicy(tokenTTL: 3600), now: { clock.now })
        let r = try await tokenizer.tokenize(Self.card("4242424242424242"))
        #expect(r.card.fingerprint == nil)
        let events = try await h.db.query("SELECT type, object_id, data FROM vault_events WHERE type = 'fingerprint.withheld'")
        #expect(events.count == 1)
        #expect(try events[0].string(1) == r.token)
        let data = try JSONSerialization.jsonObject(with: Data(try events[0].string(2).utf8)) as? [String: Any]
        #expect(data?["token"] as? String == r.token && (data?["card"] as? [String: Any])?["bin"] as? String == "424242")
        // The filler does not ask again at once (a guesser's withheld tokens would have the gateway
        // open every one of them every pass): after 5 minutes, then twice as long each time.
        gateway.withhold = false
        let first = try await tokenizer.fillFingerprints()
        #expect(first.filled == 0 && first.refused == 0 && !first.unavailable)
        gateway.withhold = true
        clock.now = clock.now.addingTimeInterval(301)
        let second = try await tokenizer.fillFingerprints()
        #expect(second.filled == 0 && second.refused == 0)
        gateway.withhold = false
        clock.now = clock.now.addingTimeInterval(301)
        #expect(try await tokenizer.fillFingerprints().filled == 0, "withheld again: it waits 10 minutes now")
        // Once the window allows, the fingerprint comes.
        clock.now = clock.now.addingTimeInterval(300)
        #expect(try await tokenizer.fillFingerprints().filled == 1)
        #expect(tokenizer.withheld.count == 0)
        #expect(try await tokenizer.record(r.token).card.fingerprint != nil)
    }

    @Test func cardShapedTokensPassNoBrandsRules() async throws {
        let h = try await Backend.sqlite.make()
        defer { Task { await h.cleanup() } }
        let tokenizer = Tokenizer(store: h.store, primaryKey: publicKey, policy: TokenPolicy(format: .card))
        let table = BrandTable.standard
        for (prefix, length) in [("4242", 16), ("5555", 16), ("37", 15), ("6011", 16), ("3530", 17), ("4", 19), ("2200", 16)] {
            for _ in 0..<40 {
                let pan = Self.luhn(prefix, length: length)
                let r = try await tokenizer.tokenize(Self.card(pan))
                #expect(r.token.count == length && r.token.hasPrefix(r.card.bin) && r.token.hasSuffix(r.card.last4))
                #expect(r.card.bin.count == min(6, length - 10))
                #expect(!table.passesAnyBrand(r.token.utf8), "\(r.token) passes a brand's rules")
                #expect(!CardValidator().validate(digits: Array(r.token.utf8)).valid)
                // One of its own tokens offered as a card number is recognized.
                #expect(await tokenizer.isOwnToken(SecureBytes(Array(r.token.utf8))))
            }
        }
        // A number that passes the rules is never looked up, and a made-up one is not a token.
        #expect(!(await tokenizer.isOwnToken(SecureBytes(Array("4242424242424242".utf8)))))
        #expect(!(await tokenizer.isOwnToken(SecureBytes(Array("4242421234564240".utf8)))))
        // UnionPay's numbers need not pass the Luhn check: any number of the token's shape would be
        // a valid UnionPay card, so none is made.
        let unionpay = "6200000000000005"
        let refused = await #expect(throws: VaultError.self) { _ = try await tokenizer.tokenize(Self.card(unionpay)) }
        #expect(refused?.code == .cardTokenBrandUnsupported)
        #expect(try await tokenizer.tokenize(Self.card(unionpay), format: .tok).token.hasPrefix("tok_"))
    }
}
