import Foundation
import GRDB
import PostgresNIO

/// A table whose rows hold card envelopes, as key rotation sees it: `vault rewrap` walks the rows
/// in id order and swaps each envelope for one sealed to the primary key, and `vault keys retire`
/// counts the rows still sealed to a kid. Tokens and stored instruments are such tables.
public protocol EnvelopeTable: Sendable {
    /// For progress and reports: "tokens", "instruments".
    var name: String { get }
    /// Number of rows.
    func rowCount() async throws -> Int
    /// Up to `limit` rows with ids after `cursor` (nil: from the start), in id order.
    func rows(after cursor: String?, limit: Int) async throws -> [EnvelopeRow]
    /// Replaces each row's envelope (and sealed CVC) only if the row still holds exactly what was
    /// read (compare-and-swap, all in one durable transaction): a row deleted, consumed or whose
    /// CVC was dropped meanwhile is left alone, and the answer for it is false.
    func replace(_ changes: [EnvelopeChange]) async throws -> [Bool]
    /// Rows per kid of their envelope.
    func kidCounts() async throws -> [String: Int]
}

/// One row: its id, its envelope JSON and, for tokens, the CVC field kept apart.
public struct EnvelopeRow: Sendable, Equatable {
    public var id: String
    public var envelope: String
    public var cvc: String?

    public init(id: String, envelope: String, cvc: String?) {
        self.id = id
        self.envelope = envelope
        self.cvc = cvc
    }
}

/// A new envelope for a row, valid only over the row as read.
public struct EnvelopeChange: Sendable {
    public var row: EnvelopeRow
    public var envelope: String
    public var cvc: String?

    public init(row: EnvelopeRow, envelope: String, cvc: String?) {
        self.row = row
        self.envelope = envelope
        self.cvc = cvc
    }
}

/// The SQLite side of an envelope table: `table(id, envelope[, cvc])`.
public struct SQLiteEnvelopeTable: EnvelopeTable {
    public let name: String
    let pool: DatabasePool
    let idColumn: String
    let hasCVC: Bool

    /// `table` must have a text primary key `idColumn` and an `envelope` column (and `cvc` when `hasCVC`).
    public init(pool: DatabasePool, table: String, idColumn: String, hasCVC: Bool) {
        self.pool = pool
        self.name = table
        self.idColumn = idColumn
        self.hasCVC = hasCVC
    }

    public func rowCount() async throws -> Int {
        try await pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(name)") ?? 0 }
    }

    public func rows(after cursor: String?, limit: Int) async throws -> [EnvelopeRow] {
        let cvc = hasCVC ? "cvc" : "NULL"
        return try await pool.read { db in
            try Row.fetchAll(
                db, sql: "SELECT \(idColumn), envelope, \(cvc) FROM \(name) WHERE \(idColumn) > ? ORDER BY \(idColumn) LIMIT ?",
                arguments: [cursor ?? "", limit]
            ).map { EnvelopeRow(id: $0[0], envelope: $0[1], cvc: $0[2]) }
        }
    }

    public func replace(_ changes: [EnvelopeChange]) async throws -> [Bool] {
        let sql = hasCVC
            ? "UPDATE \(name) SET envelope = ?, cvc = ? WHERE \(idColumn) = ? AND envelope = ? AND cvc IS ?"
            : "UPDATE \(name) SET envelope = ? WHERE \(idColumn) = ? AND envelope = ?"
        let hasCVC = self.hasCVC
        return try await pool.write { db in
            let update = try db.cachedStatement(sql: sql)
            return try changes.map { c in
                if hasCVC {
                    try update.execute(arguments: [c.envelope, c.cvc, c.row.id, c.row.envelope, c.row.cvc])
                } else {
                    try update.execute(arguments: [c.envelope, c.row.id, c.row.envelope])
                }
                return db.changesCount == 1
            }
        }
    }

