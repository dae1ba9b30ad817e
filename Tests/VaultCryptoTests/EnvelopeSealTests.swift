import Foundation
import CardRules
import Testing
import VaultCrypto

@Suite struct EnvelopeSealTests {
    let publicKey = try! PublicKey(rawBytes: Array(repeating: 9, count: 32))
    let fingerprintKey = try! FingerprintKey(secureBytes: SecureBytes(Array(repeating: 1, count: 32)))

    @Test func sealsWithMetadataAndFreshIDs() throws {
        let c = try card("4242 4242 4242 4242")
        let a = try CardEnvelope.seal(c, to: publicKey, now: fixedNow)
        let b = try CardEnvelope.seal(c, to: publicKey, now: fixedNow)
        #expect(a.id != b.id)
        #expect(a.id.hasPrefix("env_") && a.id.count == 36)
        #expect(a.sealedKey != b.sealedKey)
        #expect(a.fields[.pan] != b.fields[.pan])
        #expect(Set(a.fields.keys) == [.pan, .exp, .cvc, .name])
        // No fingerprint: sealing never holds the fingerprint key (the gateway computes it).
        #expect(a.card == CardMetadata(brand: .visa, bin: "424242", last4: "4242", length: 16, expMonth: 12, expYear: 2030, fingerprint: nil))
        #expect(!a.json.contains("fingerprint"))
        // Sizes: key box is 32 + 48 bytes; a field is 24 + plaintext + 16.
        #expect(Base64Decoding.bytes(a.sealedKey)?.count == 80)
        #expect(Base64Decoding.bytes(a.fields[.pan]!)?.count == 24 + 16 + 16)
        #expect(Base64Decoding.bytes(a.fields[.exp]!)?.count == 24 + 7 + 16)
    }

    @Test func fingerprintIsKeyedBLAKE2bOfTheDigits() throws {
        let other = try FingerprintKey(secureBytes: SecureBytes(Array(repeating: 2, count: 32)))
        let digits = Array("4242424242424242".utf8)
        let f1 = digits.withUnsafeBytes { fingerprintKey.fingerprint(ofDigits: $0) }
        let f2 = digits.withUnsafeBytes { other.fingerprint(ofDigits: $0) }
        #expect(f1 != f2)
        #expect(!f1.contains("4242"))
    }

    @Test func jsonRoundTripsAndIsStrict() throws {
        let e = try CardEnvelope.seal(try card("378282246310005", cvc: "1234", name: nil), to: publicKey, now: fixedNow)
        #expect(e.fields[.name] == nil)
        #expect(e.card.fingerprint == nil)
        #expect(e.card.bin == "37828" && e.card.last4 == "0005" && e.card.brand == .amex)
        let json = e.json
        #expect(json.hasPrefix("{\"v\":1,\"id\":\"env_"))
        #expect(!json.contains("378282246310005"))
        #expect(try CardEnvelope(json: json) == e)
        #expect(e.droppingCVC().fields[.cvc] == nil)

        let bad: [(String, VaultError.Code)] = [
            (json.replacingFirst("\"v\":1", "\"v\":2"), .envelopeUnsupportedVersion),
            (json.replacingFirst("\"v\":1", "\"v\":\"1\""), .envelopeMalformed),
            (json.replacingFirst("{\"v\":1,", "{\"v\":1,\"extra\":true,"), .envelopeMalformed),
            (json.replacingFirst("\"fields\":{", "\"fields\":{\"ssn\":\"AAAA\","), .envelopeMalformed),
            (json.replacingFirst("\"id\":\"env_", "\"id\":\"tok_"), .envelopeMalformed),
            (json.replacingFirst("\"kid\":\"", "\"kid\":\"X"), .envelopeMalformed),
            (String(json.dropLast()), .envelopeMalformed),
            (json + "x", .envelopeMalformed),
            ("[]", .envelopeMalformed),
            (json.replacingFirst("\"v\":1,", "\"v\":1,\"v\":1,"), .envelopeMalformed),
            // A later version may add keys: the version is what is reported.
            (json.replacingFirst("{\"v\":1,", "{\"v\":2,\"aad\":\"x\","), .envelopeUnsupportedVersion),
        ]
        for (text, code) in bad {
            let error = #expect(throws: VaultError.self) { try CardEnvelope(json: text) }
            #expect(error?.code == code, "\(text.prefix(60))")
        }
    }

