import Foundation
import Store

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

/// An envelope table of the vault's store, on either backend: `table(idColumn, envelope)`. No table
/// of the store holds a CVC any more (docs/threat-model.md: they are held in memory only), so rows
/// are read without one and a change that carries one is refused rather than written.
public struct SQLEnvelopeTable: EnvelopeTable {
    public let name: String
    let db: Database
    let table: String
    let idColumn: String

    /// `table` must have a text primary key `idColumn` and an `envelope` column; `name` is what
    /// progress and reports call it.
    public init(database: Database, name: String, table: String, idColumn: String) {
        db = database
        self.name = name
        self.table = table
        self.idColumn = idColumn
    }

    /// The tokens (`vault_tokens`).
    public static func tokens(_ db: Database) -> SQLEnvelopeTable {
        SQLEnvelopeTable(database: db, name: "tokens", table: "vault_tokens", idColumn: "token")
    }

    /// The stored instruments (`vault_instruments`).
    public static func instruments(_ db: Database) -> SQLEnvelopeTable {
        SQLEnvelopeTable(database: db, name: "instruments", table: "vault_instruments", idColumn: "id")
    }

    public func rowCount() async throws -> Int {
        try await db.query("SELECT COUNT(*) FROM \(table)").first?.int(0) ?? 0
    }

    public func rows(after cursor: String?, limit: Int) async throws -> [EnvelopeRow] {
        try await db.query(
            "SELECT \(idColumn), envelope FROM \(table) WHERE \(idColumn) > ? ORDER BY \(idColumn) LIMIT ?", [cursor ?? "", limit]
        ).map { (r) throws(StoreError) in EnvelopeRow(id: try r.string(0), envelope: try r.string(1), cvc: nil) }
    }

    public func replace(_ changes: [EnvelopeChange]) async throws -> [Bool] {
        guard !changes.isEmpty else { return [] }
        // A change that would write a CVC is answered false and not run (its row stays as read).
        let runs = changes.filter { $0.cvc == nil && $0.row.cvc == nil }
        let replaced = try await db.batch(
            "UPDATE \(table) SET envelope = ? WHERE \(idColumn) = ? AND envelope = ? RETURNING \(idColumn)",
            runs.map { [.text($0.envelope), .text($0.row.id), .text($0.row.envelope)] })
        var answers = replaced.makeIterator()
        return changes.map { c in c.cvc == nil && c.row.cvc == nil ? !(answers.next()?.isEmpty ?? true) : false }
    }

    public func kidCounts() async throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for row in try await db.query("SELECT \(db.dialect.jsonText("envelope", "kid")), COUNT(*) FROM \(table) GROUP BY 1") {
            counts[row.optionalString(0) ?? "?", default: 0] += try row.int(1)
        }
        return counts
    }
}
