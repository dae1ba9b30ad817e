/// An inclusive range of card-number prefixes of one length, e.g. `2221`…`2720` or `4`…`4`.
public struct PrefixRange: Sendable, Hashable {
    /// Lowest prefix (digits).
    public let low: String
    /// Highest prefix (digits, same length as `low`).
    public let high: String
    let lowValue: Int
    let highValue: Int
    /// Number of digits of the prefix: the range's specificity.
    public var length: Int { low.utf8.count }

    /// A range; `low` and `high` are digit strings of equal length.
    public init(_ low: String, _ high: String? = nil) {
        let high = high ?? low
        precondition(low.utf8.count == high.utf8.count && low.utf8.allSatisfy { $0 >= 48 && $0 <= 57 }, "bad prefix range")
        self.low = low
        self.high = high
        lowValue = Int(low)!
        highValue = Int(high)!
    }

    /// How the first digits of a number relate to the range.
    enum Match { case full, partial, none }

    /// `.full` when the number has at least `length` digits and its prefix is in range;
    /// `.partial` when it is shorter and some completion lands in range.
    func match(_ digits: some Collection<UInt8>) -> Match {
        let n = length
        var value = 0
        var count = 0
        for d in digits.prefix(n) {
            value = value * 10 + Int(d &- 48)
            count += 1
        }
        if count == n { return value >= lowValue && value <= highValue ? .full : .none }
        if count == 0 { return .partial }
        var scale = 1
        for _ in 0..<(n - count) { scale *= 10 }
        return value >= lowValue / scale && value <= highValue / scale ? .partial : .none
    }
}

/// One brand's rules: prefixes, lengths, CVC length, and whether the Luhn check applies.
public struct BrandSpec: Sendable, Hashable {
    /// The brand.
    public let brand: CardBrand
    /// Name for display.
    public let displayName: String
    /// Prefix ranges (IIN ranges).
    public let prefixes: [PrefixRange]
    /// Card-number lengths the brand issues, sorted.
    public let lengths: [Int]
    /// CVC digits.
    public let cvcLength: Int
    /// Whether numbers of this brand must pass the Luhn check.
    public let luhn: Bool

    /// A brand spec.
    public init(brand: CardBrand, displayName: String, prefixes: [PrefixRange], lengths: [Int], cvcLength: Int, luhn: Bool = true) {
        self.brand = brand
        self.displayName = displayName
        self.prefixes = prefixes
        self.lengths = lengths.sorted()
        self.cvcLength = cvcLength
        self.luhn = luhn
    }
}
