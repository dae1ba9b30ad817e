#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A calendar month (UTC), the unit card expiry is counted in.
public struct CalendarMonth: Sendable, Hashable, Comparable {
    /// Four-digit year.
    public let year: Int
    /// 1…12.
    public let month: Int

    /// A month.
    public init(year: Int, month: Int) {
        self.year = year
        self.month = month
    }

    /// The current month in UTC.
    public static var current: CalendarMonth {
        var t = time(nil)
        var parts = tm()
        gmtime_r(&t, &parts)
        return CalendarMonth(year: Int(parts.tm_year) + 1900, month: Int(parts.tm_mon) + 1)
    }

    public static func < (a: CalendarMonth, b: CalendarMonth) -> Bool { (a.year, a.month) < (b.year, b.month) }
}

/// A card's expiry: valid through the last day of its month.
public struct CardExpiry: Sendable, Hashable, Codable {
    /// 1…12.
    public let month: Int
    /// Four-digit year.
    public let year: Int

    /// An expiry; two-digit years are for `parse` only.
    /// - Throws: `INVALID_EXPIRY_MONTH` for a month outside 1…12 or a year outside 2000…2199.
    public init(month: Int, year: Int) throws(CardRulesError) {
        guard (1...12).contains(month) else { throw CardRulesError(code: .invalidMonth, message: "the expiry month is 1 to 12") }
        guard (2000...2199).contains(year) else { throw CardRulesError(code: .invalidMonth, message: "the expiry year is four digits from 2000") }
        self.month = month
        self.year = year
    }

    /// Parses `MM/YY`, `MM/YYYY`, `M/YY` (spaces around `/` allowed) or `MMYY`.
    /// - Throws: `EXPIRY_MALFORMED`, `INVALID_EXPIRY_MONTH`.
    public static func parse(_ text: String) throws(CardRulesError) -> CardExpiry {
        let bytes = Array(text.utf8).filter { $0 != 32 }
        let malformed = CardRulesError(code: .expiryMalformed, message: "an expiry is MM/YY or MM/YYYY")
        var monthDigits: ArraySlice<UInt8>, yearDigits: ArraySlice<UInt8>
        if let slash = bytes.firstIndex(of: UInt8(ascii: "/")) {
            monthDigits = bytes[..<slash]
            yearDigits = bytes[(slash + 1)...]
        } else if bytes.count == 4 {
            monthDigits = bytes[0..<2]
            yearDigits = bytes[2..<4]
        } else {
            throw malformed
        }
        guard (1...2).contains(monthDigits.count), yearDigits.count == 2 || yearDigits.count == 4,
              (monthDigits + yearDigits).allSatisfy({ $0 >= 48 && $0 <= 57 })
        else { throw malformed }
        let month = monthDigits.reduce(0) { $0 * 10 + Int($1 - 48) }
        var year = yearDigits.reduce(0) { $0 * 10 + Int($1 - 48) }
        if yearDigits.count == 2 { year += 2000 }
        return try CardExpiry(month: month, year: year)
    }

    /// nil when usable in `now`; `CARD_EXPIRED` after its month, `EXPIRY_TOO_FAR` more than
    /// `maxYearsAhead` years ahead.
    public func validate(now: CalendarMonth = .current, maxYearsAhead: Int = 20) -> CardRulesError.Code? {
        let me = CalendarMonth(year: year, month: month)
        if me < now { return .expired }
        if year > now.year + maxYearsAhead { return .expiryTooFar }
        return nil
    }

    /// `MM/YYYY`.
    public var text: String {
        (month < 10 ? "0" : "") + String(month) + "/" + String(year)
    }
}
