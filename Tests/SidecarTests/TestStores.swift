import Store
import Tokenizer

/// A migrated SQLite store at `path` (created if needed), as a sidecar opens it.
func openSQLite(_ path: String) async throws -> Database {
    let db = try Database(sqlitePath: path)
    try await db.migrate()
    return db
}

/// A token store over a migrated SQLite file at `path`.
func sqliteTokenStore(_ path: String) async throws -> SQLTokenStore {
    SQLTokenStore(database: try await openSQLite(path))
}
