/// Internal helpers over ASCII digit bytes. Nothing here copies digits into a `String` or an
/// `Array`: card numbers stay in the caller's (wipeable) buffer.
enum Digits {
    /// `0`…`9` in ASCII.
    static let zero = UInt8(ascii: "0")
    static let nine = UInt8(ascii: "9")

    /// Powers of ten that fit an `Int` (10^0 … 10^18).
    static let pow10: [Int] = {
        var table = [1]
        for _ in 1...18 { table.append(table[table.count - 1] * 10) }
        return table
    }()

    /// Whether `byte` is an ASCII digit.
    @inline(__always)
    static func isDigit(_ byte: UInt8) -> Bool { byte >= zero && byte <= nine }

    /// Whether every byte is an ASCII digit (true for no bytes).
    static func allDigits(_ bytes: some Collection<UInt8>) -> Bool {
        for b in bytes where !isDigit(b) { return false }
        return true
    }

    /// The value of the first `min(bytes.count, maxCount)` digits and how many that is.
    /// The caller has checked the bytes are digits. `maxCount` is at most 18.
    static func leadingValue(_ bytes: some Collection<UInt8>, maxCount: Int) -> (value: Int, count: Int) {
        var value = 0
        var count = 0
        for b in bytes {
            if count == maxCount { break }
            value = value * 10 + Int(b &- zero)
            count += 1
        }
        return (value, count)
    }

    /// The value of a digit string known to be short and all digits (table data, never card numbers).
    static func value(of text: String) -> Int {
        text.utf8.reduce(0) { $0 * 10 + Int($1 &- zero) }
    }

    /// Whether `text` is one to `maxLength` ASCII digits.
    static func isDigitString(_ text: String, maxLength: Int) -> Bool {
        let n = text.utf8.count
        return n >= 1 && n <= maxLength && text.utf8.allSatisfy(isDigit)
    }
}
