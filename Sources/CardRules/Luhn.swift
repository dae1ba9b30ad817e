/// The Luhn (mod 10) check over ASCII digits, read in place (the digits are never copied).
public enum Luhn {
    /// True when the last digit is the Luhn check digit of the ones before it. False for no
    /// digits and for any byte that is not an ASCII digit.
    public static func isValid(_ digits: some Collection<UInt8>) -> Bool {
        guard !digits.isEmpty, let total = sum(digits, doubleRightmost: false) else { return false }
        return total % 10 == 0
    }

    /// The check digit (as an ASCII byte, `0`…`9`) that makes `partial` followed by it valid.
    /// `partial` must be ASCII digits (a precondition); an empty `partial` gives `0`.
    public static func checkDigit(for partial: some Collection<UInt8>) -> UInt8 {
        guard let total = sum(partial, doubleRightmost: true) else {
            preconditionFailure("Luhn.checkDigit takes ASCII digits only")
        }
        return Digits.zero + UInt8((10 - total % 10) % 10)
    }

    /// The Luhn sum, doubling every second digit counted from the right (starting with the
    /// rightmost when `doubleRightmost`); nil on a non-digit byte.
    private static func sum(_ digits: some Collection<UInt8>, doubleRightmost: Bool) -> Int? {
        let count = digits.count
        // The digit at index i is (count - 1 - i) places from the right.
        var double = ((count - 1) % 2 == 0) == doubleRightmost
        if count == 0 { return 0 }
        var total = 0
        for byte in digits {
            guard Digits.isDigit(byte) else { return nil }
            var d = Int(byte &- Digits.zero)
            if double {
                d *= 2
                if d > 9 { d -= 9 }
            }
            total += d
            double.toggle()
        }
        return total
    }
}
