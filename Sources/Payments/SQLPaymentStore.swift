import Foundation
import Store
import VaultCrypto

/// Payments and checkout sessions over the vault's `Database`, on either backend: the embedded
/// SQLite file or the PostgreSQL database every sidecar of the store shares. Each change is one
/// durable statement, so an intent is on disk before `begin` returns and the gateway is called.
///
/// `begin` is one statement (`INSERT … ON CONFLICT (scope, idempotency_key) DO NOTHING
/// RETURNING`) backed by a partial unique index on single-use tokens, so concurrent duplicates
/// from several sidecars still make one payment.
public final class SQLPaymentStore: PaymentStore, SessionStore {
    let db: Database

    /// A store over a migrated database (`Database.migrate()`).
    public init(database: Database) { db = database }

    static let columns = """
        id, scope, idempotency_key, request, token, single_use, amount, currency, status, code, reference, next_action, reason,
        created_at, updated_at, capture_method, amount_captured, amount_refunded, authorization_expires_at, metadata
        """

    public func begin(_ r: PaymentRecord) async throws(StoreError) -> PaymentBegin {
        let values: [any SQLBindable] = [
            r.id, r.scope, r.idempotencyKey, r.request, r.token, r.singleUse, r.amount, r.currency, r.status.rawValue, r.code,
            r.reference, r.nextAction, r.reason, r.createdAt, r.updatedAt, (r.manualCapture ? "manual" : nil) as String?, r.amountCaptured,
            r.amountRefunded, r.authorizationExpiresAt, r.metadata.column,
        ]
        let sql = """
            INSERT INTO vault_payments (\(Self.columns), customer)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, COALESCE(?, (SELECT customer FROM vault_mandates WHERE id = ?)))
            ON CONFLICT (scope, idempotency_key) DO NOTHING RETURNING id
            """
        let arguments = values + Self.customerSource(of: r.request)
        let inserted: Bool
        do throws(StoreError) {
            // Its metadata's search rows are written by the store's trigger in the same statement's transaction.
            inserted = try await !db.write(sql, arguments).isEmpty
        } catch where error.code == .duplicate {
            // Two requests under one key racing from two sidecars: the loser's insert can trip the
            // single-use token index (not the key's) while the winner commits. If the key's
            // payment is there now, this is a replay of it, not another payment for the token.
            if let existing = try await find(scope: r.scope, idempotencyKey: r.idempotencyKey) { return .existing(existing) }
            throw StoreError(.tokenInUse, "this single-use token already has a payment in progress or succeeded")
        }
        if inserted { return .created }
        guard let existing = try await find(scope: r.scope, idempotencyKey: r.idempotencyKey) else {
            throw StoreError(.unavailable, "a payment with that idempotency key vanished while being read")
        }
        return .existing(existing)
    }

    /// Deletes the token (the first value) when the payment (the second) stands succeeded or authorized.
    static let consumeSQL =
        "DELETE FROM vault_tokens WHERE token = ? AND EXISTS (SELECT 1 FROM vault_payments WHERE id = ? AND status IN ('succeeded', 'requires_capture'))"

    /// `finish` consuming a token on PostgreSQL, in one statement: the update's values, then the
    /// token and the payment id.
    static let finishConsumingSQL = """
        WITH changed AS (
            UPDATE vault_payments SET status = ?, code = ?, reference = ?, next_action = ?, reason = NULL, updated_at = ?
            WHERE id = ? AND status IN ('processing', 'requires_action', 'unknown') RETURNING id, status),
        consumed AS (
            DELETE FROM vault_tokens WHERE token = ? AND (
                EXISTS (SELECT 1 FROM changed WHERE status IN ('succeeded', 'requires_capture'))
                OR EXISTS (SELECT 1 FROM vault_payments WHERE id = ? AND status IN ('succeeded', 'requires_capture')))
            RETURNING token)
        SELECT id FROM changed
        """

