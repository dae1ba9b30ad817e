/// An operator-supplied BIN table: issuer information by BIN range, from CSV text.
///
/// Lookups are by binary search over precomputed segments, so large tables (hundreds of thousands
/// of ranges) stay fast enough to query on every keystroke.
public struct BINTable: Sendable {
    /// The ranges in file order.
    private let entries: [BINInfo]
    private let starts: [Int]
    private let ends: [Int]
    private let lengths: [Int]
    /// One per range length present, shortest first.
    private let groups: [Group]

    /// The numbers of one prefix length, cut into segments that each have one narrowest range.
    private struct Group: Sendable {
        let length: Int
        /// First prefix of each segment, ascending.
        let starts: [Int]
        /// Index into `entries` of each segment's range, -1 for none.
        let winners: [Int]
    }

    /// Number of ranges.
    public var count: Int { entries.count }

    /// Parses CSV text with the columns range start, range end, brand, type, issuer, country.
    ///
    /// The first row is a header when its first field is not digits. Fields may be quoted
    /// (`"Bank, N.A."`, `""` for a quote); empty brand, type, issuer or country become nil. Start
    /// and end are 6 to 11 digits, of equal length, start ≤ end. Blank lines are skipped.
    /// - Throws: `BIN_TABLE_INVALID` with a message naming the line (never quoting it).
    public init(csv: String) throws(CardRulesError) {
        var entries: [BINInfo] = []
        var first = true
        try CSVReader.forEachRecord(in: csv) { (record) throws(CardRulesError) in
            defer { first = false }
            let f = record.fields
            if first && !(f[0].utf8.count > 0 && Digits.allDigits(f[0].utf8)) { return }  // header
            func fail(_ what: String) -> CardRulesError {
                CardRulesError(code: .binTableInvalid, message: "BIN table line \(record.line): \(what)")
            }
            guard f.count == 6 else {
                throw fail("expected 6 fields (start, end, brand, type, issuer, country), found \(f.count)")
            }
            guard Digits.isDigitString(f[0], maxLength: 11), Digits.isDigitString(f[1], maxLength: 11),
                  f[0].utf8.count >= 6, f[1].utf8.count >= 6
            else { throw fail("the range start and end are 6 to 11 digits") }
            guard f[0].utf8.count == f[1].utf8.count else { throw fail("the range start and end have different lengths") }
            guard Digits.value(of: f[0]) <= Digits.value(of: f[1]) else { throw fail("the range start is above its end") }
            func opt(_ s: String) -> String? { s.isEmpty ? nil : s }
            entries.append(BINInfo(rangeStart: f[0], rangeEnd: f[1], brand: opt(f[2]), type: opt(f[3]), issuer: opt(f[4]), country: opt(f[5])))
        }
        self.init(checked: entries)
    }

    /// A table of ranges already checked.
    private init(checked entries: [BINInfo]) {
        self.entries = entries
        starts = entries.map { Digits.value(of: $0.rangeStart) }
        ends = entries.map { Digits.value(of: $0.rangeEnd) }
        lengths = entries.map { $0.rangeStart.utf8.count }
        var byLength: [Int: [Int]] = [:]
        for i in entries.indices { byLength[lengths[i], default: []].append(i) }
        var groups: [Group] = []
        for length in byLength.keys.sorted() {
            groups.append(Self.group(length: length, members: byLength[length]!, starts: starts, ends: ends))
        }
        self.groups = groups
    }

    /// The most specific range holding the number: among the ranges that contain the number's
    /// prefix of their length, the narrowest (width relative to its length); then the longer
    /// prefix; then the earlier row. nil when none does or a byte is not an ASCII digit.
    public func lookup(_ digits: some Collection<UInt8>) -> BINInfo? {
        guard !groups.isEmpty, Digits.allDigits(digits) else { return nil }
        let (value, count) = Digits.leadingValue(digits, maxCount: groups[groups.count - 1].length)
        var best: Int?
        for group in groups where group.length <= count {
            let prefix = value / Digits.pow10[count - group.length]
            guard let w = Self.winner(in: group, for: prefix) else { continue }
            if let b = best {
                if Self.narrower(w, than: b, starts: starts, ends: ends, lengths: lengths) { best = w }
            } else {
                best = w
            }
        }
        return best.map { entries[$0] }
    }

    /// Whether range `a` is more specific than range `b`.
    private static func narrower(_ a: Int, than b: Int, starts: [Int], ends: [Int], lengths: [Int]) -> Bool {
        // Widths scaled to 11 digits (the longest range length) to compare across lengths.
        let wa = (ends[a] - starts[a] + 1) * Digits.pow10[11 - lengths[a]]
        let wb = (ends[b] - starts[b] + 1) * Digits.pow10[11 - lengths[b]]
        if wa != wb { return wa < wb }
        if lengths[a] != lengths[b] { return lengths[a] > lengths[b] }
        return a < b
    }

    private static func winner(in group: Group, for prefix: Int) -> Int? {
        var lo = 0, hi = group.starts.count - 1
        guard hi >= 0, group.starts[0] <= prefix else { return nil }
        while lo < hi {
            let mid = (lo + hi + 1) / 2
            if group.starts[mid] <= prefix { lo = mid } else { hi = mid - 1 }
        }
        let w = group.winners[lo]
        return w >= 0 ? w : nil
    }

    /// Segments the ranges of one length; each segment goes to its narrowest range (then the
    /// earliest), by painting ranges narrowest first onto the segments still free.
    private static func group(length: Int, members: [Int], starts: [Int], ends: [Int]) -> Group {
        var bounds: [Int] = []
        bounds.reserveCapacity(members.count * 2)
        for i in members {
            bounds.append(starts[i])
            bounds.append(ends[i] + 1)
        }
        bounds.sort()
        var unique: [Int] = []
        unique.reserveCapacity(bounds.count)
        for b in bounds where unique.last != b { unique.append(b) }
        func segment(of value: Int) -> Int {
            var lo = 0, hi = unique.count - 1
            while lo < hi {
                let mid = (lo + hi) / 2
                if unique[mid] < value { lo = mid + 1 } else { hi = mid }
            }
            return lo
        }
        var winners = [Int](repeating: -1, count: unique.count)
        // nextFree[s]: the first segment at or after s not yet painted (path-halving union-find).
        var nextFree = Array(0...unique.count)
        func free(_ s: Int) -> Int {
            var s = s
            while nextFree[s] != s {
                nextFree[s] = nextFree[nextFree[s]]
                s = nextFree[s]
            }
            return s
        }
        let order = members.sorted { a, b in
            let wa = ends[a] - starts[a], wb = ends[b] - starts[b]
            return wa != wb ? wa < wb : a < b
        }
        for i in order {
            let first = segment(of: starts[i]), last = segment(of: ends[i] + 1) - 1
            var s = free(first)
            while s <= last {
                winners[s] = i
                nextFree[s] = s + 1
                s = free(s + 1)
            }
        }
        return Group(length: length, starts: unique, winners: winners)
    }
}
