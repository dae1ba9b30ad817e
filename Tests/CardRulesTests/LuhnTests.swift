import CardRules
import Testing

@Suite struct LuhnTests {
    @Test func knownNumbers() {
        for valid in ["4242424242424242", "378282246310005", "79927398713", "0", "18", "6011000990139424", "4000000000000000006"] {
            #expect(Luhn.isValid(ascii(valid)), "\(valid)")
        }
        for invalid in ["4242424242424241", "378282246310006", "79927398710", "1", "10", "4111111111111112"] {
            #expect(!Luhn.isValid(ascii(invalid)), "\(invalid)")
        }
    }

    @Test func nothingAndNonDigitsAreInvalid() {
        #expect(!Luhn.isValid(ascii("")))
        #expect(!Luhn.isValid(ascii("4242 4242 4242 4242")))
        #expect(!Luhn.isValid([0x34, 0x00, 0x32]))
    }

    @Test func checkDigits() {
        #expect(Luhn.checkDigit(for: ascii("424242424242424")) == UInt8(ascii: "2"))
        #expect(Luhn.checkDigit(for: ascii("37828224631000")) == UInt8(ascii: "5"))
        #expect(Luhn.checkDigit(for: ascii("7992739871")) == UInt8(ascii: "3"))
        #expect(Luhn.checkDigit(for: ascii("")) == UInt8(ascii: "0"))
    }

    /// Completing any prefix with its check digit gives a valid number; any other last digit does not.
    @Test func checkDigitCompletesEveryPrefix() {
        var random = SeededRandom(seed: 42)
        for length in 1...19 {
            for _ in 0..<20 {
                let partial = random.digits(length)
                let check = Luhn.checkDigit(for: partial)
                #expect(Luhn.isValid(partial + [check]))
                for other in UInt8(ascii: "0")...UInt8(ascii: "9") where other != check {
                    #expect(!Luhn.isValid(partial + [other]))
                }
            }
        }
    }

    @Test func readsBuffersInPlace() {
        let ok = ascii("4242424242424242").withUnsafeBytes { Luhn.isValid($0) }
        #expect(ok)
        let slice = ascii("xx4242424242424242yy")[2..<18]
        #expect(Luhn.isValid(slice))
    }
}
