import CardRules
import Testing

/// The scanner that keeps card numbers out of free-text fields (idempotency keys, references).
@Suite struct CardNumberScannerTests {
    @Test(arguments: [
        "4242424242424242", "4242-4242-4242-4242", "4242 4242 4242 4242", "x4242424242424242y", "order-4242424242424242",
        "4242.4242.4242.4242", "4242_4242_4242_4242", "4242/4242/4242/4242", "4242 - 4242 - 4242 - 4242", "4242\t4242\t4242\t4242",
        "378282246310005", "3782 822463 10005", "3782-822463-10005", "5555555555554444", "6011000990139424", "4000000000000002",
        "card 4242 4242 4242 4242 12/30", "4242 4242 4242 4242 exp 12/30 cvc 123", "pay for 4000-0000-0000-9995 please",
        "4000000000000000006", "ref:4242424242424242", "é4242424242424242é", "4242424242424242-2030",
        "abc 5105 1051 0510 5100 def", "30569309025904", "3056 930902 5904",
    ])
    func findsCardNumbers(_ text: String) {
        #expect(CardNumberScanner.containsCardNumber(text), "\(text)")
    }

    @Test(arguments: [
        "order-2024-11-24-0001", "order-1", "", "sess-6F1C2B4A-1111-4C1E-9E55-0B7F7A4C2D11", "invoice 2024/11/24 #0001",
        "4242424242424241", "4111-1111-1111-1112", "4242 4242 42", "v1.2.3.4.5.6.7.8.9.10.11.12", "2024-11-24T12:00:00Z",
        "42424242424242424242424", "0000000000000000", "0424242424242424", "subscriber-9", "cus_abcdefghijklmnopqrstuvwxyz",
        "12-34-56-78-90-12-34-56", "order-000123456789", "tel +44 20 7946 0958", "4242 42 42 4242 4242",
    ])
    func leavesOrdinaryValuesAlone(_ text: String) {
        #expect(!CardNumberScanner.containsCardNumber(text), "\(text)")
    }

    /// Every valid test number of every length 12…19 is found, bare and grouped in fours.
    @Test func everyLengthIsFound() {
        var random = SeededRandom(seed: 7)
        for length in 12...19 {
            for _ in 0..<50 {
                let digits = luhnNumber("4" + String(decoding: random.digits(length - 2), as: UTF8.self), length: length)
                let bare = String(decoding: digits, as: UTF8.self)
                #expect(CardNumberScanner.containsCardNumber(bare), "\(bare)")
                let grouped = stride(from: 0, to: digits.count, by: 4).map { String(decoding: digits[$0..<min($0 + 4, digits.count)], as: UTF8.self) }
                // A last group of 1 or 2 digits is not how numbers are written; keep groups ≥ 3.
                if digits.count % 4 == 0 || digits.count % 4 == 3 {
                    #expect(CardNumberScanner.containsCardNumber(grouped.joined(separator: " ")), "\(grouped)")
                    #expect(CardNumberScanner.containsCardNumber("x " + grouped.joined(separator: "-") + ":y"), "\(grouped)")
                    #expect(CardNumberScanner.containsCardNumber("order-" + grouped.joined(separator: "-")), "\(grouped)")
                }
            }
        }
        // 11 digits is too short, 20 too long, even when Luhn-valid.
        #expect(!CardNumberScanner.containsCardNumber(String(decoding: luhnNumber("4", length: 11), as: UTF8.self)))
        #expect(!CardNumberScanner.containsCardNumber(String(decoding: luhnNumber("4", length: 20), as: UTF8.self)))
    }

    /// Idempotency keys are UUIDs more often than not: no random UUID (nor one whose digit
    /// segments happen to pass the Luhn check) is taken for a card number, whatever wraps it.
    /// The CI run that found this: `order-E9B7A681-2795-4000-9495-855F514E7D0F` was refused.
    @Test func uuidsAreNotCardNumbers() {
        for text in ["order-E9B7A681-2795-4000-9495-855F514E7D0F", "e9b7a681-2795-4000-9495-855f514e7d0f",
                     "12345678-2795-4000-9495-123456789012", "key:00000000-4242-4242-4242-424242424242"] {
            #expect(!CardNumberScanner.containsCardNumber(text), "\(text)")
        }
        var random = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let hex = Array("0123456789abcdef")
            var u = String((0..<32).map { _ in hex[Int(random.next() % 16)] })
            for at in [8, 13, 18, 23] { u.insert("-", at: u.index(u.startIndex, offsetBy: at)) }
            #expect(!CardNumberScanner.containsCardNumber("order-" + u.uppercased()), "\(u)")
            #expect(!CardNumberScanner.containsCardNumber(u), "\(u)")
        }
        // A card number beside a UUID is still found.
        #expect(CardNumberScanner.containsCardNumber("e9b7a681-2795-4000-9495-855f514e7d0f 4242424242424242"))
        #expect(CardNumberScanner.containsCardNumber("4242-4242-4242-4242 e9b7a681-2795-4000-9495-855f514e7d0f"))
    }

    /// Hex words glued to digit groups are not card groups (the ends of a UUID-like segment):
    /// `681` (after `a`) does not join `2795 4000 9495` into a 15-digit candidate.
    @Test func digitGroupsGluedToLettersAreNotGroupsOfACard() {
        #expect(!CardNumberScanner.containsCardNumber("a681-2795-4000-9495x"))
        #expect(CardNumberScanner.containsCardNumber("a 4242-4242-4242-4242 f"))
        #expect(CardNumberScanner.containsCardNumber("x4242424242424242y"))   // one unbroken run: found whatever surrounds it
    }

    /// A card number is found wherever it sits among other groups: each run of whole groups is
    /// checked.
    @Test func aCardAmongOtherGroupsIsFound() {
        #expect(CardNumberScanner.containsCardNumber("1234 4242 4242 4242 4242"))
        #expect(CardNumberScanner.containsCardNumber("4242 4242 4242 4242 1234 5678"))
        #expect(CardNumberScanner.containsCardNumber("2024-11-24 4242-4242-4242-4242"))
    }
}
