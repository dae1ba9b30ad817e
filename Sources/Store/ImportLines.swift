import Foundation

/// The journal of `vault import` (docs/portability.md): one row per input line handled, written in
/// the same transaction as the tokens of its batch, so a run killed at any point and run again
/// continues after the last committed batch and never makes a second token for a line. A row holds
/// the import's id (a keyed digest of its input and mapping), the line number, and the outcome:
/// the token (imported or duplicate) or the error code and field of a reject. Never card data.
public enum ImportLines {
    static let migration = Migration("0013-import-lines") { (d: Dialect) in
        [
            """
            CREATE TABLE vault_import_lines (
                import_id TEXT NOT NULL, line \(d.int) NOT NULL, outcome TEXT NOT NULL, token TEXT, code TEXT, field TEXT,
                PRIMARY KEY (import_id, line))
            """
        ]
    }

    /// One journal row.
    public struct Row: Sendable, Equatable {
        public var line: Int
        /// `imported`, `duplicate` or `rejected`.
        public var outcome: String
        public var token: String?
        public var code: String?
        public var field: String?

        public init(line: Int, outcome: String, token: String?, code: String?, field: String?) {
            self.line = line
            self.outcome = outcome
            self.token = token
            self.code = code
            self.field = field
        }

        var values: [any SQLBindable] { [line, outcome, token, code, field] }
    }

    /// Appends a batch's rows inside `tx` (the transaction that stores its tokens).
    public static func append(_ rows: [Row], importID: String, in tx: Transaction) async throws(StoreError) {
        for chunk in stride(from: 0, to: rows.count, by: 500) {
            let part = rows[chunk..<min(rows.count, chunk + 500)]
            let sql = "INSERT INTO vault_import_lines (import_id, line, outcome, token, code, field) VALUES "
                + part.map { _ in "(?, ?, ?, ?, ?, ?)" }.joined(separator: ", ")
            try await tx.query(sql, part.flatMap { [importID as any SQLBindable] + $0.values })
        }
    }

    /// The last line an import has committed (0: none).
    public static func lastLine(importID: String, in db: Database) async throws(StoreError) -> Int {
        try await db.query("SELECT MAX(line) FROM vault_import_lines WHERE import_id = ?", [importID]).first.flatMap { $0.optionalInt(0) } ?? 0
    }

    /// Every row of an import, in line order.
    public static func rows(importID: String, in db: Database) async throws(StoreError) -> [Row] {
        try await db.query("SELECT line, outcome, token, code, field FROM vault_import_lines WHERE import_id = ? ORDER BY line", [importID]).map {
            (r) throws(StoreError) in
            Row(line: try r.int(0), outcome: try r.string(1), token: r.optionalString(2), code: r.optionalString(3), field: r.optionalString(4))
        }
    }
}

extension Migrations {
    static let importLines = ImportLines.migration
}
