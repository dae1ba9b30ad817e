import Foundation
import Testing

@Suite(.serialized, .ownThread) struct CardCLITests {
    let cardJSON = #"{"number":"4242 4242 4242 4242","exp_month":12,"exp_year":2030,"cvc":"123","name":"Jo Test"}"#

    @Test func sealCardMakesEnvelopeThatPyNaClAndVaultOpen() throws {
        let keys = try TestKeys()
        defer { keys.remove() }
        let sealed = try vault("seal", "--card", "--key", keys.pub, input: cardJSON + "\n")
        #expect(sealed.status == 0, "\(sealed.stderr)")
        #expect(!containsPAN(sealed.out))
        let env = try JSONSerialization.jsonObject(with: sealed.stdout) as! [String: Any]
        #expect(env["v"] as? Int == 1)
        #expect(env["kid"] as? String == keys.kid)
        let card = env["card"] as! [String: Any]
        #expect(card["brand"] as? String == "visa")
        #expect(card["bin"] as? String == "424242")
        #expect(card["last4"] as? String == "4242")
        #expect(card["fingerprint"] == nil)   // only the gateway computes fingerprints

        let py = try interop("open-envelope", keys.key, input: sealed.out)
        #expect(py.status == 0, "\(py.stderr)")
        let fields = try JSONSerialization.jsonObject(with: py.stdout) as! [String: Any]
        #expect(fields["pan"] as? String == "4242424242424242")
        #expect(fields["exp"] as? String == "12/2030")
        #expect(fields["cvc"] as? String == "123")
        #expect(fields["name"] as? String == "Jo Test")

        let opened = try vault("open", "--card", "--key", keys.key, "--fingerprint-key", "\(keys.dir)/fingerprint.fk", input: sealed.out)
        #expect(opened.status == 0, "\(opened.stderr)")
        #expect(opened.out == #"{"number":"4242424242424242","exp_month":12,"exp_year":2030,"cvc":"123","name":"Jo Test"}"# + "\n")
    }

