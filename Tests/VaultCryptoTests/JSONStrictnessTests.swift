import CardRules
import Foundation
import Testing
import VaultCrypto

/// JSON written and read by the vault stays strict JSON both ways.
@Suite struct JSONStrictnessTests {
    func readInt(_ text: String) throws(VaultError) -> Int {
        try Array(text.utf8).withUnsafeBytes { raw in
            Result { () throws(VaultError) in
                var r = JSONReader(raw, errorCode: .envelopeMalformed)
                let v = try r.readInt()
                try r.finish()
                return v
            }
        }.get()
    }

    @Test func integersHaveNoLeadingZeros() throws {
        #expect(try readInt("0") == 0)
        #expect(try readInt("-0") == 0)
        #expect(try readInt("12") == 12)
        #expect(try readInt("-12") == -12)
        for bad in ["012", "00", "-01", "0012"] {
            #expect(throws: VaultError.self, "\(bad)") { try readInt(bad) }
        }
    }

    /// A hand-built envelope whose key and field carry quotes still writes valid JSON, which the
    /// strict parser then refuses as malformed instead of reading injected keys.
    @Test func handBuiltEnvelopesCannotInjectJSON() throws {
        let real = try CardEnvelope.seal(
            try CardData(number: SecureBytes(Array("4242424242424242".utf8)), expiry: CardExpiry(month: 12, year: 2030)),
            to: try PublicKey(rawBytes: Array(repeating: 9, count: 32)))
        var forged = real
        forged.sealedKey = #"AAAA","fields":{"pan":"x"},"x":""#
        forged.fields[.pan] = #"AAAA"},"card":{"brand":"amex"#
        let text = forged.json
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(parsed["key"] as? String == forged.sealedKey)
        #expect((parsed["fields"] as? [String: String])?["pan"] == forged.fields[.pan])
        #expect(parsed["x"] == nil)
        #expect(throws: VaultError.self) {
            try Array(text.utf8).withUnsafeBytes { raw in try Result { () throws(VaultError) in try CardEnvelope(json: raw) }.get() }
        }
        // A real envelope round-trips unchanged.
        let again = try Array(real.json.utf8).withUnsafeBytes { raw in try Result { () throws(VaultError) in try CardEnvelope(json: raw) }.get() }
        #expect(again == real)
    }
}
