import Foundation
import Logging
import PostgresNIO

/// Payments in PostgreSQL, shared by every sidecar of the store. `begin` is one statement
/// (`INSERT … ON CONFLICT (idempotency_key) DO NOTHING`) backed by a partial unique index on
/// single-use tokens, so concurrent duplicates on several hosts still make one payment.
public final class PostgresPaymentStore: PaymentStore, SessionStore {
    private let client: PostgresClient
    private let logger: Logger

    public init(client: PostgresClient, logger: Logger = Logger(label: "vault.payments.postgres")) {
        self.client = client
        self.logger = logger
    }

    /// Creates the table if needed, under the same advisory lock as the token schema.
    public func migrate() async throws(PaymentStoreError) {
        try await run("migration") { client, logger in
            try await client.withTransaction(logger: logger) { c in
                try await c.query("SELECT pg_advisory_xact_lock(727365001)", logger: logger)
                try await c.query("""
                    CREATE TABLE IF NOT EXISTS vault_payments (
                        id TEXT PRIMARY KEY,
                        idempotency_key TEXT NOT NULL UNIQUE,
                        request TEXT NOT NULL,
                        token TEXT NOT NULL,
                        single_use BOOLEAN NOT NULL,
                        amount BIGINT NOT NULL,
                        currency TEXT NOT NULL,
                        status TEXT NOT NULL,
                        code TEXT,
                        reference TEXT,
                        next_action TEXT,
                        created_at BIGINT NOT NULL,
                        updated_at BIGINT NOT NULL
                    )
                    """, logger: logger)
                try await c.query("""
                    CREATE UNIQUE INDEX IF NOT EXISTS vault_payments_single_use_token ON vault_payments (token)
                    WHERE single_use AND status IN ('processing','requires_action','succeeded')
                    """, logger: logger)
                try await c.query(
                    "CREATE INDEX IF NOT EXISTS vault_payments_processing ON vault_payments (updated_at) WHERE status = 'processing'",
                    logger: logger)
                // Idempotency keys scoped per peer and per session, in place and idempotently:
                // existing rows take the global scope (their replays keep working, PaymentService),
                // and the key's uniqueness moves from the key alone to (scope, key).
                try await c.query(
                    "ALTER TABLE vault_payments ADD COLUMN IF NOT EXISTS scope TEXT NOT NULL DEFAULT 'global'", logger: logger)
                try await c.query(
                    "CREATE UNIQUE INDEX IF NOT EXISTS vault_payments_scope_key ON vault_payments (scope, idempotency_key)", logger: logger)
                try await c.query(
                    "ALTER TABLE vault_payments DROP CONSTRAINT IF EXISTS vault_payments_idempotency_key_key", logger: logger)
                try await c.query("""
                    CREATE TABLE IF NOT EXISTS vault_sessions (
                        id TEXT PRIMARY KEY, amount BIGINT NOT NULL, currency TEXT NOT NULL, brands TEXT NOT NULL, customer TEXT,
                        status TEXT NOT NULL, payment_id TEXT, created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL)
                    """, logger: logger)
                try await c.query(
                    "ALTER TABLE vault_sessions ADD COLUMN IF NOT EXISTS attempts INTEGER NOT NULL DEFAULT 0", logger: logger)
            }
        }
    }

    public func begin(_ r: PaymentRecord) async throws(PaymentStoreError) -> PaymentBegin {
        let created = PaymentColumns.millis(r.createdAt), updated = PaymentColumns.millis(r.updatedAt)
        let inserted: Bool
        do throws(PaymentStoreError) {
            inserted = try await insert(r, created: created, updated: updated)
        } catch where error.code == .tokenInUse {
            // Two requests under one key racing from two sidecars: the loser's insert can trip the
            // single-use token index (not the key's) while the winner commits. If the key's
            // payment is there now, this is a replay of it, not another payment for the token.
            if let existing = try await find(scope: r.scope, idempotencyKey: r.idempotencyKey) { return .existing(existing) }
            throw error
        }
        if inserted { return .created }
        guard let existing = try await find(scope: r.scope, idempotencyKey: r.idempotencyKey) else {
            throw PaymentStoreError(.unavailable, "a payment with that idempotency key vanished while being read")
        }
        return .existing(existing)
    }

    private func insert(_ r: PaymentRecord, created: Int64, updated: Int64) async throws(PaymentStoreError) -> Bool {
        try await run("begin") { client, logger in
            let rows = try await client.query("""
                INSERT INTO vault_payments (\(unescaped: PaymentColumns.list))
                VALUES (\(r.id), \(r.idempotencyKey), \(r.request), \(r.token), \(r.singleUse), \(Int64(r.amount)), \(r.currency),
                        \(r.status.rawValue), \(r.code), \(r.reference), \(r.nextAction), \(created), \(updated), \(r.scope))
                ON CONFLICT (scope, idempotency_key) DO NOTHING RETURNING id
                """, logger: logger)
            for try await _ in rows { return true }
            return false
        }
    }

    public func finish(
        _ id: String, status: PaymentRecord.Status, code: String?, reference: String?, nextAction: String?, now: Date
    ) async throws(PaymentStoreError) -> Bool {
        let t = PaymentColumns.millis(now)
        return try await run("finish") { client, logger in
            let rows = try await client.query("""
                UPDATE vault_payments SET status = \(status.rawValue), code = \(code), reference = \(reference),
                    next_action = \(nextAction), updated_at = \(t)
                WHERE id = \(id) AND status IN ('processing', 'requires_action') RETURNING id
                """, logger: logger)
            for try await _ in rows { return true }
            return false
        }
    }

