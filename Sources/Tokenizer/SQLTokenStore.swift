import Foundation
import Store
import VaultCrypto

/// The token store over the vault's `Database`, on either backend: the embedded SQLite file (WAL,
/// `synchronous = FULL`) or the PostgreSQL database several sidecars share. A token is
/// acknowledged only after the commit that holds it is durable.
///
/// Rows (`vault_tokens`, migration `0001-base`) hold the envelope JSON without its CVC field,
/// metadata columns for lookups, the gateway's fingerprint and millisecond timestamps. Deletes
/// leave no ciphertext behind in SQLite's free pages (`secure_delete`).
public final class SQLTokenStore: TokenStore {
    let db: Database
    private let batcher: GroupCommit

    /// A store over a migrated database (`Database.migrate()`).
    public init(database: Database) {
        db = database
        batcher = GroupCommit(database: database)
    }

    /// Rows waiting for the group commit (tests).
    var queuedInserts: Int { batcher.queued }

    public func ping() async throws(StoreError) { try await db.ping() }

    /// The tokens table, for key rotation.
    public var envelopeTable: any EnvelopeTable { SQLEnvelopeTable.tokens(db) }

    /// Stores a token. Concurrent inserts share one transaction (group commit): each caller
    /// returns only after the commit that holds its row is durable, and one commit serves them all.
    public func insert(_ record: TokenRecord) async throws(StoreError) {
        // Its metadata's search rows are written by the store's trigger in the same transaction.
        if let failure = await batcher.submit(StoredToken(record).values) { throw failure }
    }

    public func get(_ token: String, now: Date) async throws(StoreError) -> TokenRecord? {
        let rows = try await db.query(Self.getSQL, [token, now])
        return try rows.first.map { (row) throws(StoreError) in try StoredToken(row: row).record() }
    }

    /// A live token by id (`get`).
    static let getSQL = "SELECT \(StoredToken.selectColumns) FROM vault_tokens WHERE token = ? AND expires_at > ?"

    public func setFingerprints(_ fingerprints: [(token: String, fingerprint: String)]) async throws(StoreError) -> Int {
        guard !fingerprints.isEmpty else { return 0 }
        let changed = try await db.batch(
            "UPDATE vault_tokens SET fingerprint = ? WHERE token = ? AND fingerprint IS NULL RETURNING token",
            fingerprints.map { [.text($0.fingerprint), .text($0.token)] })
        return changed.reduce(0) { $0 + $1.count }
    }

    public func linkFingerprints(_ group: [String]) async throws(StoreError) {
        try await FingerprintLinks.record(group, in: db)
    }

    public func noteFingerprintWithheld(_ token: String) async throws(StoreError) {
        try await NoticeEvents.token("fingerprint.withheld", token, in: db)
    }

    public func withoutFingerprint(after: String, limit: Int, now: Date) async throws(StoreError) -> [TokenRecord] {
        let rows = try await db.query("""
            SELECT \(StoredToken.selectColumns) FROM vault_tokens
            WHERE fingerprint IS NULL AND token > ? AND expires_at > ? ORDER BY token LIMIT ?
            """, [after, now, limit])
        return try rows.map { (row) throws(StoreError) in try StoredToken(row: row).record() }
    }

    public func delete(_ token: String) async throws(StoreError) -> Bool {
        try await !db.write("DELETE FROM vault_tokens WHERE token = ? RETURNING token", [token]).isEmpty
    }

    public func purgeExpired(now: Date) async throws(StoreError) -> PurgeResult {
        let deleted = try await db.write("DELETE FROM vault_tokens WHERE expires_at <= ? RETURNING token", [now])
        return PurgeResult(tokensDeleted: deleted.count, cvcsDropped: 0)
    }

    public func list(_ q: ListQuery, fingerprint: String?, metadata: [(key: String, value: String)], now: Date) async throws(StoreError) -> ListPage<TokenRecord> {
        // `+expires_at`: not an index to walk (SQLite would take the expiry index and sort every
        // live token for each page); the order's index is walked and expired rows skipped.
        var filters: [(String, [any SQLBindable])] = [("+expires_at > ?", [now])]
        // The card's fingerprints under every key linked to it, and their legacy bare forms.
        if let fingerprint { filters.append(FingerprintLinks.filter("fingerprint", try await FingerprintLinks.candidates(of: fingerprint, in: db))) }
        filters += Metadata.filters(metadata, owner: .token, idColumn: "token")
        return try await db.page("vault_tokens", idColumn: "token", columns: StoredToken.selectColumns, filters: filters, q).map {
            (row) throws(StoreError) in try StoredToken(row: row).record()
        }
    }