    @Test func vaultOpensEnvelopesMadeByPyNaClAndRefusesSwappedFields() throws {
        let keys = try TestKeys()
        defer { keys.remove() }
        let made = try interop("make-envelope", keys.pub, input: #"{"number":"5555555555554444","exp_month":3,"exp_year":2031,"cvc":"737","brand":"mastercard"}"#)
        #expect(made.status == 0, "\(made.stderr)")
        let opened = try vault("open", "--card", "--key", keys.key, input: made.out)
        #expect(opened.status == 0, "\(opened.stderr)")
        #expect(opened.out == #"{"number":"5555555555554444","exp_month":3,"exp_year":2031,"cvc":"737"}"# + "\n")

        let swapped = try interop("tamper-envelope", input: made.out)
        let refused = try vault("open", "--card", "--key", keys.key, input: swapped.out)
        #expect(refused.status == 4)
        #expect(refused.stderr.contains("ENVELOPE_FIELD_CORRUPT"))
        #expect(!containsPAN(refused.stderr))
        // Metadata that lies about the card is refused.
        let lying = made.out.replacingOccurrences(of: "\"last4\": \"4444\"", with: "\"last4\": \"1111\"")
        #expect(lying != made.out)
        let mismatch = try vault("open", "--card", "--key", keys.key, input: lying)
        #expect(mismatch.status == 4)
        #expect(mismatch.stderr.contains("ENVELOPE_METADATA_MISMATCH"))
    }

    @Test func cardLinesAndBadCards() throws {
        let keys = try TestKeys()
        defer { keys.remove() }
        let cards = [
            #"{"number":"4242424242424242","exp_month":12,"exp_year":2030,"cvc":"123"}"#,
            #"{"number":"378282246310005","exp_month":1,"exp_year":2031,"cvc":"1234"}"#,
            #"{"number":"5555555555554444","exp_month":2,"exp_year":2032}"#,
        ]
        let sealed = try vault("seal", "--card", "--lines", "--key", keys.pub, input: cards.joined(separator: "\n") + "\n")
        #expect(sealed.status == 0, "\(sealed.stderr)")
        let lines = sealed.out.split(separator: "\n")
        #expect(lines.count == 3)
        #expect(lines[1].contains("\"brand\":\"amex\""))
        let opened = try vault("open", "--card", "--lines", "--key", keys.key, input: sealed.out)
        #expect(opened.out == cards.joined(separator: "\n") + "\n")

        let bad = cards + [#"{"number":"4242424242424241","exp_month":12,"exp_year":2030}"#]
        let refused = try vault("seal", "--card", "--lines", "--key", keys.pub, input: bad.joined(separator: "\n"))
        #expect(refused.status == 6)
        #expect(refused.stderr.contains("line 4: LUHN_CHECK_FAILED"), "\(refused.stderr)")
        #expect(refused.out.split(separator: "\n").count == 3)
        #expect(!containsPAN(refused.stderr))
        for (json, code) in [
            (#"{"number":"4242424242424242","exp_month":12,"exp_year":2020}"#, "CARD_EXPIRED"),
            (#"{"number":"4242424242424242","exp_month":12}"#, "CARD_FIELD_MISSING"),
            (#"{"number":"4242424242424242","exp_month":12,"exp_year":2030,"cvc":"12"}"#, "INVALID_CVC_LENGTH"),
            (#"{"number":"4242424242424242","exp_month":12,"exp_year":2030,"track2":"x"}"#, "CARD_FIELD_UNKNOWN"),
            (#"not json"#, "CARD_MALFORMED"),
        ] {
            let r = try vault("seal", "--card", "--key", keys.pub, input: json)
            #expect(r.status == 6, "\(json)")
            #expect(r.stderr.contains(code), "\(json): \(r.stderr)")
            #expect(!containsPAN(r.stderr))
        }
        let onlyMC = try vault("seal", "--card", "--accept", "mastercard", "--key", keys.pub, input: cards[0])
        #expect(onlyMC.status == 6)
        #expect(onlyMC.stderr.contains("BRAND_NOT_ACCEPTED"))
    }

    /// Issue 19, item 1: no caller or CLI sealing path needs or accepts the fingerprint key. A
    /// fingerprint.fk beside the public key is not read, `--fingerprint-key` is not an option,
    /// and the envelope carries no fingerprint.
    @Test func sealCardNeverTakesTheFingerprintKey() throws {
        let keys = try TestKeys()
        defer { keys.remove() }
        #expect(FileManager.default.fileExists(atPath: "\(keys.dir)/fingerprint.fk"))
        let r = try vault("seal", "--card", "--key", keys.pub, input: cardJSON)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!r.out.contains("fingerprint"))
        try FileManager.default.removeItem(atPath: "\(keys.dir)/fingerprint.fk")
        let without = try vault("seal", "--card", "--key", keys.pub, input: cardJSON)
        #expect(without.status == 0, "\(without.stderr)")
        #expect(!without.out.contains("fingerprint"))
        let refused = try vault("seal", "--card", "--fingerprint-key", "\(keys.dir)/x.fk", "--key", keys.pub, input: cardJSON)
        #expect(refused.status == 64)
        // Scripts written for earlier versions still run.
        #expect(try vault("seal", "--card", "--no-fingerprint", "--key", keys.pub, input: cardJSON).status == 0)
    }

    @Test func validatePrintsMetadataNeverTheNumber() throws {
        let ok = try vault("validate", input: "4242 4242 4242 4242\n")
        #expect(ok.status == 0)
        let info = try JSONSerialization.jsonObject(with: ok.stdout) as! [String: Any]
        #expect(info["brand"] as? String == "visa")
        #expect(info["valid"] as? Bool == true)
        #expect(info["luhn"] as? Bool == true)
        #expect(info["length"] as? Int == 16)
        #expect(info["bin"] as? String == "424242")
        #expect(info["last4"] as? String == "4242")
        #expect(info["cvc_length"] as? Int == 3)
        #expect(!containsPAN(ok.out))

        let bad = try vault("validate", input: "4242424242424241")
        #expect(bad.status == 1)
        #expect(bad.out.contains("LUHN_CHECK_FAILED"))

        let partial = try vault("validate", "--partial", input: "2")
        #expect(partial.status == 0)
        let p = try JSONSerialization.jsonObject(with: partial.stdout) as! [String: Any]
        let candidates = Set(p["candidates"] as? [String] ?? [])
        #expect(candidates.isSuperset(of: ["mastercard", "jcb", "mir"]))

        let nonDigit = try vault("validate", input: "4242abcd42424242")
        #expect(nonDigit.status == 1)
        #expect(nonDigit.out.contains("NON_DIGIT_CHARACTERS"))

        let dir = NSTemporaryDirectory() + "bins-" + UUID().uuidString + ".csv"
        try "bin_start,bin_end,brand,type,issuer,country\n40000566,40000566,visa,debit,Test Bank,US\n".write(toFile: dir, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let withBins = try vault("validate", "--bin-table", dir, input: "4000056655665556")
        #expect(withBins.status == 0, "\(withBins.stderr)")
        #expect(withBins.out.contains("\"issuer\":\"Test Bank\""))
        #expect(withBins.out.contains("\"type\":\"debit\""))
    }

    /// Names are bounded when opened: a crafted envelope cannot overrun the output (review finding).
    @Test func openedNamesAreBoundedAndChecked() throws {
        let keys = try TestKeys()
        defer { keys.remove() }
        func envelope(name: String) throws -> String {
            let data = try JSONSerialization.data(withJSONObject: ["number": "4242424242424242", "exp_month": 12, "exp_year": 2030, "brand": "visa", "name": name])
            return try interop("make-envelope", keys.pub, input: String(decoding: data, as: UTF8.self)).out
        }
        let ok = try vault("open", "--card", "--key", keys.key, input: try envelope(name: String(repeating: "\"", count: 256)))
        #expect(ok.status == 0, "\(ok.stderr)")
        #expect(ok.out.contains(String(repeating: "\\\"", count: 256)))
        for bad in [String(repeating: "\u{01}", count: 1490), String(repeating: "a", count: 257), "tab\there"] {
            let r = try vault("open", "--card", "--key", keys.key, input: try envelope(name: bad))
            #expect(r.status == 4, "\(r.stderr)")
            #expect(r.stderr.contains("ENVELOPE_FIELD_INVALID"))
        }
    }
}
