#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A calendar month (UTC), the unit card expiry is counted in.
public struct CalendarMonth: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Year, e.g. 2026.
    public let year: Int
    /// Month, 1…12.
    public let month: Int

    /// A month. Months outside 1…12 carry into the year (`month: 13` is January of the next).
    public init(year: Int, month: Int) {
        let zeroBased = month - 1
        let carry = zeroBased >= 0 ? zeroBased / 12 : (zeroBased - 11) / 12
        self.year = year + carry
        self.month = zeroBased - carry * 12 + 1
    }

    /// The current month in UTC, from the system clock (`time` and `gmtime_r`).
    public static var current: CalendarMonth {
        var now = time(nil)
        var parts = tm()
        guard gmtime_r(&now, &parts) != nil else { return CalendarMonth(year: 1970, month: 1) }
        return CalendarMonth(year: Int(parts.tm_year) + 1900, month: Int(parts.tm_mon) + 1)
    }

    /// Months since January of year 0: for differences between months.
    public var ordinal: Int { year * 12 + (month - 1) }

    /// This month moved by `months` (negative to go back).
    public func adding(months: Int) -> CalendarMonth { CalendarMonth(year: year, month: month + months) }

    /// Earlier months first.
    public static func < (a: CalendarMonth, b: CalendarMonth) -> Bool { a.ordinal < b.ordinal }

    /// `YYYY-MM`.
    public var description: String { "\(year)-\(month < 10 ? "0" : "")\(month)" }
}
