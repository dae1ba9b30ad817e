/// The brand rules in force: which prefixes belong to which brand.
///
/// Overlapping ranges are resolved by specificity: the longest matching prefix wins, and between
/// prefixes of equal length the brand earlier in the table wins (so broad fallbacks such as
/// Maestro's `56`–`69` come last). Lookups read the caller's digit bytes in place; nothing is copied.
public struct BrandTable: Sendable {
    /// The specs, in table (priority) order.
    public let specs: [BrandSpec]

    /// One prefix range of one spec.
    struct Rule: Sendable {
        let spec: Int
        let range: PrefixRange
    }

    /// Every number of `depth` digits, cut into segments that each have one winning rule.
    struct Layer: Sendable {
        /// First number of each segment, ascending; the first is 0.
        let starts: [Int]
        /// Index into `rules` of each segment's winner, -1 for none.
        let winners: [Int]
    }

    /// A brand some completion of a prefix could belong to.
    struct Candidate: Sendable {
        let spec: Int
        /// How many of the typed digits its winning range confirms.
        let specificity: Int
        /// The most digits a number of this brand can have, given its winning ranges.
        let maxLength: Int
    }

    /// All ranges, highest priority first: longer prefixes, then table order.
    let rules: [Rule]
    /// Digits of the longest prefix: past that many, a number's brand is settled.
    let maxPrefixLength: Int
    /// `layers[d - 1]` segments the numbers of `d` digits.
    let layers: [Layer]
    private let index: [CardBrand: Int]

    /// A table of `specs` in priority order. A brand listed twice keeps its first spec.
    public init(_ specs: [BrandSpec]) {
        self.specs = specs
        var index: [CardBrand: Int] = [:]
        for (i, spec) in specs.enumerated() where index[spec.brand] == nil { index[spec.brand] = i }
        self.index = index
        var rules: [(rule: Rule, order: Int)] = []
        for (i, spec) in specs.enumerated() where index[spec.brand] == i {
            for range in spec.prefixes { rules.append((Rule(spec: i, range: range), rules.count)) }
        }
        rules.sort { a, b in
            a.rule.range.length != b.rule.range.length ? a.rule.range.length > b.rule.range.length : a.order < b.order
        }
        let ordered = rules.map(\.rule)
        let maxPrefixLength = ordered.first?.range.length ?? 0
        self.rules = ordered
        self.maxPrefixLength = maxPrefixLength
        self.layers = maxPrefixLength == 0 ? [] : (1...maxPrefixLength).map { Self.layer(depth: $0, rules: ordered) }
    }

    /// The spec of `brand`, if the table has it.
    public func spec(for brand: CardBrand) -> BrandSpec? { index[brand].map { specs[$0] } }

    /// The brands of the table, in table order.
    public var brands: [CardBrand] { specs.indices.filter { index[specs[$0].brand] == $0 }.map { specs[$0].brand } }

    /// The brand of a (possibly partial) number: the brand of the most specific (longest) prefix
    /// range the number already fully contains; equal lengths go to the brand earlier in the table.
    /// nil when no range matches yet, or when a byte is not an ASCII digit.
    public func brand(of digits: some Collection<UInt8>) -> CardBrand? {
        match(digits).map { specs[$0.spec].brand }
    }

    /// Every brand some completion of this (possibly partial) number could belong to, by the rule
    /// of `brand(of:)` — a completion being the number itself or the number followed by more digits.
    /// Lengths are not considered. Ordered most specific first (the brand whose range confirms
    /// more of the typed digits), then in table order; `""` gives every brand in table order.
    /// Empty when no completion has a brand, or when a byte is not an ASCII digit.
    ///
    /// A brand shadowed by a more specific range for every completion is left out: `401178…` is
    /// only Elo. With the standard table `"2"` gives `[mastercard, jcb, mir]`.
    public func candidates(for digits: some Collection<UInt8>) -> [CardBrand] {
        candidateDetails(digits).map { specs[$0.spec].brand }
    }

    /// Whether a complete number passes the rules of some brand of the table: a prefix range of
    /// that brand holds it (shadowed by a more specific range or not), the brand issues its length
    /// in that range, and it passes the Luhn check where the brand has it. Card-shaped tokens are
    /// drawn until this is false (DESIGN §9: a token never passes any brand's card rules).
    public func passesAnyBrand(_ digits: some Collection<UInt8>) -> Bool {
        guard Digits.allDigits(digits) else { return false }
        let (value, count) = Digits.leadingValue(digits, maxCount: maxPrefixLength)
        var luhn: Bool?
        for rule in rules where rule.range.length <= count && rule.range.holds(value: value, count: count) {
            let spec = specs[rule.spec]
            guard spec.lengths(in: rule.range).contains(digits.count) else { continue }
            if !spec.luhn { return true }
            if luhn == nil { luhn = Luhn.isValid(digits) }
            if luhn == true { return true }
        }
        return false
    }

