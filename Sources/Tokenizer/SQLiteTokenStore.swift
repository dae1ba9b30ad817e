import Foundation
import GRDB
import VaultCrypto

/// The embedded token store: one SQLite file in WAL mode with `synchronous = FULL`, so a token is
/// acknowledged only after its commit is on disk.
///
/// Schema (migration `v1`): one row per token with the envelope JSON (without its CVC field),
/// metadata columns for lookups, the gateway's fingerprint, and millisecond timestamps. The `cvc`
/// columns stay for stores made before CVCs left the store (`v2-cvc-out` empties them); nothing
/// writes them. `secure_delete` zeroes what a delete or update frees, so a deleted token's
/// ciphertext does not linger in free pages.
public final class SQLiteTokenStore: TokenStore {
    private let pool: DatabasePool
    private let batcher: GroupCommit

    /// The database, for other tables kept in the same file (payments).
    public var database: DatabasePool { pool }

    /// Opens (creating and migrating if needed) the store at `path`.
    /// - Throws: `STORE_UNAVAILABLE`.
    public init(path: String) throws(TokenStoreError) {
        var config = Configuration()
        // Another process may write the same file (`vault rewrap` during key rotation): wait for
        // its short transactions instead of failing with SQLITE_BUSY.
        config.busyMode = .timeout(10)
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            try db.execute(sql: "PRAGMA secure_delete = ON")
        }
        do {
            pool = try DatabasePool(path: path, configuration: config)
            // GRDB's WAL set-up lowers the writer to synchronous=NORMAL after prepareDatabase:
            // put FULL back on the writer connection, so a commit is on disk when it returns.
            try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
            try Self.migrator.migrate(pool)
            try Self.scrubLegacyCVCs(pool)
        } catch {
            throw TokenStoreError(.unavailable, "cannot open the SQLite store at \(path): \(Self.describe(error))")
        }
        batcher = GroupCommit(pool: pool)
    }

    static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE tokens (
                    token TEXT PRIMARY KEY NOT NULL,
                    envelope TEXT NOT NULL,
                    cvc TEXT,
                    brand TEXT NOT NULL,
                    bin TEXT NOT NULL,
                    last4 TEXT NOT NULL,
                    fingerprint TEXT,
                    created_at INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL,
                    cvc_expires_at INTEGER,
                    single_use INTEGER NOT NULL
                );
                CREATE INDEX tokens_expires_at ON tokens(expires_at);
                CREATE INDEX tokens_cvc_expires_at ON tokens(cvc_expires_at) WHERE cvc IS NOT NULL;
                CREATE INDEX tokens_fingerprint ON tokens(fingerprint);
                """)
        }
        // CVCs leave the store (DESIGN §1): a store made by an earlier version may still hold some.
        m.registerMigration("v2-cvc-out") { db in
            try db.execute(sql: "UPDATE tokens SET cvc = NULL, cvc_expires_at = NULL WHERE cvc IS NOT NULL")
        }
        // The file still needs scrubbing (WAL, free pages): a marker until that is done.
        m.registerMigration("v3-cvc-scrub") { db in
            try db.execute(sql: "CREATE TABLE cvc_scrub (pending INTEGER NOT NULL); INSERT INTO cvc_scrub VALUES (1)")
        }
        return m
    }

    /// After `v2-cvc-out`: the WAL may still hold page images with CVCs an earlier version wrote,
    /// and the file's free pages old row versions. Truncate the WAL, then rebuild the file
    /// (VACUUM), which leaves no free page behind, and only then clear the marker: a start that
    /// crashed or failed midway (a full disk) scrubs again at the next one.
    static func scrubLegacyCVCs(_ pool: DatabasePool) throws {
        try pool.writeWithoutTransaction { db in
            guard try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM cvc_scrub") ?? 0 > 0 else { return }
            try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            try db.execute(sql: "VACUUM")
            try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            try db.execute(sql: "DELETE FROM cvc_scrub")
        }
    }

    /// Stores a token. Concurrent inserts share one transaction (group commit): each caller
    /// returns only after the commit that holds its row is on disk, and one fsync serves them all.
    public func insert(_ record: TokenRecord) async throws(TokenStoreError) {
        if let failure = await batcher.submit(StoredToken(record)) { throw failure }
    }

    public func get(_ token: String, now: Date) async throws(TokenStoreError) -> TokenRecord? {
        let row: StoredToken?
        do {
            row = try await pool.read { db in
                try Row.fetchOne(
                    db, sql: "SELECT token, envelope, fingerprint, created_at, expires_at, single_use FROM tokens WHERE token = ? AND expires_at > ?",
                    arguments: [token, StoredToken.millis(now)]
                ).map(StoredToken.init(row:))
            }
        } catch {
            throw TokenStoreError(.unavailable, "token lookup failed: \(Self.describe(error))")
        }
        return try row?.record()
    }

    public func setFingerprints(_ fingerprints: [(token: String, fingerprint: String)]) async throws(TokenStoreError) -> Int {
        let pairs = fingerprints.map { [$0.token, $0.fingerprint] }
        return try await write { db in
            let update = try db.cachedStatement(sql: "UPDATE tokens SET fingerprint = ? WHERE token = ? AND fingerprint IS NULL")
            var n = 0
            for p in pairs {
                try update.execute(arguments: [p[1], p[0]])
                n += db.changesCount
            }
            return n
        }
    }

    public func withoutFingerprint(after: String, limit: Int, now: Date) async throws(TokenStoreError) -> [TokenRecord] {
        let rows: [StoredToken]
        do {
            rows = try await pool.read { db in
                try Row.fetchAll(
                    db, sql: """
                        SELECT token, envelope, fingerprint, created_at, expires_at, single_use FROM tokens
                        WHERE fingerprint IS NULL AND token > ? AND expires_at > ? ORDER BY token LIMIT ?
                        """, arguments: [after, StoredToken.millis(now), limit]
                ).map(StoredToken.init(row:))
            }
        } catch {
            throw TokenStoreError(.unavailable, "token lookup failed: \(Self.describe(error))")
        }
        var out: [TokenRecord] = []
        for row in rows { out.append(try row.record()) }
        return out
    }

    public func delete(_ token: String) async throws(TokenStoreError) -> Bool {
        try await write { db in
            try db.execute(sql: "DELETE FROM tokens WHERE token = ?", arguments: [token])
            return db.changesCount > 0
        }
    }

    public func purgeExpired(now: Date) async throws(TokenStoreError) -> PurgeResult {
        let t = StoredToken.millis(now)
        return try await write { db in
            try db.execute(sql: "DELETE FROM tokens WHERE expires_at <= ?", arguments: [t])
            return PurgeResult(tokensDeleted: db.changesCount, cvcsDropped: 0)
        }
    }

    public func count() async throws(TokenStoreError) -> Int {
        do {
            return try await pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM tokens") ?? 0 }
        } catch {
            throw TokenStoreError(.unavailable, "count failed: \(Self.describe(error))")
        }
    }

    /// Runs a write transaction; maps constraint violations to `TOKEN_EXISTS`.
    private func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws(TokenStoreError) -> T {
        do {
            return try await pool.write(body)
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            throw TokenStoreError(.tokenExists, "a token with that id exists")
        } catch {
            throw TokenStoreError(.unavailable, "write failed: \(Self.describe(error))")
        }
    }

    /// The SQLite result code only: statement text and arguments stay out of messages.
    static func describe(_ error: any Error) -> String {
        if let e = error as? DatabaseError { return "SQLite error \(e.resultCode.rawValue) (\(e.resultCode))" }
        return String(describing: type(of: error))
    }
}

/// Group commit for inserts: rows that arrive while a commit is running wait and go in the next
/// transaction together. A row whose token exists gets `TOKEN_EXISTS` alone (the others commit);
/// a failed commit fails every row of its batch, and none of them was acknowledged.
///
/// The batches run on one serial queue that writes synchronously and resumes the waiters from
/// there: no task per batch and no extra hop through GRDB's async API.
final class GroupCommit: @unchecked Sendable {
    typealias Waiter = CheckedContinuation<TokenStoreError?, Never>
    /// Largest batch in one transaction (bounds the latency a commit adds to its first row).
    static let maxBatch = 256
    static let insertSQL = """
        INSERT INTO tokens (token, envelope, brand, bin, last4, fingerprint, created_at, expires_at, single_use)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(token) DO NOTHING
        """

    private let pool: DatabasePool
    private let queue = DispatchQueue(label: "vault.sqlite.group-commit")
    private let lock = NSLock()
    private var rows: [StoredToken] = []
    private var waiters: [Waiter] = []
    private var draining = false

    init(pool: DatabasePool) { self.pool = pool }

    /// Queues a row; returns after its transaction committed (nil) or failed (the error).
    func submit(_ row: StoredToken) async -> TokenStoreError? {
        await withCheckedContinuation { (waiter: Waiter) in
            lock.lock()
            rows.append(row)
            waiters.append(waiter)
            let start = !draining
            draining = true
            lock.unlock()
            if start { queue.async { self.drain() } }
        }
    }

    private func nextBatch() -> ([StoredToken], [Waiter])? {
        lock.lock()
        defer { lock.unlock() }
        guard !rows.isEmpty else {
            draining = false
            return nil
        }
        let n = min(rows.count, Self.maxBatch)
        let batch = (Array(rows.prefix(n)), Array(waiters.prefix(n)))
        rows.removeFirst(n)
        waiters.removeFirst(n)
        return batch
    }

    private func drain() {
        while let (batch, batchWaiters) = nextBatch() {
            let outcomes: [TokenStoreError?]
            do {
                outcomes = try pool.write { db in
                    let insert = try db.cachedStatement(sql: Self.insertSQL)
                    return try batch.map { row -> TokenStoreError? in
                        try insert.execute(arguments: [
                            row.token, row.envelope, row.brand, row.bin, row.last4, row.fingerprint,
                            row.createdAt, row.expiresAt, row.singleUse,
                        ])
                        return db.changesCount == 1 ? nil : TokenStoreError(.tokenExists, "a token with that id exists")
                    }
                }
            } catch {
                let failure = TokenStoreError(.unavailable, "write failed: \(SQLiteTokenStore.describe(error))")
                outcomes = Array(repeating: failure, count: batch.count)
            }
            for (waiter, outcome) in zip(batchWaiters, outcomes) { waiter.resume(returning: outcome) }
        }
    }
}
