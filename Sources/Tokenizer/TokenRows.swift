import Store

/// Token rows for a bulk writer that stores many tokens in a transaction of its own (`vault
/// import`): the same columns and values `SQLTokenStore.insert` writes, never a CVC.
public enum TokenRows {
    /// Inserts `records` inside `tx`, a multi-row statement per 200 rows; a token id already
    /// taken is skipped (`ON CONFLICT DO NOTHING`). Returns the tokens inserted.
    public static func insert(_ records: [TokenRecord], in tx: Transaction) async throws(StoreError) -> Set<String> {
        try await insert(values: records.map(values), in: tx)
    }

    /// A record's row values, never its CVC (made apart so that a bulk writer can make them on
    /// several threads).
    public static func values(_ record: TokenRecord) -> [SQLValue] { StoredToken(record).values }

    /// Inserts rows made by `values(_:)`, as `insert(_:in:)` does.
    public static func insert(values rows: [[SQLValue]], in tx: Transaction) async throws(StoreError) -> Set<String> {
        var inserted = Set<String>()
        for start in stride(from: 0, to: rows.count, by: 200) {
            let part = rows[start..<min(rows.count, start + 200)]
            let sql = "INSERT INTO vault_tokens (\(StoredToken.insertColumns)) VALUES "
                + part.map { _ in "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)" }.joined(separator: ", ")
                + " ON CONFLICT (token) DO NOTHING RETURNING token"
            for row in try await tx.query(sql, part.flatMap { $0 as [any SQLBindable] }) { inserted.insert(try row.string(0)) }
        }
        return inserted
    }
}
