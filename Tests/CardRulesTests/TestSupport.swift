import CardRules

/// The ASCII bytes of `s` (test numbers are public test cards).
func ascii(_ s: String) -> [UInt8] { Array(s.utf8) }

/// `prefix` padded with `fill` to `length - 1` digits, then the Luhn check digit.
func luhnNumber(_ prefix: String, length: Int, fill: UInt8 = UInt8(ascii: "0")) -> [UInt8] {
    var digits = ascii(prefix)
    while digits.count < length - 1 { digits.append(fill) }
    digits.append(Luhn.checkDigit(for: digits))
    return digits
}

/// A small deterministic generator (SplitMix64) so property loops are reproducible.
struct SeededRandom: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension SeededRandom {
    /// `count` random ASCII digits.
    mutating func digits(_ count: Int) -> [UInt8] {
        (0..<count).map { _ in UInt8(ascii: "0") + UInt8.random(in: 0...9, using: &self) }
    }
}