    public func finish(
        _ id: String, status: PaymentRecord.Status, code: String?, reference: String?, nextAction: String?, now: Date, consuming token: String?
    ) async throws(StoreError) -> Bool {
        let update = """
            UPDATE vault_payments SET status = ?, code = ?, reference = ?, next_action = ?, reason = NULL, updated_at = ?
            WHERE id = ? AND status IN ('processing', 'requires_action', 'unknown') RETURNING id
            """
        let values: [any SQLBindable] = [status.rawValue, code, reference, nextAction, now, id]
        guard let token else { return try await !db.write(update, values).isEmpty }
        if db.dialect.backend == .postgres {
            // One statement (one round trip, no BEGIN and COMMIT of their own) instead of the
            // transaction below: its sub-statements see the rows as they were before it, so the
            // token goes when the update made the payment succeeded or authorized, or when it
            // already stood so. The DELETE reads the UPDATE's rows, which runs it first, and the
            // triggers' events (the payment's, then the token's) come at the statement's end in
            // that order.
            if try await !db.write(Self.finishConsumingSQL, values + [token, id]).isEmpty { return true }
            // Not changed here: the payment was final already, or another transaction made it so
            // after this statement's snapshot (`vault payments settle`), which the snapshot's read
            // would not see. A statement of its own, with a fresh snapshot, consumes the token if
            // the payment stands succeeded or authorized now.
            try await db.write(Self.consumeSQL, [token, id])
            return false
        }
        return try await db.transaction { (tx) throws(StoreError) -> Bool in
            let changed = try await !tx.query(update, values).isEmpty
            // Consumed when the payment stands succeeded (or authorized), whether this answer or
            // an earlier one settled it; not when it was settled otherwise.
            try await tx.query(Self.consumeSQL, [token, id])
            return changed
        }
    }

    public func markUnknown(_ id: String, reason: String, now: Date) async throws(StoreError) -> Bool {
        try await !db.write(
            "UPDATE vault_payments SET status = 'unknown', reason = ?, updated_at = ? WHERE id = ? AND status = 'processing' RETURNING id",
            [String(reason.prefix(200)), now, id]).isEmpty
    }

    public func settleByHand(
        _ id: String, status: PaymentRecord.Status?, code: String?, reference: String?, now: Date
    ) async throws(StoreError) -> Bool {
        guard let status else {
            return try await !db.write("DELETE FROM vault_payments WHERE id = ? AND status IN ('processing', 'unknown') RETURNING id", [id]).isEmpty
        }
        return try await !db.write("""
            UPDATE vault_payments SET status = ?, code = ?, reference = ?, next_action = NULL, reason = NULL, updated_at = ?
            WHERE id = ? AND status IN ('processing', 'unknown') RETURNING id
            """, [status.rawValue, code, reference, now, id]).isEmpty
    }

    public func abandon(_ id: String) async throws(StoreError) {
        try await db.write("DELETE FROM vault_payments WHERE id = ? AND status = 'processing'", [id])
    }

    public func get(_ id: String) async throws(StoreError) -> PaymentRecord? {
        try await db.query(Self.getSQL, [id]).first.map(Self.payment)
    }

    /// A payment by id (`get`).
    static let getSQL = "SELECT \(columns) FROM vault_payments WHERE id = ?"

    public func find(scope: String, idempotencyKey: String) async throws(StoreError) -> PaymentRecord? {
        try await select("WHERE scope = ? AND idempotency_key = ?", [scope, idempotencyKey]).first
    }

    public func find(scopes: [String], idempotencyKey: String) async throws(StoreError) -> [String: PaymentRecord] {
        guard !scopes.isEmpty else { return [:] }
        var arguments: [any SQLBindable] = []
        for scope in scopes { arguments += [scope, idempotencyKey] }
        var out: [String: PaymentRecord] = [:]
        for r in try await db.query(Self.findSQL(scopes: scopes.count), arguments) {
            let p = try Self.payment(r)
            out[p.scope] = p
        }
        return out
    }

    /// The replay check's statement for `scopes` scopes: one lookup of the unique key (scope,
    /// idempotency key) per scope, joined by `UNION ALL`. Not `scope IN (…)`: a statement that
    /// PostgreSQL runs prepared gets a generic plan made on its first runs, and on a new, still
    /// empty table that plan was a sequential scan for the `IN` form (its index probe estimated
    /// dearer than ten empty pages), kept while the table grew (issue 16: 547 µs a payment after
    /// 5,000). A lookup of every column of a unique index is planned as an index scan at any size.
    static func findSQL(scopes: Int) -> String {
        Array(repeating: "SELECT \(columns) FROM vault_payments WHERE scope = ? AND idempotency_key = ?", count: scopes)
            .joined(separator: " UNION ALL ")
    }

    public func unsettled(before: Date, limit: Int) async throws(StoreError) -> [PaymentRecord] {
        try await select("WHERE status IN ('processing', 'unknown') AND updated_at < ? ORDER BY updated_at, id LIMIT ?", [before, limit])
    }