    public func abandon(_ id: String) async throws(PaymentStoreError) {
        try await run("abandon") { client, logger in
            try await client.query("DELETE FROM vault_payments WHERE id = \(id) AND status = 'processing'", logger: logger)
        }
    }

    public func get(_ id: String) async throws(PaymentStoreError) -> PaymentRecord? {
        try await fetch("id", id).first
    }

    public func find(scope: String, idempotencyKey: String) async throws(PaymentStoreError) -> PaymentRecord? {
        try await select(
            "SELECT \(unescaped: PaymentColumns.list) FROM vault_payments WHERE scope = \(scope) AND idempotency_key = \(idempotencyKey)"
        ).first
    }

    public func processing(before: Date) async throws(PaymentStoreError) -> [PaymentRecord] {
        let t = PaymentColumns.millis(before)
        return try await select("""
            SELECT \(unescaped: PaymentColumns.list) FROM vault_payments
            WHERE status = 'processing' AND updated_at < \(t) ORDER BY updated_at LIMIT 100
            """)
    }

    // MARK: Sessions

    public func createSession(_ x: SessionRecord) async throws(PaymentStoreError) {
        let brands = x.acceptedBrands.joined(separator: ","), c = PaymentColumns.millis(x.createdAt), e = PaymentColumns.millis(x.expiresAt)
        try await run("create session") { client, logger in
            try await client.query("""
                INSERT INTO vault_sessions (id, amount, currency, brands, customer, status, payment_id, created_at, expires_at)
                VALUES (\(x.id), \(Int64(x.amount)), \(x.currency), \(brands), \(x.customer), \(x.status.rawValue), \(x.paymentID), \(c), \(e))
                """, logger: logger)
        }
    }

    public func session(_ id: String) async throws(PaymentStoreError) -> SessionRecord? {
        try await run("session") { client, logger in
            let rows = try await client.query(
                "SELECT id, amount, currency, brands, customer, status, payment_id, created_at, expires_at, attempts FROM vault_sessions WHERE id = \(id)",
                logger: logger)
            for try await (id, amount, currency, brands, customer, status, payment, created, expires, attempts)
                in rows.decode((String, Int64, String, String, String?, String, String?, Int64, Int64, Int32).self) {
                return SessionRecord(
                    id: id, amount: Int(amount), currency: currency, acceptedBrands: brands.split(separator: ",").map(String.init),
                    customer: customer, status: SessionRecord.Status(rawValue: status) ?? .completed, paymentID: payment,
                    attempts: Int(attempts), createdAt: PaymentColumns.date(created), expiresAt: PaymentColumns.date(expires))
            }
            return nil
        }
    }

    public func transitionSession(_ id: String, from: SessionRecord.Status, to: SessionRecord.Status, paymentID: String?) async throws(PaymentStoreError) -> Bool {
        try await run("session transition") { client, logger in
            let rows = try await client.query("""
                UPDATE vault_sessions SET status = \(to.rawValue), payment_id = COALESCE(\(paymentID), payment_id)
                WHERE id = \(id) AND status = \(from.rawValue) RETURNING id
                """, logger: logger)
            for try await _ in rows { return true }
            return false
        }
    }

    public func failSessionAttempt(_ id: String, maxAttempts: Int) async throws(PaymentStoreError) -> SessionRecord.Status? {
        let limit = Int32(clamping: maxAttempts)
        return try await run("session attempt") { client, logger in
            let rows = try await client.query("""
                UPDATE vault_sessions SET attempts = attempts + 1,
                    status = CASE WHEN attempts + 1 >= \(limit) THEN 'closed' ELSE 'open' END
                WHERE id = \(id) AND status = 'paying' RETURNING status
                """, logger: logger)
            for try await status in rows.decode(String.self) { return SessionRecord.Status(rawValue: status) }
            return nil
        }
    }

    private func fetch(_ column: String, _ value: String) async throws(PaymentStoreError) -> [PaymentRecord] {
        try await select("SELECT \(unescaped: PaymentColumns.list) FROM vault_payments WHERE id = \(value)")
    }

    private func select(_ query: PostgresQuery) async throws(PaymentStoreError) -> [PaymentRecord] {
        try await run("lookup") { client, logger in
            var out: [PaymentRecord] = []
            let rows = try await client.query(query, logger: logger)
            for try await row in rows {
                let c = row.makeRandomAccess()
                out.append(PaymentRecord(
                    id: try c[0].decode(String.self), scope: try c[13].decode(String.self), idempotencyKey: try c[1].decode(String.self), request: try c[2].decode(String.self),
                    token: try c[3].decode(String.self), singleUse: try c[4].decode(Bool.self), amount: Int(try c[5].decode(Int64.self)),
                    currency: try c[6].decode(String.self),
                    status: PaymentRecord.Status(rawValue: try c[7].decode(String.self)) ?? .failed,
                    code: try c[8].decode(String?.self), reference: try c[9].decode(String?.self), nextAction: try c[10].decode(String?.self),
                    createdAt: PaymentColumns.date(try c[11].decode(Int64.self)), updatedAt: PaymentColumns.date(try c[12].decode(Int64.self))))
            }
            return out
        }
    }

    private func run<T: Sendable>(_ what: String, _ body: (PostgresClient, Logger) async throws -> T) async throws(PaymentStoreError) -> T {
        try await runPostgres(client, logger, what, uniqueViolation: PaymentStoreError(.tokenInUse, "this single-use token already has a payment in progress or succeeded"), body)
    }
}