    @Test(arguments: [
        ("4242424242424241", "LUHN_CHECK_FAILED", "card.number"),
        ("9999999999999995", "UNKNOWN_CARD_BRAND", "card.number"),
        ("42424242424242", "INVALID_CARD_LENGTH", "card.number"),
        ("4242x42424242424", "NON_DIGIT_CHARACTERS", "card.number"),
    ])
    func refusesInvalidNumbers(number: String, code: String, field: String) throws {
        let error = #expect(throws: VaultError.self) {
            _ = try CardEnvelope.seal(try card(number), to: publicKey, now: fixedNow)
        }
        #expect(error?.code.rawValue == code)
        #expect(error?.field == field)
        #expect(!(error?.message.contains(number) ?? true))
    }

    @Test func refusesExpiredCardsBadCVCsAndUnacceptedBrands() throws {
        let expired = #expect(throws: VaultError.self) {
            _ = try CardEnvelope.seal(try card("4242424242424242", month: 10, year: 2026), to: publicKey, now: fixedNow)
        }
        #expect(expired?.code.rawValue == "CARD_EXPIRED")
        _ = try CardEnvelope.seal(try card("4242424242424242", month: 11, year: 2026), to: publicKey, now: fixedNow)
        let amexCVC = #expect(throws: VaultError.self) {
            _ = try CardEnvelope.seal(try card("378282246310005", cvc: "123"), to: publicKey, now: fixedNow)
        }
        #expect(amexCVC?.code.rawValue == "INVALID_CVC_LENGTH")
        #expect(amexCVC?.field == "card.cvc")
        let onlyVisa = CardValidator(acceptedBrands: [.visa])
        let brand = #expect(throws: VaultError.self) {
            _ = try CardEnvelope.seal(try card("5555555555554444"), to: publicKey, validator: onlyVisa, now: fixedNow)
        }
        #expect(brand?.code.rawValue == "BRAND_NOT_ACCEPTED")
    }

    @Test func readsCardJSONIntoSecureBytes() throws {
        func parse(_ s: String) throws(VaultError) -> CardData {
            let bytes = Array(s.utf8)
            return try bytes.withUnsafeBytes { b in Result { () throws(VaultError) in try CardData.parseJSON(b) } }.get()
        }
        let c = try parse(#"{"number":"4242-4242-4242-4242","exp_month":"07","exp_year":31,"cvc":"123","name":"Zoë \"Z\" \u00e9"}"#)
        #expect(c.number.withUnsafeBytes { Array($0) } == Array("4242424242424242".utf8))
        #expect(c.expiry == (try CardExpiry(month: 7, year: 2031)))
        #expect(c.name?.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } == "Zoë \"Z\" é")
        let cases: [(String, String, String?)] = [
            (#"{"number":"4242424242424242","exp_month":12}"#, "CARD_FIELD_MISSING", "card.exp_year"),
            (#"{"number":"4242424242424242","exp_month":12,"exp_year":2030,"pin":"1"}"#, "CARD_FIELD_UNKNOWN", "card"),
            // A card number sent as a key is never echoed back in the error.
            (#"{"4242424242424242":"x"}"#, "CARD_FIELD_UNKNOWN", nil),
            (#"{"number":"1","number":"4242424242424242"}"#, "CARD_MALFORMED", nil),
            (#"{"number":4242424242424242,"exp_month":12,"exp_year":2030}"#, "CARD_MALFORMED", "card.number"),
            (#"{"number":"4242424242424242","exp_month":13,"exp_year":2030}"#, "INVALID_EXPIRY_MONTH", "card.exp_month"),
            (#"{"number":"4242\u0000424242424242","exp_month":12,"exp_year":2030}"#, "NON_DIGIT_CHARACTERS", "card.number"),
            (#"{"number":"4242424242424242","exp_month":12,"exp_year":2030,"name":"\#(String(repeating: "x", count: 300))"}"#, "INPUT_TOO_LARGE", "card.name"),
            (#"{"number":"4242424242424242","exp_month":12,"exp_year":2030"#, "CARD_MALFORMED", nil),
            ("\u{FF}", "CARD_MALFORMED", nil),
        ]
        for (json, code, field) in cases {
            let e = #expect(throws: VaultError.self, "\(json.prefix(50))") { _ = try parse(json) }
            #expect(e?.code.rawValue == code, "\(json.prefix(70))")
            if let field { #expect(e?.field == field, "\(json.prefix(70))") }
            #expect(!(e?.message.contains("4242424242424242") ?? false))
            #expect(!(e?.field?.contains("4242") ?? false))
        }
        // Invalid UTF-8 inside a name is refused.
        let bytes = Array(#"{"number":"4242424242424242","exp_month":12,"exp_year":2030,"name":"a"#.utf8) + [0xC3, 0x28] + Array("\"}".utf8)
        let e = #expect(throws: VaultError.self) { _ = try bytes.withUnsafeBytes { b in Result { () throws(VaultError) in try CardData.parseJSON(b) } }.get() }
        #expect(e?.code == .cardMalformed)
    }
}

extension String {
    func replacingFirst(_ target: String, _ replacement: String) -> String {
        guard let r = range(of: target) else { return self }
        return replacingCharacters(in: r, with: replacement)
    }
}