    /// Whether some number of `length` digits beginning with `prefix` lies in a prefix range of a
    /// brand whose numbers need not pass the Luhn check (issued at that length there): every
    /// number of such a shape that the range holds passes that brand's rules, so card-shaped
    /// tokens are not made for it (`CardShapedToken.check`).
    public func mayHoldWithoutLuhn(prefix: some Collection<UInt8>, length: Int) -> Bool {
        guard Digits.allDigits(prefix) else { return false }
        let p = Array(prefix)
        for rule in rules where !specs[rule.spec].luhn && specs[rule.spec].lengths(in: rule.range).contains(length) {
            let n = rule.range.length
            if p.count >= n {
                let (value, count) = Digits.leadingValue(p, maxCount: n)
                if rule.range.holds(value: value, count: count) { return true }
            } else {
                // The range is longer than the prefix: some completion of the prefix may fall in it.
                let (value, count) = Digits.leadingValue(p, maxCount: p.count)
                let scale = Digits.pow10[n - count]
                let low = value * scale, high = (value + 1) * scale - 1
                if low <= rule.range.highValue && rule.range.lowValue <= high { return true }
            }
        }
        return false
    }

    /// The winning rule for `digits`, if any.
    func match(_ digits: some Collection<UInt8>) -> Rule? {
        guard Digits.allDigits(digits) else { return nil }
        let (value, count) = Digits.leadingValue(digits, maxCount: maxPrefixLength)
        for rule in rules where rule.range.length <= count && rule.range.holds(value: value, count: count) {
            return rule
        }
        return nil
    }

    /// Candidates with their specificity and longest length, in `candidates(for:)` order.
    func candidateDetails(_ digits: some Collection<UInt8>) -> [Candidate] {
        guard Digits.allDigits(digits) else { return [] }
        let (value, k) = Digits.leadingValue(digits, maxCount: maxPrefixLength)
        var best: [Int: Candidate] = [:]
        func note(_ r: Int) {
            let rule = rules[r]
            let specificity = min(rule.range.length, k)
            let longest = specs[rule.spec].lengths(in: rule.range).last ?? 0
            if let old = best[rule.spec] {
                best[rule.spec] = Candidate(spec: rule.spec, specificity: max(old.specificity, specificity), maxLength: max(old.maxLength, longest))
            } else {
                best[rule.spec] = Candidate(spec: rule.spec, specificity: specificity, maxLength: longest)
            }
        }
        if k >= maxPrefixLength {
            // Every range is decided by the digits already there.
            if let r = rules.firstIndex(where: { $0.range.length <= k && $0.range.holds(value: value, count: k) }) { note(r) }
        } else {
            for depth in max(k, 1)...maxPrefixLength {
                let scale = Digits.pow10[depth - k]
                let low = value * scale, high = (value + 1) * scale - 1
                let layer = layers[depth - 1]
                var i = Self.lastIndex(in: layer.starts, notAbove: low)
                while i < layer.starts.count && layer.starts[i] <= high {
                    if layer.winners[i] >= 0 { note(layer.winners[i]) }
                    i += 1
                }
            }
        }
        return best.values.sorted { a, b in a.specificity != b.specificity ? a.specificity > b.specificity : a.spec < b.spec }
    }

    /// The segments of the `depth`-digit numbers, each with the rule that wins there.
    private static func layer(depth: Int, rules: [Rule]) -> Layer {
        let active = rules.indices.filter { rules[$0].range.length <= depth }
        let intervals = active.map { rules[$0].range.interval(atDepth: depth) }
        var bounds: Set<Int> = [0]
        let end = Digits.pow10[depth]
        for interval in intervals {
            bounds.insert(interval.lowerBound)
            if interval.upperBound + 1 < end { bounds.insert(interval.upperBound + 1) }
        }
        let starts = bounds.sorted()
        // `active` is in priority order, so the first interval holding a segment's start wins it.
        let winners = starts.map { start in
            intervals.firstIndex { $0.contains(start) }.map { active[$0] } ?? -1
        }
        return Layer(starts: starts, winners: winners)
    }

    /// Index of the last element of the ascending, non-empty `starts` that is ≤ `value` (0 if none).
    private static func lastIndex(in starts: [Int], notAbove value: Int) -> Int {
        var lo = 0, hi = starts.count - 1
        while lo < hi {
            let mid = (lo + hi + 1) / 2
            if starts[mid] <= value { lo = mid } else { hi = mid - 1 }
        }
        return lo
    }
}
