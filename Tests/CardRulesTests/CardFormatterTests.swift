import CardRules
import Testing

@Suite struct CardFormatterTests {
    func format(_ s: String, _ brand: CardBrand?) -> String {
        let digits = ascii(s)
        var out = [UInt8](repeating: 0, count: CardFormatter.formattedLength(length: digits.count, brand: brand))
        let n = digits.withUnsafeBytes { d in out.withUnsafeMutableBytes { CardFormatter.format(d, brand: brand, into: $0) } }
        #expect(n == out.count)
        return String(decoding: out.prefix(n), as: UTF8.self)
    }

    @Test func groupPatterns() {
        #expect(CardFormatter.groups(length: 16, brand: .visa) == [4, 4, 4, 4])
        #expect(CardFormatter.groups(length: 16, brand: nil) == [4, 4, 4, 4])
        #expect(CardFormatter.groups(length: 15, brand: .amex) == [4, 6, 5])
        #expect(CardFormatter.groups(length: 11, brand: .amex) == [4, 6, 1])  // while typed
        #expect(CardFormatter.groups(length: 3, brand: .amex) == [3])
        #expect(CardFormatter.groups(length: 14, brand: .diners) == [4, 6, 4])
        #expect(CardFormatter.groups(length: 16, brand: .diners) == [4, 4, 4, 4])
        #expect(CardFormatter.groups(length: 19, brand: .visa) == [4, 4, 4, 4, 3])
        #expect(CardFormatter.groups(length: 19, brand: nil) == [4, 4, 4, 4, 3])
        #expect(CardFormatter.groups(length: 13, brand: .visa) == [4, 4, 5])
        #expect(CardFormatter.groups(length: 15, brand: .visa) == [4, 4, 4, 3])
        #expect(CardFormatter.groups(length: 18, brand: .verve) == [4, 4, 4, 4, 2])
        #expect(CardFormatter.groups(length: 12, brand: .maestro) == [4, 4, 4])
        #expect(CardFormatter.groups(length: 1, brand: nil) == [1])
        #expect(CardFormatter.groups(length: 0, brand: nil) == [])
        for length in 1...19 {
            for brand in [nil] + CardBrand.all {
                #expect(CardFormatter.groups(length: length, brand: brand).reduce(0, +) == length)
            }
        }
    }

    @Test func formatsIntoTheCallersBuffer() {
        #expect(format("4242424242424242", .visa) == "4242 4242 4242 4242")
        #expect(format("378282246310005", .amex) == "3782 822463 10005")
        #expect(format("36227206271667", .diners) == "3622 720627 1667")
        #expect(format("4000000000000000006", .visa) == "4000 0000 0000 0000 006")
        #expect(format("4222222222222", .visa) == "4222 2222 22222")
        #expect(format("42424", .visa) == "4242 4")
        #expect(format("", nil) == "")
        #expect(CardFormatter.formattedLength(length: 16, brand: .visa) == 19)
        #expect(CardFormatter.formattedLength(length: 15, brand: .amex) == 17)
    }

    @Test func maskExamples() {
        // The visible prefix (min(6, length − 10)) and the last 4: at least 6 digits hidden (DESIGN §1).
        #expect(CardFormatter.mask(ascii("4242424242424242"), brand: .visa) == "4242 42•• •••• 4242")
        #expect(CardFormatter.mask(ascii("378282246310005"), brand: .amex) == "3782 8••••• •0005")
        #expect(CardFormatter.mask(ascii("36227206271667"), brand: .diners) == "3622 •••••• 1667")
        #expect(CardFormatter.mask(ascii("4000000000000000006"), brand: .visa) == "4000 00•• •••• •••0 006")
        #expect(CardFormatter.mask(ascii("4242"), brand: .visa) == "4242")
        #expect(CardFormatter.mask(ascii("42424242"), brand: .visa) == "4242 42••")
        #expect(CardFormatter.mask(ascii("42x4"), brand: nil) == "42•4")  // non-digits never shown
        #expect(CardFormatter.mask(ascii(""), brand: nil) == "")
    }

    /// Property: whatever the length and brand, at most the visible prefix (min(6, length − 10)
    /// from 12 digits, the first 6 of a shorter number) and the last 4 (from 12 digits) are
    /// visible, at least 6 digits of a number of 12 or more stay hidden, and every digit has a place.
    @Test func maskNeverRevealsMoreThanBINAndLast4() {
        var random = SeededRandom(seed: 2026)
        for length in 1...19 {
            for brand in [nil] + CardBrand.all {
                let digits = random.digits(length)
                let masked = CardFormatter.mask(digits, brand: brand)
                let chars = Array(masked.filter { $0 != " " })
                #expect(chars.count == length)
                let visible = chars.filter(\.isNumber).count
                let lead = length >= 12 ? min(6, length - 10) : min(6, length)
                let tail = length >= 12 ? 4 : 0
                #expect(visible == lead + tail, "length \(length)")
                #expect(visible <= 10)
                if length >= 12 {
                    #expect(visible <= length - 6)
                    #expect(chars.filter { $0 == "•" }.count == length - visible)
                }
                // The visible digits are the real ones, in place.
                for (i, c) in chars.enumerated() where c.isNumber {
                    #expect(c.asciiValue == digits[i])
                    #expect(i < lead || i >= length - tail)
                }
                #expect(masked.split(separator: " ").map(\.count) == CardFormatter.groups(length: length, brand: brand))
            }
        }
        for length in 12...19 {
            #expect(CardFormatter.visibleDigits(length: length) == (min(6, length - 10), 4))
        }
    }
}
