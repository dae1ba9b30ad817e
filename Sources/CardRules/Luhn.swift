/// The Luhn (mod 10) check over ASCII digits.
public enum Luhn {
    /// True when the last digit is the Luhn check digit of the others. False for no digits.
    public static func isValid(_ digits: some Collection<UInt8>) -> Bool {
        guard !digits.isEmpty else { return false }
        return sum(digits.reversed(), doubleFirst: false) % 10 == 0
    }

    /// The check digit (ASCII) that completes `partial`.
    public static func checkDigit(for partial: some Collection<UInt8>) -> UInt8 {
        UInt8(ascii: "0") + UInt8((10 - sum(partial.reversed(), doubleFirst: true) % 10) % 10)
    }

    private static func sum(_ reversed: some Sequence<UInt8>, doubleFirst: Bool) -> Int {
        var total = 0
        var double = doubleFirst
        for c in reversed {
            var d = Int(c &- 48)
            if double { d *= 2; if d > 9 { d -= 9 } }
            total += d
            double.toggle()
        }
        return total
    }
}
