/// Turns typed or pasted card numbers into bare ASCII digits, buffer to buffer (no `String`).
public enum PANNormalizer {
    /// Most digits a card number has.
    public static let maxDigits = 19

    /// Copies the digits of `input` into `output`, dropping spaces, tabs and dashes; returns the
    /// number of digits written.
    /// - Throws: `NON_DIGIT_CHARACTERS` for any other byte (NUL and non-ASCII included),
    ///   `CARD_NUMBER_TOO_LONG` past 19 digits, `CARD_NUMBER_EMPTY` for no digits.
    public static func normalize(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws(CardRulesError) -> Int {
        var n = 0
        for b in input {
            switch b {
            case 48...57:
                guard n < maxDigits, n < output.count else {
                    throw CardRulesError(code: .tooLong, message: "a card number has at most \(maxDigits) digits")
                }
                output[n] = b
                n += 1
            case 32, 9, 45:
                continue
            default:
                throw CardRulesError(code: .nonDigit, message: "a card number has only digits, spaces and dashes")
            }
        }
        guard n > 0 else { throw CardRulesError(code: .empty, message: "the card number is empty") }
        return n
    }
}
