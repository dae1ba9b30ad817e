/// An inclusive range of card-number prefixes of one length (an IIN range), e.g. `2221`…`2720`
/// or `4`…`4`.
///
/// Its specificity is its digit count: where ranges of several brands hold a number, the longest
/// wins (`401178` Elo beats `4` Visa). A range may narrow the lengths of its brand for the numbers
/// it holds (JCB's 15-digit `1800` and `2131`).
public struct PrefixRange: Sendable, Hashable {
    /// Lowest prefix (1 to 12 ASCII digits).
    public let low: String
    /// Highest prefix (digits, same length as `low`, not below it).
    public let high: String
    /// Card-number lengths of the numbers in this range when they differ from the brand's
    /// `BrandSpec.lengths`; nil to use the brand's. Sorted.
    public let lengths: [Int]?

    let lowValue: Int
    let highValue: Int

    /// Number of digits of the prefix: the range's specificity.
    public var length: Int { low.utf8.count }

    /// A range `low`…`high` (just `low` when `high` is nil).
    ///
    /// Table data, checked with a precondition: equal-length digit strings of 1 to 12 digits,
    /// `low` ≤ `high`; `lengths`, when given, non-empty and within 1…19.
    public init(_ low: String, _ high: String? = nil, lengths: [Int]? = nil) {
        let high = high ?? low
        precondition(
            Digits.isDigitString(low, maxLength: 12) && Digits.isDigitString(high, maxLength: 12)
                && low.utf8.count == high.utf8.count,
            "a prefix range is two digit strings of equal length (1 to 12 digits)")
        let lowValue = Digits.value(of: low)
        let highValue = Digits.value(of: high)
        precondition(lowValue <= highValue, "a prefix range's low end is not above its high end")
        if let lengths {
            precondition(!lengths.isEmpty && lengths.allSatisfy { (1...PANNormalizer.maxDigits).contains($0) }, "range lengths are 1 to 19")
        }
        self.low = low
        self.high = high
        self.lengths = lengths?.sorted()
        self.lowValue = lowValue
        self.highValue = highValue
    }

    /// A range `low`…`high`; see `init(_:_:lengths:)`.
    public init(low: String, high: String, lengths: [Int]? = nil) {
        self.init(low, high, lengths: lengths)
    }

    /// Whether a number whose first `count` digits have value `value` lies in the range
    /// (`count` ≥ `length`).
    @inline(__always)
    func holds(value: Int, count: Int) -> Bool {
        let v = value / Digits.pow10[count - length]
        return v >= lowValue && v <= highValue
    }

    /// The range as an interval of `depth`-digit numbers (`depth` ≥ `length`): every number of
    /// `depth` digits whose prefix is in the range.
    func interval(atDepth depth: Int) -> ClosedRange<Int> {
        let scale = Digits.pow10[depth - length]
        return (lowValue * scale)...((highValue + 1) * scale - 1)
    }
}
