import Foundation
import GRDB

/// Payments in the embedded SQLite database (the same file as the tokens; WAL, synchronous=FULL).
/// Each change is one write transaction, so an intent is durable before `begin` returns.
public final class SQLitePaymentStore: PaymentStore, SessionStore {
    private let pool: DatabasePool

    /// A store over `pool` (e.g. `SQLiteTokenStore.database`); creates its table if needed.
    /// - Throws: `STORE_UNAVAILABLE`.
    public init(pool: DatabasePool) throws(PaymentStoreError) {
        self.pool = pool
        var m = DatabaseMigrator()
        m.registerMigration("payments-v1") { db in
            try db.execute(sql: """
                CREATE TABLE payments (
                    id TEXT PRIMARY KEY NOT NULL,
                    idempotency_key TEXT NOT NULL UNIQUE,
                    request TEXT NOT NULL,
                    token TEXT NOT NULL,
                    single_use INTEGER NOT NULL,
                    amount INTEGER NOT NULL,
                    currency TEXT NOT NULL,
                    status TEXT NOT NULL,
                    code TEXT,
                    reference TEXT,
                    next_action TEXT,
                    created_at INTEGER NOT NULL,
                    updated_at INTEGER NOT NULL
                );
                CREATE UNIQUE INDEX payments_single_use_token ON payments(token)
                    WHERE single_use = 1 AND status IN \(PaymentColumns.holdingStatuses);
                CREATE INDEX payments_processing ON payments(updated_at) WHERE status = 'processing';
                """)
        }
        m.registerMigration("sessions-v1") { db in
            try db.execute(sql: """
                CREATE TABLE sessions (
                    id TEXT PRIMARY KEY NOT NULL,
                    amount INTEGER NOT NULL,
                    currency TEXT NOT NULL,
                    brands TEXT NOT NULL,
                    customer TEXT,
                    status TEXT NOT NULL,
                    payment_id TEXT,
                    created_at INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL
                )
                """)
        }
        // Idempotency keys scoped per peer and per session (never edit the migrations above:
        // stores made by earlier versions upgrade in place). SQLite cannot drop the column's
        // UNIQUE constraint, so the table is rebuilt; every existing row goes to the global
        // scope, which keeps replays of payments made before the upgrade working (PaymentService).
        m.registerMigration("payments-v2-scope") { db in
            try db.execute(sql: """
                CREATE TABLE payments_v2 (
                    id TEXT PRIMARY KEY NOT NULL,
                    scope TEXT NOT NULL DEFAULT '\(PaymentScope.global)',
                    idempotency_key TEXT NOT NULL,
                    request TEXT NOT NULL,
                    token TEXT NOT NULL,
                    single_use INTEGER NOT NULL,
                    amount INTEGER NOT NULL,
                    currency TEXT NOT NULL,
                    status TEXT NOT NULL,
                    code TEXT,
                    reference TEXT,
                    next_action TEXT,
                    created_at INTEGER NOT NULL,
                    updated_at INTEGER NOT NULL,
                    UNIQUE (scope, idempotency_key)
                );
                INSERT INTO payments_v2 (id, scope, idempotency_key, request, token, single_use, amount, currency, status, code,
                                         reference, next_action, created_at, updated_at)
                    SELECT id, '\(PaymentScope.global)', idempotency_key, request, token, single_use, amount, currency, status, code,
                           reference, next_action, created_at, updated_at FROM payments;
                DROP TABLE payments;
                ALTER TABLE payments_v2 RENAME TO payments;
                CREATE UNIQUE INDEX payments_single_use_token ON payments(token)
                    WHERE single_use = 1 AND status IN \(PaymentColumns.holdingStatuses);
                CREATE INDEX payments_processing ON payments(updated_at) WHERE status = 'processing';
                """)
        }
        // Failed attempts per checkout session (the attempt cap).
        m.registerMigration("sessions-v2-attempts") { db in
            try db.execute(sql: "ALTER TABLE sessions ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0")
        }
        do { try m.migrate(pool) } catch {
            throw PaymentStoreError(.unavailable, "cannot create the payments table: \(Self.describe(error))")
        }
    }