    /// `all`: one `GROUP BY` over the payments (a scan of the table: `PaymentBacklog` runs it
    /// every 5 minutes by default, off the request path); else `processing` and `unknown` only,
    /// through the partial index `vault_payments_unsettled`. The oldest `processing` one through
    /// the partial index `vault_payments_processing` (a processing payment's `updated_at` is its
    /// creation time: nothing updates it before its outcome).
    public func stateCounts(all: Bool) async throws(StoreError) -> PaymentStateCounts {
        var byStatus: [PaymentRecord.Status: Int] = [:]
        let sql = all
            ? "SELECT status, COUNT(*) FROM vault_payments GROUP BY status"
            : "SELECT status, COUNT(*) FROM vault_payments WHERE status IN ('processing','unknown') GROUP BY status"
        for row in try await db.scan(sql) {
            // A state this version does not know is not counted (an older sidecar beside a newer one).
            if let status = PaymentRecord.Status(rawValue: try row.string(0)) { byStatus[status] = try row.int(1) }
        }
        let oldest = try await db.query("SELECT MIN(updated_at) FROM vault_payments WHERE status = 'processing'").first?.optionalDate(0)
        return PaymentStateCounts(
            byStatus: byStatus, counted: all ? PaymentRecord.Status.allCases : PaymentStateCounts.backlog, oldestProcessing: oldest)
    }

    func select(_ condition: String, _ arguments: [any SQLBindable]) async throws(StoreError) -> [PaymentRecord] {
        try await db.query("SELECT \(Self.columns) FROM vault_payments \(condition)", arguments).map(Self.payment)
    }

    static func payment(_ r: SQLRow) throws(StoreError) -> PaymentRecord {
        guard let status = PaymentRecord.Status(rawValue: try r.string(8)) else {
            throw StoreError(.corruptRow, "a payment has a status this version does not know")
        }
        return PaymentRecord(
            id: try r.string(0), scope: try r.string(1), idempotencyKey: try r.string(2), request: try r.string(3), token: try r.string(4),
            singleUse: try r.bool(5), amount: try r.int(6), currency: try r.string(7), status: status, code: r.optionalString(9),
            reference: r.optionalString(10), nextAction: r.optionalString(11), reason: r.optionalString(12), createdAt: try r.date(13),
            updatedAt: try r.date(14), manualCapture: r.optionalString(15) == "manual", amountCaptured: r.optionalInt(16),
            amountRefunded: r.optionalInt(17) ?? 0, authorizationExpiresAt: r.optionalDate(18),
            metadata: try Metadata(column: r.optionalString(19)))
    }

    // MARK: Sessions

    public func createSession(_ x: SessionRecord, claim: CreateClaim?) async throws(StoreError) -> CreateClaim.Outcome {
        try await db.transaction { (tx) throws(StoreError) in
            if let claim {
                let outcome = try await tx.claim(claim, objectID: x.id, at: x.createdAt)
                guard outcome == .claimed else { return outcome }
            }
            try await tx.query("""
                INSERT INTO vault_sessions (id, amount, currency, brands, customer, status, payment_id, attempts, created_at, expires_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, [x.id, x.amount, x.currency, x.acceptedBrands.joined(separator: ","), x.customer, x.status.rawValue, x.paymentID, x.attempts,
                      x.createdAt, x.expiresAt])
            return .claimed
        }
    }

    public func session(_ id: String) async throws(StoreError) -> SessionRecord? {
        guard let r = try await db.query("""
            SELECT id, amount, currency, brands, customer, status, payment_id, attempts, created_at, expires_at FROM vault_sessions WHERE id = ?
            """, [id]).first else { return nil }
        guard let status = SessionRecord.Status(rawValue: try r.string(5)) else {
            throw StoreError(.corruptRow, "a session has a status this version does not know")
        }
        return SessionRecord(
            id: try r.string(0), amount: try r.int(1), currency: try r.string(2),
            acceptedBrands: try r.string(3).split(separator: ",").map(String.init), customer: r.optionalString(4), status: status,
            paymentID: r.optionalString(6), attempts: try r.int(7), createdAt: try r.date(8), expiresAt: try r.date(9))
    }

    public func transitionSession(
        _ id: String, from: SessionRecord.Status, to: SessionRecord.Status, paymentID: String?
    ) async throws(StoreError) -> Bool {
        // Claiming an open session for a new attempt forgets the last attempt's payment.
        let claim = from == .open && to == .paying ? 1 : 0
        return try await !db.write(
            "UPDATE vault_sessions SET status = ?, payment_id = CASE WHEN ? = 1 THEN NULL ELSE COALESCE(?, payment_id) END WHERE id = ? AND status = ? RETURNING id",
            [to.rawValue, claim, paymentID, id, from.rawValue]).isEmpty
    }

    public func failSessionAttempt(_ id: String, maxAttempts: Int) async throws(StoreError) -> SessionRecord.Status? {
        let rows = try await db.write("""
            UPDATE vault_sessions SET attempts = attempts + 1, status = CASE WHEN attempts + 1 >= ? THEN 'closed' ELSE 'open' END
            WHERE id = ? AND status = 'paying' RETURNING status
            """, [maxAttempts, id])
        return rows.first?.optionalString(0).flatMap(SessionRecord.Status.init(rawValue:))
    }
}