    public func reusable(
        fingerprints: [String], expiry: (month: Int, year: Int), cardShaped: Bool, liveAfter: Date, limit: Int
    ) async throws(StoreError) -> [TokenRecord] {
        var names: [String] = []
        for fp in fingerprints { for c in try await FingerprintLinks.candidates(of: fp, in: db) where !names.contains(c) { names.append(c) } }
        let (match, candidates) = FingerprintLinks.filter("fingerprint", names)
        let exp = { (key: String) in "CAST(\(self.db.dialect.envelopeCardField("envelope", key)) AS INTEGER)" }
        let rows = try await db.query("""
            SELECT \(StoredToken.selectColumns) FROM vault_tokens
            WHERE \(match) AND single_use = ? AND expires_at > ? AND token \(cardShaped ? "NOT LIKE" : "LIKE") 'tok\\_%' ESCAPE '\\'
            AND \(exp("exp_month")) = ? AND \(exp("exp_year")) = ?
            ORDER BY created_at DESC, token DESC LIMIT ?
            """, candidates + [false, liveAfter, expiry.month, expiry.year, limit])
        return try rows.map { (row) throws(StoreError) in try StoredToken(row: row).record() }
    }

    public func replaceEnvelope(of token: String, oldKey: String, with envelope: CardEnvelope, now: Date) async throws(StoreError) -> Bool {
        let json = (envelope.fields[.cvc] == nil ? envelope : envelope.droppingCVC()).json
        return try await !db.write(
            "UPDATE vault_tokens SET envelope = ? WHERE token = ? AND expires_at > ? AND \(db.dialect.jsonText("envelope", "key")) = ? RETURNING token",
            [json, token, now, oldKey]
        ).isEmpty
    }

    public func count() async throws(StoreError) -> Int {
        try await db.query("SELECT COUNT(*) FROM vault_tokens").first?.int(0) ?? 0
    }
}

/// Group commit for inserts: rows that arrive while a commit is running wait and go in the next
/// transaction together (`Database.batch`: one commit, one fsync on SQLite, one WAL flush on
/// PostgreSQL). A row whose token exists gets `TOKEN_EXISTS` alone (the others commit); a failed
/// commit fails every row of its batch, and none of them was acknowledged.
///
/// `LeaderBatches` runs them: the rows queued behind a commit go in the next one (at most
/// `maxBatch`), and a cancelled leader does not fail its batch.
final class GroupCommit: Sendable {
    /// Largest batch in one transaction (bounds the latency a commit adds to its first row).
    static let maxBatch = 256
    static let insertSQL = """
        INSERT INTO vault_tokens (\(StoredToken.insertColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (token) DO NOTHING RETURNING token
        """

    private let batches: LeaderBatches<[SQLValue], StoreError?>

    init(database db: Database) {
        batches = LeaderBatches(take: { min($0.count, Self.maxBatch) }) { rows in
            do throws(StoreError) {
                return try await Self.insert(rows, into: db)
            } catch {
                let failure = error.code == .duplicate ? StoreError(.tokenExists, "a token with that id exists") : error
                return Array(repeating: failure, count: rows.count)
            }
        }
    }

    /// Rows waiting for a commit (tests).
    var queued: Int { batches.queued }

    /// Queues a row; returns after its transaction committed (nil) or failed (the error).
    func submit(_ values: [SQLValue]) async -> StoreError? {
        await batches.submit(values)
    }

    /// Inserts `rows` in one transaction; each row's outcome (`TOKEN_EXISTS` for a token taken).
    /// SQLite runs the one prepared statement per row (no round trip to save). PostgreSQL gets one
    /// multi-row `INSERT` (one round trip per batch instead of one per row): the tokens it answers
    /// are the rows it inserted, and of two rows of the batch with one token (card-shaped draws
    /// can meet) the first is the inserted one.
    private static func insert(_ rows: [[SQLValue]], into db: Database) async throws(StoreError) -> [StoreError?] {
        let taken = StoreError(.tokenExists, "a token with that id exists")
        guard db.dialect.backend == .postgres, rows.count > 1 else {
            return try await db.batch(Self.insertSQL, rows).map { $0.isEmpty ? taken : nil }
        }
        let row = "(" + Array(repeating: "?", count: rows[0].count).joined(separator: ", ") + ")"
        let sql = "INSERT INTO vault_tokens (\(StoredToken.insertColumns)) VALUES "
            + Array(repeating: row, count: rows.count).joined(separator: ", ") + " ON CONFLICT (token) DO NOTHING RETURNING token"
        var inserted = Set<String>()
        for r in try await db.write(sql, rows.flatMap { $0 }) { inserted.insert(try r.string(0)) }
        return rows.map { values in
            guard case .text(let token)? = values.first, inserted.remove(token) != nil else { return taken }
            return nil
        }
    }
}
