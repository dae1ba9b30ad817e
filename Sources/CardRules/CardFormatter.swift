/// Grouping and masking of card numbers for display.
public enum CardFormatter {
    /// Group sizes for a number of `length` digits: Amex 4-6-5 (also while typed: an 11-digit
    /// Amex prefix is 4-6-1), Diners of 14 digits 4-6-4, any 19 digits 4-4-4-4-3, any 13 digits
    /// 4-4-5, and otherwise fours then the rest (16: 4-4-4-4, 15: 4-4-4-3). Empty for 0 digits.
    public static func groups(length: Int, brand: CardBrand?) -> [Int] {
        guard length > 0 else { return [] }
        if brand == .amex && length <= 15 { return truncate([4, 6, 5], to: length) }
        if brand == .diners && length == 14 { return [4, 6, 4] }
        if length == 19 { return [4, 4, 4, 4, 3] }
        if length == 13 { return [4, 4, 5] }
        return truncate(Array(repeating: 4, count: (length + 3) / 4), to: length)
    }

    /// Bytes `format` writes for `length` digits: the digits and one space between groups.
    public static func formattedLength(length: Int, brand: CardBrand?) -> Int {
        length <= 0 ? 0 : length + groups(length: length, brand: brand).count - 1
    }

    /// Writes the grouped `digits` (single spaces between groups) into `output` and returns the
    /// byte count. For the caller's own display: the result stays in the caller's buffer, no
    /// `String` is made. `output` must hold `formattedLength(length:brand:)` bytes (a
    /// precondition; `digits.count * 2` always does).
    public static func format(_ digits: UnsafeRawBufferPointer, brand: CardBrand?, into output: UnsafeMutableRawBufferPointer) -> Int {
        precondition(output.count >= formattedLength(length: digits.count, brand: brand), "CardFormatter.format: output too small")
        var at = 0, i = 0
        for (g, size) in groups(length: digits.count, brand: brand).enumerated() {
            if g > 0 {
                output[at] = UInt8(ascii: " ")
                at += 1
            }
            for _ in 0..<size {
                output[at] = digits[i]
                at += 1
                i += 1
            }
        }
        return at
    }

    /// The mask character.
    public static let maskCharacter: Character = "•"

    /// How many leading and trailing digits `mask` shows for a number of `length` digits: from 12
    /// digits the visible prefix (min(6, length − 10), DESIGN §1) and the last 4, so at least 6
    /// stay hidden; a shorter number (still being typed) shows its first 6 at most and no last 4.
    public static func visibleDigits(length: Int) -> (leading: Int, trailing: Int) {
        length >= CardNumberInfo.minimumDisplayLength ? (CardNumberInfo.binLength(forLength: length), 4) : (min(length, 6), 0)
    }

    /// A safe masked display, grouped like `groups(length:brand:)`: at most the visible prefix
    /// (`visibleDigits`) and the last 4 (only from 12 digits), every other
    /// digit — and any byte that is not an ASCII digit — as `•`.
    /// `4242424242424242` → `4242 4242 •••• 4242`; Amex `378282246310005` → `3782 82•••• •0005`.
    public static func mask(_ digits: some Collection<UInt8>, brand: CardBrand?) -> String {
        let length = digits.count
        let (leading, trailing) = visibleDigits(length: length)
        var out = ""
        out.reserveCapacity(length * 3 + 8)
        var i = 0
        var iterator = digits.makeIterator()
        for (g, size) in groups(length: length, brand: brand).enumerated() {
            if g > 0 { out.append(" ") }
            for _ in 0..<size {
                guard let byte = iterator.next() else { break }
                if (i < leading || i >= length - trailing) && Digits.isDigit(byte) {
                    out.unicodeScalars.append(Unicode.Scalar(byte))
                } else {
                    out.append(maskCharacter)
                }
                i += 1
            }
        }
        return out
    }

    /// `sizes` cut down to add up to `length`, the last group shortened.
    private static func truncate(_ sizes: [Int], to length: Int) -> [Int] {
        var out: [Int] = []
        var left = length
        for size in sizes where left > 0 {
            out.append(min(size, left))
            left -= size
        }
        return out
    }
}
