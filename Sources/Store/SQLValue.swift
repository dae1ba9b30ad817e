import Foundation

/// A value bound to or read from a statement: the four kinds the vault's tables use. Booleans are
/// `BOOLEAN` on PostgreSQL and `INTEGER` 0/1 on SQLite; times are milliseconds since 1970 (`Millis`).
public enum SQLValue: Sendable, Equatable {
    case null
    case int(Int64)
    case text(String)
    case bool(Bool)
}

/// Something that binds as a `SQLValue`.
public protocol SQLBindable: Sendable {
    var sqlValue: SQLValue { get }
}

extension String: SQLBindable { public var sqlValue: SQLValue { .text(self) } }
extension Int: SQLBindable { public var sqlValue: SQLValue { .int(Int64(self)) } }
extension Int64: SQLBindable { public var sqlValue: SQLValue { .int(self) } }
extension Bool: SQLBindable { public var sqlValue: SQLValue { .bool(self) } }
extension Date: SQLBindable { public var sqlValue: SQLValue { .int(Millis.of(self)) } }
extension SQLValue: SQLBindable { public var sqlValue: SQLValue { self } }
extension Optional: SQLBindable where Wrapped: SQLBindable {
    public var sqlValue: SQLValue { self?.sqlValue ?? .null }
}

/// Times in the store: integer milliseconds since 1970, the same on both backends.
public enum Millis {
    public static func of(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }
    public static func date(_ millis: Int64) -> Date { Date(timeIntervalSince1970: Double(millis) / 1000) }
}

/// One result row, by column position (the order of the statement's select list).
public struct SQLRow: Sendable, Equatable {
    public let values: [SQLValue]

    public init(_ values: [SQLValue]) { self.values = values }

    public subscript(_ i: Int) -> SQLValue { i < values.count ? values[i] : .null }

    public func string(_ i: Int) throws(StoreError) -> String {
        guard let s = optionalString(i) else { throw StoreError(.corruptRow, "column \(i) is not text") }
        return s
    }

    public func optionalString(_ i: Int) -> String? {
        switch self[i] {
        case .text(let s): s
        case .int(let n): String(n)
        default: nil
        }
    }

    public func int(_ i: Int) throws(StoreError) -> Int {
        guard let n = optionalInt(i) else { throw StoreError(.corruptRow, "column \(i) is not a number") }
        return n
    }

    public func optionalInt(_ i: Int) -> Int? {
        switch self[i] {
        case .int(let n): Int(n)
        case .bool(let b): b ? 1 : 0
        case .text(let s): Int(s)
        case .null: nil
        }
    }

    public func bool(_ i: Int) throws(StoreError) -> Bool {
        switch self[i] {
        case .bool(let b): return b
        case .int(let n): return n != 0
        default: throw StoreError(.corruptRow, "column \(i) is not a boolean")
        }
    }

    public func date(_ i: Int) throws(StoreError) -> Date { Millis.date(Int64(try int(i))) }

    public func optionalDate(_ i: Int) -> Date? { optionalInt(i).map { Millis.date(Int64($0)) } }
}
