/// A card's expiry: the card is valid through the last day of its month.
///
/// Decoding (`Codable`, keys `month` and `year`) applies the same checks as `init(month:year:)`.
public struct CardExpiry: Sendable, Hashable, Codable {
    /// Month, 1…12.
    public let month: Int
    /// Four-digit year, 2000…2199.
    public let year: Int

    /// Years a card expiry may name; two-digit years are for `parse` only.
    public static let years = 2000...2199

    /// An expiry.
    /// - Throws: `INVALID_EXPIRY_MONTH` for a month outside 1…12, `EXPIRY_MALFORMED` for a year
    ///   outside 2000…2199 (a two-digit year must go through `parse`).
    public init(month: Int, year: Int) throws(CardRulesError) {
        guard (1...12).contains(month) else { throw Self.badMonth }
        guard Self.years.contains(year) else { throw Self.badYear }
        self.month = month
        self.year = year
    }

    /// Parses `MM/YY`, `MM/YYYY`, `M/YY`, `M/YYYY` (spaces or tabs around the `/` and around the
    /// whole allowed) or `MMYY`. Two-digit years are 20YY.
    /// - Throws: `EXPIRY_MALFORMED` for any other form, `INVALID_EXPIRY_MONTH` for month 0 or
    ///   above 12.
    public static func parse(_ text: String) throws(CardRulesError) -> CardExpiry {
        var bytes = Substring(text).utf8
        guard bytes.count <= 32 else { throw malformed }
        func isBlank(_ b: UInt8) -> Bool { b == UInt8(ascii: " ") || b == UInt8(ascii: "\t") }
        func trimmed(_ s: Substring.UTF8View) -> Substring.UTF8View {
            var s = s
            while let f = s.first, isBlank(f) { s = s.dropFirst() }
            while let l = s.last, isBlank(l) { s = s.dropLast() }
            return s
        }
        bytes = trimmed(bytes)
        let monthPart: Substring.UTF8View, yearPart: Substring.UTF8View
        if let slash = bytes.firstIndex(of: UInt8(ascii: "/")) {
            monthPart = trimmed(bytes[..<slash])
            yearPart = trimmed(bytes[bytes.index(after: slash)...])
            guard (1...2).contains(monthPart.count), yearPart.count == 2 || yearPart.count == 4 else { throw malformed }
        } else {
            guard bytes.count == 4 else { throw malformed }
            monthPart = bytes.prefix(2)
            yearPart = bytes.suffix(2)
        }
        guard Digits.allDigits(monthPart), Digits.allDigits(yearPart) else { throw malformed }
        let month = monthPart.reduce(0) { $0 * 10 + Int($1 &- Digits.zero) }
        var year = yearPart.reduce(0) { $0 * 10 + Int($1 &- Digits.zero) }
        if yearPart.count == 2 { year += 2000 }
        return try CardExpiry(month: month, year: year)
    }

    /// nil when the card is usable in `now`; `CARD_EXPIRED` once its month has passed (it is
    /// valid through its month); `EXPIRY_TOO_FAR` when it is more than `maxYearsAhead` years
    /// (counted in months) after `now`.
    public func validate(now: CalendarMonth = .current, maxYearsAhead: Int = 20) -> CardRulesError.Code? {
        let me = CalendarMonth(year: year, month: month)
        if me < now { return .expired }
        if me.ordinal - now.ordinal > maxYearsAhead * 12 { return .expiryTooFar }
        return nil
    }

    /// The month of the expiry.
    public var calendarMonth: CalendarMonth { CalendarMonth(year: year, month: month) }

    /// `MM/YYYY`.
    public var text: String { (month < 10 ? "0" : "") + String(month) + "/" + String(year) }

    private enum CodingKeys: String, CodingKey { case month, year }

    /// Decodes `{"month": M, "year": YYYY}`, checked like `init(month:year:)`.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let month = try c.decode(Int.self, forKey: .month)
        let year = try c.decode(Int.self, forKey: .year)
        do {
            try self.init(month: month, year: year)
        } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath, debugDescription: error.description))
        }
    }

    /// Encodes `{"month": M, "year": YYYY}`.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(month, forKey: .month)
        try c.encode(year, forKey: .year)
    }

    private static let malformed = CardRulesError(code: .expiryMalformed, message: "an expiry is MM/YY, MM/YYYY or MMYY")
    private static let badMonth = CardRulesError(code: .invalidMonth, message: "the expiry month is 1 to 12")
    private static let badYear = CardRulesError(code: .expiryMalformed, message: "the expiry year is from 2000 to 2199")
}
