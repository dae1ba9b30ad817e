/// One brand's rules: its prefix (IIN) ranges, the lengths it issues, its CVC length, and
/// whether its numbers carry a Luhn check digit.
public struct BrandSpec: Sendable, Hashable {
    /// The brand.
    public let brand: CardBrand
    /// Name for display (`American Express`).
    public let displayName: String
    /// Prefix ranges. Order within a spec does not matter; specificity decides.
    public let prefixes: [PrefixRange]
    /// Card-number lengths the brand issues, sorted: the union over its ranges (a range may
    /// narrow them with `PrefixRange.lengths`).
    public let lengths: [Int]
    /// CVC (CVV, CID…) digits.
    public let cvcLength: Int
    /// Whether numbers of this brand must pass the Luhn check.
    public let luhn: Bool
    /// The lengths given to `init`: those of ranges without their own.
    let defaultLengths: [Int]

    /// A brand spec. `lengths` applies to the ranges without their own; the `lengths` property is
    /// the sorted union with the ranges' own lengths.
    /// Table data, checked with a precondition: at least one range and one length (1…19),
    /// CVC length 3 or 4.
    public init(brand: CardBrand, displayName: String, prefixes: [PrefixRange], lengths: [Int], cvcLength: Int, luhn: Bool = true) {
        precondition(!prefixes.isEmpty, "a brand has at least one prefix range")
        precondition(!lengths.isEmpty && lengths.allSatisfy { (1...PANNormalizer.maxDigits).contains($0) }, "brand lengths are 1 to 19")
        precondition(cvcLength == 3 || cvcLength == 4, "a CVC has 3 or 4 digits")
        self.brand = brand
        self.displayName = displayName
        self.prefixes = prefixes
        self.defaultLengths = Array(Set(lengths)).sorted()
        self.lengths = Array(Set(lengths + prefixes.flatMap { $0.lengths ?? [] })).sorted()
        self.cvcLength = cvcLength
        self.luhn = luhn
    }

    /// Shortest number of the brand.
    public var minLength: Int { lengths[0] }
    /// Longest number of the brand.
    public var maxLength: Int { lengths[lengths.count - 1] }

    /// The lengths of numbers in `range` (one of `prefixes`).
    func lengths(in range: PrefixRange) -> [Int] { range.lengths ?? defaultLengths }
}
