import Foundation

extension JSONText {
    /// `2026-11-23T12:50:59Z` (UTC, whole seconds), without Foundation's formatter machinery.
    public static func iso(_ d: Date) -> String {
        var t = time_t(d.timeIntervalSince1970.rounded(.down))
        var tm = tm()
        gmtime_r(&t, &tm)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(tm.tm_year + 1900)-\(two(tm.tm_mon + 1))-\(two(tm.tm_mday))T\(two(tm.tm_hour)):\(two(tm.tm_min)):\(two(tm.tm_sec))Z"
    }
}
