import Foundation

/// One page of a list route (README "Listing and search"): newest first (`created_at DESC`, then
/// id `DESC`), at most `limit` items after the cursor `startingAfter` (an id of the previous page),
/// within an optional creation range (both bounds inclusive).
public struct ListQuery: Sendable, Equatable {
    /// Page sizes allowed (`limit`).
    public static let limits = 1...100
    public static let defaultLimit = 10

    public var limit: Int
    public var startingAfter: String?
    public var createdFrom: Date?
    public var createdTo: Date?

    public init(limit: Int = ListQuery.defaultLimit, startingAfter: String? = nil, createdFrom: Date? = nil, createdTo: Date? = nil) {
        self.limit = limit
        self.startingAfter = startingAfter
        self.createdFrom = createdFrom
        self.createdTo = createdTo
    }
}

extension ListQuery {
    /// The creation range's clauses (`created_at`, both bounds inclusive) and their arguments.
    public func createdRange(into clauses: inout [String], _ arguments: inout [any SQLBindable]) {
        if let createdFrom {
            clauses.append("created_at >= ?")
            arguments.append(createdFrom)
        }
        if let createdTo {
            clauses.append("created_at <= ?")
            arguments.append(createdTo)
        }
    }
}

/// What a list query found: the page, whether more follow, or that its cursor names no object.
public enum ListPage<Item: Sendable>: Sendable {
    case page([Item], hasMore: Bool)
    /// `startingAfter` is not an object of this list (unknown, deleted, or of another kind).
    case unknownCursor
}

extension ListPage: Equatable where Item: Equatable {}

extension Database {
    /// Keyset pagination over `table` (columns `created_at` and `idColumn`, indexed together with
    /// each filter): `columns` of the rows of the list (`kind`: SQL without arguments naming which
    /// rows of the table the list holds; the cursor must be one of them) matching `filters` (SQL
    /// with `?`, and their arguments), newest first, after the cursor row. One query for the cursor, one for the page
    /// (`limit + 1` rows read, to know `hasMore`): the cost of a page does not grow with its depth.
    public func page(
        _ table: String, idColumn: String = "id", columns: String, kind: String? = nil, filters: [(String, [any SQLBindable])], _ q: ListQuery
    ) async throws(StoreError) -> ListPage<SQLRow> {
        var clauses = (kind.map { [$0] } ?? []) + filters.map(\.0)
        var arguments = filters.flatMap(\.1)
        q.createdRange(into: &clauses, &arguments)
        if let cursor = q.startingAfter {
            let cursorWhere = (["\(idColumn) = ?"] + (kind.map { [$0] } ?? [])).joined(separator: " AND ")
            guard let row = try await query("SELECT created_at FROM \(table) WHERE \(cursorWhere)", [cursor]).first else {
                return .unknownCursor
            }
            let at = try row.int(0)
            clauses.append("(created_at < ? OR (created_at = ? AND \(idColumn) < ?))")
            arguments += [at, at, cursor]
        }
        let whereSQL = clauses.isEmpty ? "" : " WHERE " + clauses.joined(separator: " AND ")
        let limit = min(max(q.limit, ListQuery.limits.lowerBound), ListQuery.limits.upperBound)
        // Filters may walk many rows before a page is full: off the calling thread (`scan`).
        let rows = try await scan(
            "SELECT \(columns) FROM \(table)\(whereSQL) ORDER BY created_at DESC, \(idColumn) DESC LIMIT \(limit + 1)", arguments)
        return .page(Array(rows.prefix(limit)), hasMore: rows.count > limit)
    }
}

extension ListPage where Item == SQLRow {
    /// The page's rows made into items.
    public func map<T: Sendable>(_ transform: (SQLRow) throws(StoreError) -> T) throws(StoreError) -> ListPage<T> {
        switch self {
        case .unknownCursor: return .unknownCursor
        case .page(let rows, let hasMore):
            var items: [T] = []
            items.reserveCapacity(rows.count)
            for r in rows { items.append(try transform(r)) }
            return .page(items, hasMore: hasMore)
        }
    }
}
