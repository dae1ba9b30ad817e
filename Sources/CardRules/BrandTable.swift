/// The brand rules in force: which prefixes belong to which brand.
///
/// Overlapping ranges are resolved by the most specific (longest) matching prefix; equal
/// specificity goes to the brand earlier in the table (so broad fallbacks such as Maestro's
/// `56`–`69` come last).
public struct BrandTable: Sendable {
    /// The specs, in table order.
    public let specs: [BrandSpec]

    /// A table of `specs` in priority order.
    public init(_ specs: [BrandSpec]) { self.specs = specs }

    /// The spec of `brand`, if the table has it.
    public func spec(for brand: CardBrand) -> BrandSpec? { specs.first { $0.brand == brand } }

    /// The brand a (possibly partial) number belongs to by its most specific fully matched prefix.
    public func brand(of digits: some Collection<UInt8>) -> CardBrand? {
        var best: (brand: CardBrand, length: Int)?
        for spec in specs {
            for range in spec.prefixes where range.match(digits) == .full {
                if best == nil || range.length > best!.length { best = (spec.brand, range.length) }
            }
        }
        return best?.brand
    }

    /// Every brand some completion of `digits` could belong to, most specific first, then in table
    /// order. An empty prefix gives every brand.
    public func candidates(for digits: some Collection<UInt8>) -> [CardBrand] {
        var found: [(brand: CardBrand, specificity: Int, order: Int)] = []
        for (order, spec) in specs.enumerated() {
            var specificity = -1
            for range in spec.prefixes {
                switch range.match(digits) {
                case .full: specificity = max(specificity, range.length)
                case .partial: specificity = max(specificity, min(range.length, digits.count))
                case .none: break
                }
            }
            if specificity >= 0 { found.append((spec.brand, specificity, order)) }
        }
        // A fully matched longer prefix rules out brands whose only match is a shorter full one
        // only when the number is long enough to be decided; before that every compatible brand stays.
        return found.sorted { $0.specificity != $1.specificity ? $0.specificity > $1.specificity : $0.order < $1.order }.map(\.brand)
    }
}
