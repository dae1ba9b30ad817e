import Foundation
import Logging
import PostgresNIO
import VaultCrypto

/// The shared token store: PostgreSQL, so several sidecars on several hosts see the same tokens.
///
/// The caller owns the `PostgresClient` and runs it (`client.run()`, e.g. as a service in the
/// sidecar's `ServiceGroup`); the store migrates the schema on `migrate()` under an advisory lock,
/// so sidecars starting together do not race. Commits are durable (`synchronous_commit` on).
public final class PostgresTokenStore: TokenStore {
    private let client: PostgresClient
    private let logger: Logger

    /// A store over a running client.
    public init(client: PostgresClient, logger: Logger = Logger(label: "vault.store.postgres")) {
        self.client = client
        self.logger = logger
    }

    /// Creates or migrates the schema (idempotent; safe with several sidecars starting at once).
    /// - Throws: `STORE_UNAVAILABLE`.
    public func migrate() async throws(TokenStoreError) {
        try await run("migration") { client, logger in
            try await client.withTransaction(logger: logger) { c in
                try await c.query("SELECT pg_advisory_xact_lock(727365001)", logger: logger)
                try await c.query("""
                    CREATE TABLE IF NOT EXISTS vault_tokens (
                        token TEXT PRIMARY KEY,
                        envelope TEXT NOT NULL,
                        cvc TEXT,
                        brand TEXT NOT NULL,
                        bin TEXT NOT NULL,
                        last4 TEXT NOT NULL,
                        fingerprint TEXT,
                        created_at BIGINT NOT NULL,
                        expires_at BIGINT NOT NULL,
                        cvc_expires_at BIGINT,
                        single_use BOOLEAN NOT NULL
                    )
                    """, logger: logger)
                try await c.query("CREATE INDEX IF NOT EXISTS vault_tokens_expires_at ON vault_tokens (expires_at)", logger: logger)
                try await c.query("CREATE INDEX IF NOT EXISTS vault_tokens_cvc_expires_at ON vault_tokens (cvc_expires_at) WHERE cvc IS NOT NULL", logger: logger)
                try await c.query("CREATE INDEX IF NOT EXISTS vault_tokens_fingerprint ON vault_tokens (fingerprint)", logger: logger)
                // CVCs left the store (DESIGN §1): empty what an earlier version wrote. Dead row
                // versions of those rows are rewritten by `VACUUM FULL vault_tokens` (docs/threat-model.md).
                try await c.query(
                    "UPDATE vault_tokens SET cvc = NULL, cvc_expires_at = NULL WHERE cvc IS NOT NULL",
                    logger: logger)
            }
        }
    }

    public func insert(_ record: TokenRecord) async throws(TokenStoreError) {
        let r = StoredToken(record)
        try await run("insert") { client, logger in
            try await client.query("""
                INSERT INTO vault_tokens (token, envelope, brand, bin, last4, fingerprint, created_at, expires_at, single_use)
                VALUES (\(r.token), \(r.envelope), \(r.brand), \(r.bin), \(r.last4), \(r.fingerprint), \(r.createdAt), \(r.expiresAt), \(r.singleUse))
                """, logger: logger)
        }
    }

    public func get(_ token: String, now: Date) async throws(TokenStoreError) -> TokenRecord? {
        let t = StoredToken.millis(now)
        let row: StoredToken? = try await run("lookup") { client, logger in
            let rows = try await client.query("""
                SELECT token, envelope, fingerprint, created_at, expires_at, single_use
                FROM vault_tokens WHERE token = \(token) AND expires_at > \(t)
                """, logger: logger)
            for try await (token, envelope, fingerprint, created, expires, singleUse)
                in rows.decode((String, String, String?, Int64, Int64, Bool).self) {
                return StoredToken(
                    token: token, envelope: envelope, fingerprint: fingerprint, createdAt: created, expiresAt: expires, singleUse: singleUse)
            }
            return nil
        }
        return try row?.record()
    }

