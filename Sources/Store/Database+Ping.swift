extension Database {
    /// A cheap real query (one row of `vault_migrations`, on either backend), for readiness
    /// checks: it goes through the same pool or client as every other statement, so it fails as
    /// they would (a lost PostgreSQL, a SQLite file that can no longer be read).
    /// - Throws: `STORE_UNAVAILABLE`.
    public func ping() async throws(StoreError) {
        _ = try await query("SELECT 1 FROM vault_migrations LIMIT 1")
    }
}

extension LedgerStore {
    /// The ledger's store answers a cheap real query (`Database.ping()`).
    /// - Throws: `STORE_UNAVAILABLE`.
    public func ping() async throws(StoreError) { try await db.ping() }
}