    public func kidCounts() async throws -> [String: Int] {
        try await pool.read { db in
            var counts: [String: Int] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT json_extract(envelope, '$.kid'), COUNT(*) FROM \(name) GROUP BY 1") {
                counts[(row[0] as String?) ?? "?", default: 0] += row[1] as Int
            }
            return counts
        }
    }
}

/// The PostgreSQL side of an envelope table.
public struct PostgresEnvelopeTable: EnvelopeTable {
    public let name: String
    let client: PostgresClient
    let logger: Logger
    let table: String
    let idColumn: String
    let hasCVC: Bool

    public init(client: PostgresClient, logger: Logger, name: String, table: String, idColumn: String, hasCVC: Bool) {
        self.client = client
        self.logger = logger
        self.name = name
        self.table = table
        self.idColumn = idColumn
        self.hasCVC = hasCVC
    }

    public func rowCount() async throws -> Int {
        let rows = try await client.query(PostgresQuery(unsafeSQL: "SELECT COUNT(*)::BIGINT FROM \(table)"), logger: logger)
        for try await n in rows.decode(Int64.self) { return Int(n) }
        return 0
    }

    public func rows(after cursor: String?, limit: Int) async throws -> [EnvelopeRow] {
        var bindings = PostgresBindings()
        bindings.append(cursor ?? "")
        bindings.append(limit)
        let cvc = hasCVC ? "cvc" : "NULL::TEXT"
        let query = PostgresQuery(
            unsafeSQL: "SELECT \(idColumn), envelope, \(cvc) FROM \(table) WHERE \(idColumn) > $1 ORDER BY \(idColumn) LIMIT $2",
            binds: bindings)
        var out: [EnvelopeRow] = []
        for try await (id, envelope, cvc) in try await client.query(query, logger: logger).decode((String, String, String?).self) {
            out.append(EnvelopeRow(id: id, envelope: envelope, cvc: cvc))
        }
        return out
    }

    public func replace(_ changes: [EnvelopeChange]) async throws -> [Bool] {
        let sql = hasCVC
            ? "UPDATE \(table) SET envelope = $1, cvc = $2 WHERE \(idColumn) = $3 AND envelope = $4 AND cvc IS NOT DISTINCT FROM $5 RETURNING 1"
            : "UPDATE \(table) SET envelope = $1 WHERE \(idColumn) = $2 AND envelope = $3 RETURNING 1"
        let hasCVC = self.hasCVC
        return try await client.withTransaction(logger: logger) { c in
            var done: [Bool] = []
            for change in changes {
                var b = PostgresBindings()
                b.append(change.envelope)
                if hasCVC { b.append(change.cvc) }
                b.append(change.row.id)
                b.append(change.row.envelope)
                if hasCVC { b.append(change.row.cvc) }
                var n = 0
                for try await _ in try await c.query(PostgresQuery(unsafeSQL: sql, binds: b), logger: logger) { n += 1 }
                done.append(n == 1)
            }
            return done
        }
    }

    public func kidCounts() async throws -> [String: Int] {
        let query = PostgresQuery(unsafeSQL: "SELECT (envelope::jsonb)->>'kid', COUNT(*)::BIGINT FROM \(table) GROUP BY 1")
        var counts: [String: Int] = [:]
        for try await (kid, n) in try await client.query(query, logger: logger).decode((String?, Int64).self) {
            counts[kid ?? "?", default: 0] += Int(n)
        }
        return counts
    }
}

extension SQLiteTokenStore {
    /// The tokens table, for key rotation.
    public var envelopeTable: any EnvelopeTable { SQLiteEnvelopeTable(pool: database, table: "tokens", idColumn: "token", hasCVC: false) }
}

extension PostgresTokenStore {
    /// The tokens table, for key rotation.
    public static func envelopeTable(client: PostgresClient, logger: Logger) -> any EnvelopeTable {
        PostgresEnvelopeTable(client: client, logger: logger, name: "tokens", table: "vault_tokens", idColumn: "token", hasCVC: false)
    }
}