    public func begin(_ r: PaymentRecord) async throws(PaymentStoreError) -> PaymentBegin {
        try await write { db in
            if let row = try Row.fetchOne(
                db, sql: "SELECT \(PaymentColumns.list) FROM payments WHERE scope = ? AND idempotency_key = ?", arguments: [r.scope, r.idempotencyKey]) {
                return .existing(Self.record(row))
            }
            if r.singleUse, try Bool.fetchOne(
                db, sql: "SELECT 1 FROM payments WHERE token = ? AND single_use = 1 AND status IN \(PaymentColumns.holdingStatuses)",
                arguments: [r.token]) == true {
                throw PaymentStoreError(.tokenInUse, "this single-use token already has a payment in progress or succeeded")
            }
            try db.execute(
                sql: "INSERT INTO payments (\(PaymentColumns.list)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                arguments: [r.id, r.idempotencyKey, r.request, r.token, r.singleUse, r.amount, r.currency, r.status.rawValue,
                            r.code, r.reference, r.nextAction, PaymentColumns.millis(r.createdAt), PaymentColumns.millis(r.updatedAt), r.scope])
            return .created
        }
    }

    public func finish(
        _ id: String, status: PaymentRecord.Status, code: String?, reference: String?, nextAction: String?, now: Date
    ) async throws(PaymentStoreError) -> Bool {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE payments SET status = ?, code = ?, reference = ?, next_action = ?, updated_at = ?
                    WHERE id = ? AND status IN ('processing', 'requires_action')
                    """,
                arguments: [status.rawValue, code, reference, nextAction, PaymentColumns.millis(now), id])
            return db.changesCount > 0
        }
    }

    public func abandon(_ id: String) async throws(PaymentStoreError) {
        try await write { db in try db.execute(sql: "DELETE FROM payments WHERE id = ? AND status = 'processing'", arguments: [id]) }
    }

    public func get(_ id: String) async throws(PaymentStoreError) -> PaymentRecord? {
        do {
            return try await pool.read { db in
                try Row.fetchOne(db, sql: "SELECT \(PaymentColumns.list) FROM payments WHERE id = ?", arguments: [id]).map(Self.record)
            }
        } catch {
            throw PaymentStoreError(.unavailable, "payment lookup failed: \(Self.describe(error))")
        }
    }

    public func find(scope: String, idempotencyKey: String) async throws(PaymentStoreError) -> PaymentRecord? {
        do {
            return try await pool.read { db in
                try Row.fetchOne(
                    db, sql: "SELECT \(PaymentColumns.list) FROM payments WHERE scope = ? AND idempotency_key = ?", arguments: [scope, idempotencyKey]
                ).map(Self.record)
            }
        } catch {
            throw PaymentStoreError(.unavailable, "payment lookup failed: \(Self.describe(error))")
        }
    }

    public func processing(before: Date) async throws(PaymentStoreError) -> [PaymentRecord] {
        do {
            return try await pool.read { db in
                try Row.fetchAll(
                    db, sql: "SELECT \(PaymentColumns.list) FROM payments WHERE status = 'processing' AND updated_at < ? ORDER BY updated_at LIMIT 100",
                    arguments: [PaymentColumns.millis(before)]
                ).map(Self.record)
            }
        } catch {
            throw PaymentStoreError(.unavailable, "payment lookup failed: \(Self.describe(error))")
        }
    }

    // MARK: Sessions

    public func createSession(_ x: SessionRecord) async throws(PaymentStoreError) {
        try await write { db in
            try db.execute(
                sql: "INSERT INTO sessions (id, amount, currency, brands, customer, status, payment_id, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                arguments: [x.id, x.amount, x.currency, x.acceptedBrands.joined(separator: ","), x.customer, x.status.rawValue, x.paymentID,
                            PaymentColumns.millis(x.createdAt), PaymentColumns.millis(x.expiresAt)])
        }
    }

    public func session(_ id: String) async throws(PaymentStoreError) -> SessionRecord? {
        do {
            return try await pool.read { db in
                try Row.fetchOne(db, sql: "SELECT * FROM sessions WHERE id = ?", arguments: [id]).map { r in
                    SessionRecord(
                        id: r["id"], amount: r["amount"], currency: r["currency"],
                        acceptedBrands: (r["brands"] as String).split(separator: ",").map(String.init), customer: r["customer"],
                        status: SessionRecord.Status(rawValue: r["status"]) ?? .completed, paymentID: r["payment_id"], attempts: r["attempts"],
                        createdAt: PaymentColumns.date(r["created_at"]), expiresAt: PaymentColumns.date(r["expires_at"]))
                }
            }
        } catch {
            throw PaymentStoreError(.unavailable, "session lookup failed: \(Self.describe(error))")
        }
    }

    public func transitionSession(_ id: String, from: SessionRecord.Status, to: SessionRecord.Status, paymentID: String?) async throws(PaymentStoreError) -> Bool {
        try await write { db in
            try db.execute(
                sql: "UPDATE sessions SET status = ?, payment_id = COALESCE(?, payment_id) WHERE id = ? AND status = ?",
                arguments: [to.rawValue, paymentID, id, from.rawValue])
            return db.changesCount > 0
        }
    }

    public func failSessionAttempt(_ id: String, maxAttempts: Int) async throws(PaymentStoreError) -> SessionRecord.Status? {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE sessions SET attempts = attempts + 1,
                        status = CASE WHEN attempts + 1 >= ? THEN 'closed' ELSE 'open' END
                    WHERE id = ? AND status = 'paying'
                    """,
                arguments: [maxAttempts, id])
            guard db.changesCount > 0 else { return nil }
            return try String.fetchOne(db, sql: "SELECT status FROM sessions WHERE id = ?", arguments: [id]).flatMap { SessionRecord.Status(rawValue: $0) }
        }
    }

    static func record(_ row: Row) -> PaymentRecord {
        PaymentRecord(
            id: row["id"], scope: row["scope"], idempotencyKey: row["idempotency_key"], request: row["request"], token: row["token"],
            singleUse: row["single_use"], amount: row["amount"], currency: row["currency"],
            status: PaymentRecord.Status(rawValue: row["status"]) ?? .failed, code: row["code"], reference: row["reference"],
            nextAction: row["next_action"], createdAt: PaymentColumns.date(row["created_at"]), updatedAt: PaymentColumns.date(row["updated_at"]))
    }

    private func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws(PaymentStoreError) -> T {
        do {
            return try await pool.write(body)
        } catch let error as PaymentStoreError {
            throw error
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            throw PaymentStoreError(.tokenInUse, "this single-use token already has a payment in progress or succeeded")
        } catch {
            throw PaymentStoreError(.unavailable, "payment write failed: \(Self.describe(error))")
        }
    }

    static func describe(_ error: any Error) -> String {
        if let e = error as? DatabaseError { return "SQLite error \(e.resultCode.rawValue) (\(e.resultCode))" }
        return String(describing: type(of: error))
    }
}
