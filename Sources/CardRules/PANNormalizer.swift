/// Turns typed or pasted card numbers into bare ASCII digits, buffer to buffer.
///
/// No `String` or `Array` ever holds the digits: the caller owns both buffers (typically wipeable
/// memory) and nothing is copied elsewhere.
public enum PANNormalizer {
    /// Most digits a card number has (ISO/IEC 7812).
    public static let maxDigits = 19

    /// Copies the digits of `input` into `output`, dropping spaces, tabs and dashes; returns the
    /// number of digits written (1…19).
    ///
    /// `output` must hold at least `min(input.count, 19)` bytes (a precondition); 19 always does.
    /// When it throws, the bytes it had written to `output` are zeroed again.
    /// - Throws: `NON_DIGIT_CHARACTERS` for any other byte (NUL, letters, other punctuation,
    ///   line breaks, any non-ASCII byte such as a full-width digit), `CARD_NUMBER_TOO_LONG` past
    ///   19 digits, `CARD_NUMBER_EMPTY` for no digits. Checked in input order: the first fault wins.
    public static func normalize(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws(CardRulesError) -> Int {
        precondition(output.count >= min(input.count, maxDigits), "PANNormalizer.normalize needs an output of at least 19 bytes (or the input's size)")
        var n = 0
        func fail(_ error: CardRulesError) -> CardRulesError {
            for i in 0..<n { output[i] = 0 }
            return error
        }
        for byte in input {
            switch byte {
            case Digits.zero...Digits.nine:
                guard n < maxDigits else { throw fail(Self.tooLong) }
                output[n] = byte
                n += 1
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "-"):
                continue
            default:
                throw fail(Self.nonDigit)
            }
        }
        guard n > 0 else { throw Self.empty }
        return n
    }

    static let nonDigit = CardRulesError(code: .nonDigit, message: "a card number has only digits, spaces and dashes")
    static let tooLong = CardRulesError(code: .tooLong, message: "a card number has at most \(maxDigits) digits")
    static let empty = CardRulesError(code: .empty, message: "the card number is empty")
}