    public func setFingerprints(_ fingerprints: [(token: String, fingerprint: String)]) async throws(TokenStoreError) -> Int {
        guard !fingerprints.isEmpty else { return 0 }
        let tokens = fingerprints.map(\.token), prints = fingerprints.map(\.fingerprint)
        return try await changed("set fingerprints", """
            UPDATE vault_tokens AS t SET fingerprint = f.fingerprint
            FROM unnest(\(tokens)::TEXT[], \(prints)::TEXT[]) AS f(token, fingerprint)
            WHERE t.token = f.token AND t.fingerprint IS NULL RETURNING t.token
            """)
    }

    public func withoutFingerprint(after: String, limit: Int, now: Date) async throws(TokenStoreError) -> [TokenRecord] {
        let t = StoredToken.millis(now)
        let rows: [StoredToken] = try await run("lookup") { client, logger in
            let rows = try await client.query("""
                SELECT token, envelope, fingerprint, created_at, expires_at, single_use FROM vault_tokens
                WHERE fingerprint IS NULL AND token > \(after) AND expires_at > \(t) ORDER BY token LIMIT \(limit)
                """, logger: logger)
            var out: [StoredToken] = []
            for try await (token, envelope, fingerprint, created, expires, singleUse)
                in rows.decode((String, String, String?, Int64, Int64, Bool).self) {
                out.append(StoredToken(
                    token: token, envelope: envelope, fingerprint: fingerprint, createdAt: created, expiresAt: expires, singleUse: singleUse))
            }
            return out
        }
        var out: [TokenRecord] = []
        for row in rows { out.append(try row.record()) }
        return out
    }

    public func delete(_ token: String) async throws(TokenStoreError) -> Bool {
        try await changed("delete", "DELETE FROM vault_tokens WHERE token = \(token) RETURNING token") > 0
    }

    public func purgeExpired(now: Date) async throws(TokenStoreError) -> PurgeResult {
        let t = StoredToken.millis(now)
        let deleted = try await changed("purge", "DELETE FROM vault_tokens WHERE expires_at <= \(t) RETURNING token")
        return PurgeResult(tokensDeleted: deleted, cvcsDropped: 0)
    }

    public func count() async throws(TokenStoreError) -> Int {
        try await run("count") { client, logger in
            let rows = try await client.query("SELECT COUNT(*)::BIGINT FROM vault_tokens", logger: logger)
            for try await (n) in rows.decode(Int64.self) { return Int(n) }
            return 0
        }
    }

    /// Runs a statement with `RETURNING` and counts the rows it touched.
    private func changed(_ what: String, _ query: PostgresQuery) async throws(TokenStoreError) -> Int {
        try await run(what) { client, logger in
            var n = 0
            for try await _ in try await client.query(query, logger: logger) { n += 1 }
            return n
        }
    }

    /// Runs `body`; a unique violation is `TOKEN_EXISTS`, anything else `STORE_UNAVAILABLE` with
    /// the SQLSTATE only (statements and values stay out of messages).
    private func run<T: Sendable>(_ what: String, _ body: (PostgresClient, Logger) async throws -> T) async throws(TokenStoreError) -> T {
        do {
            do {
                return try await body(client, logger)
            } catch let wrapped as PostgresTransactionError {
                throw wrapped.closureError ?? wrapped.beginError ?? wrapped.commitError ?? wrapped
            }
        } catch let error as PSQLError {
            let state = error.serverInfo?[.sqlState]
            if state == "23505" { throw TokenStoreError(.tokenExists, "a token with that id exists") }
            throw TokenStoreError(.unavailable, "PostgreSQL \(what) failed (\(state.map { "SQLSTATE \($0)" } ?? "\(error.code)"))")
        } catch {
            throw TokenStoreError(.unavailable, "PostgreSQL \(what) failed (\(type(of: error)))")
        }
    }
}
