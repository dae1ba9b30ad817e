/// Grouping and masking of card numbers for display.
public enum CardFormatter {
    /// Group sizes for a number of `length` digits: 4-4-4-4; Amex 15: 4-6-5; Diners 14: 4-6-4;
    /// 19 digits: 4-4-4-4-3; 13: 4-4-5; 15 (not Amex): 4-4-4-3; otherwise fours then the rest.
    public static func groups(length: Int, brand: CardBrand?) -> [Int] {
        switch (length, brand) {
        case (15, .amex?): return [4, 6, 5]
        case (14, .diners?): return [4, 6, 4]
        case (19, _): return [4, 4, 4, 4, 3]
        case (13, _): return [4, 4, 5]
        default:
            var out: [Int] = []
            var left = length
            while left > 0 { out.append(min(4, left)); left -= 4 }
            return out
        }
    }

    /// Writes `digits` grouped with single spaces into `output` (which must hold
    /// `digits.count * 2` bytes); returns the byte count. For the caller's own display.
    public static func format(_ digits: UnsafeRawBufferPointer, brand: CardBrand?, into output: UnsafeMutableRawBufferPointer) -> Int {
        var at = 0, i = 0
        for (g, size) in groups(length: digits.count, brand: brand).enumerated() {
            if g > 0 { output[at] = 32; at += 1 }
            for _ in 0..<size where i < digits.count {
                output[at] = digits[i]
                at += 1
                i += 1
            }
        }
        return at
    }

    /// The mask character.
    public static let maskCharacter: Character = "•"

    /// The number grouped, showing at most the BIN (first 8 of a 16+ digit number, first 6
    /// otherwise) and the last 4 (only from 12 digits, so they never overlap the BIN); every
    /// other digit is `•`. `4242424242424242` → `4242 4242 •••• 4242`.
    public static func mask(_ digits: some Collection<UInt8>, brand: CardBrand?) -> String {
        let length = digits.count
        let shownPrefix = min(length, CardNumberInfo.binLength(forLength: length))
        let shownSuffixStart = length >= 12 ? length - 4 : length
        var out = ""
        var i = 0
        var iterator = digits.makeIterator()
        for (g, size) in groups(length: length, brand: brand).enumerated() {
            if g > 0 { out.append(" ") }
            for _ in 0..<size {
                guard let d = iterator.next() else { break }
                if i < shownPrefix || i >= shownSuffixStart {
                    out.unicodeScalars.append(Unicode.Scalar(d))
                } else {
                    out.append(maskCharacter)
                }
                i += 1
            }
        }
        return out
    }
}
