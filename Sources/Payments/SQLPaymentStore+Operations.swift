import Foundation
import Store
import VaultCrypto

/// Captures, cancels and refunds (`PaymentOperationStore`) over the same database as payments:
/// `vault_payment_operations`, changed in one transaction with the payment row they affect. On
/// PostgreSQL the payment row is locked (`FOR UPDATE`) while an operation is checked and recorded,
/// so two sidecars refunding one payment at once never refund more than it captured; SQLite's
/// write transactions are serialized already.
extension SQLPaymentStore: PaymentOperationStore {
    static let operationColumns = """
        id, payment_id, kind, scope, idempotency_key, request, amount, currency, status, code, reference, created_at, updated_at, metadata
        """

    public func beginOperation(_ op: PaymentOperation, now: Date) async throws(StoreError) -> OperationBegin {
        try await db.transaction { (tx) throws(StoreError) -> OperationBegin in
            if let existing = try await Self.operation(in: tx, "WHERE scope = ? AND idempotency_key = ?", [op.scope, op.idempotencyKey]) {
                return .existing(existing)
            }
            let lock = tx.dialect.backend == .postgres ? " FOR UPDATE" : ""
            guard let row = try await tx.query("SELECT \(Self.columns) FROM vault_payments WHERE id = ?\(lock)", [op.paymentID]).first else {
                return .refused(.paymentNotFound)
            }
            let payment = try Self.payment(row)
            if let refusal = try await Self.check(op, against: payment, in: tx, now: now) { return .refused(refusal) }
            try await tx.query(
                "INSERT INTO vault_payment_operations (\(Self.operationColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [op.id, op.paymentID, op.kind.rawValue, op.scope, op.idempotencyKey, op.request, op.amount, op.currency, op.status.rawValue,
                 op.code, op.reference, op.createdAt, op.updatedAt, op.metadata.column])
            return .created
        }
    }

    /// Why `op` may not be done to `payment` now, or nil. An authorization found expired is marked so.
    static func check(_ op: PaymentOperation, against payment: PaymentRecord, in tx: Transaction, now: Date) async throws(StoreError) -> OperationRefusal? {
        switch op.kind {
        case .capture, .cancel:
            guard payment.status == .requiresCapture else {
                if payment.status == .canceled, payment.code == "expired", op.kind == .capture { return .authorizationExpired }
                return op.kind == .capture ? .notCapturable : .notCancelable
            }
            let live = try await tx.query(
                "SELECT 1 FROM vault_payment_operations WHERE payment_id = ? AND kind IN ('capture','cancel') AND status <> 'failed'", [payment.id])
            if !live.isEmpty { return op.kind == .capture ? .notCapturable : .notCancelable }
            if let expiry = payment.authorizationExpiresAt, expiry <= now {
                try await tx.query(
                    "UPDATE vault_payments SET status = 'canceled', code = 'expired', updated_at = ? WHERE id = ? AND status = 'requires_capture'",
                    [now, payment.id])
                return op.kind == .capture ? .authorizationExpired : .notCancelable
            }
            if op.kind == .capture, op.amount > payment.amount { return .exceedsAuthorized(authorized: payment.amount) }
            return nil
        case .refund:
            guard let captured = payment.capturedAmount else { return .notRefundable }
            let row = try await tx.query("""
                SELECT CAST(COALESCE(SUM(amount), 0) AS BIGINT) FROM vault_payment_operations
                WHERE payment_id = ? AND kind = 'refund' AND status IN ('processing', 'succeeded', 'pending')
                """, [payment.id]).first
            let available = captured - (row?.optionalInt(0) ?? 0)
            return op.amount > available ? .exceedsCaptured(available: max(0, available)) : nil
        }
    }

    public func finishOperation(
        _ id: String, status: PaymentOperation.Status, code: String?, reference: String?, now: Date
    ) async throws(StoreError) -> Bool {
        try await db.transaction { (tx) throws(StoreError) -> Bool in
            // A pending operation may still end succeeded or failed; processing may end anyhow.
            let from = status == .pending ? "('processing')" : "('processing', 'pending')"
            let rows = try await tx.query("""
                UPDATE vault_payment_operations SET status = ?, code = ?, reference = COALESCE(?, reference), updated_at = ?
                WHERE id = ? AND status IN \(from) RETURNING payment_id, kind, amount
                """, [status.rawValue, code, reference, now, id])
            guard let row = rows.first else { return false }
            guard status == .succeeded else { return true }
            let paymentID = try row.string(0), amount = try row.int(2)
            switch PaymentOperation.Kind(rawValue: try row.string(1)) {
            case .capture?:
                try await tx.query("""
                    UPDATE vault_payments SET status = 'succeeded', amount_captured = ?, code = NULL, updated_at = ?
                    WHERE id = ? AND status IN ('requires_capture', 'canceled')
                    """, [amount, now, paymentID])
            case .cancel?:
                try await tx.query(
                    "UPDATE vault_payments SET status = 'canceled', code = 'requested', updated_at = ? WHERE id = ? AND status = 'requires_capture'",
                    [now, paymentID])
            case .refund?:
                try await tx.query(
                    "UPDATE vault_payments SET amount_refunded = amount_refunded + ?, updated_at = ? WHERE id = ?", [amount, now, paymentID])
            case nil:
                throw StoreError(.corruptRow, "an operation has a kind this version does not know")
            }
            return true
        }
    }

    public func abandonOperation(_ id: String) async throws(StoreError) {
        try await db.write("DELETE FROM vault_payment_operations WHERE id = ? AND status = 'processing'", [id])
    }

    public func operation(_ id: String) async throws(StoreError) -> PaymentOperation? {
        try await selectOperations("WHERE id = ?", [id]).first
    }

    public func findOperation(scope: String, idempotencyKey: String) async throws(StoreError) -> PaymentOperation? {
        try await selectOperations("WHERE scope = ? AND idempotency_key = ?", [scope, idempotencyKey]).first
    }

    public func unsettledOperations(before: Date, limit: Int) async throws(StoreError) -> [PaymentOperation] {
        try await selectOperations("WHERE status = 'processing' AND updated_at < ? ORDER BY updated_at, id LIMIT ?", [before, limit])
    }

    public func expireAuthorizations(_ id: String?, now: Date) async throws(StoreError) -> [String] {
        let one = id == nil ? "" : " AND id = ?"
        let arguments: [any SQLBindable] = [now, now] + (id.map { [$0] } ?? [])
        return try await db.write("""
            UPDATE vault_payments SET status = 'canceled', code = 'expired', updated_at = ?
            WHERE status = 'requires_capture' AND authorization_expires_at <= ?\(one)
              AND NOT EXISTS (SELECT 1 FROM vault_payment_operations o
                              WHERE o.payment_id = vault_payments.id AND o.kind IN ('capture','cancel') AND o.status <> 'failed')
            RETURNING id
            """, arguments).map { (r) throws(StoreError) in try r.string(0) }
    }

    private func selectOperations(_ condition: String, _ arguments: [any SQLBindable]) async throws(StoreError) -> [PaymentOperation] {
        try await db.query("SELECT \(Self.operationColumns) FROM vault_payment_operations \(condition)", arguments).map(Self.operation)
    }

    static func operation(in tx: Transaction, _ condition: String, _ arguments: [any SQLBindable]) async throws(StoreError) -> PaymentOperation? {
        guard let row = try await tx.query("SELECT \(operationColumns) FROM vault_payment_operations \(condition)", arguments).first else {
            return nil
        }
        return try operation(row)
    }

    static func operation(_ r: SQLRow) throws(StoreError) -> PaymentOperation {
        guard let kind = PaymentOperation.Kind(rawValue: try r.string(2)), let status = PaymentOperation.Status(rawValue: try r.string(8)) else {
            throw StoreError(.corruptRow, "an operation has a kind or status this version does not know")
        }
        return PaymentOperation(
            id: try r.string(0), paymentID: try r.string(1), kind: kind, scope: try r.string(3), idempotencyKey: try r.string(4),
            request: try r.string(5), amount: try r.int(6), currency: try r.string(7), status: status, code: r.optionalString(9),
            reference: r.optionalString(10), createdAt: try r.date(11), updatedAt: try r.date(12),
            metadata: try Metadata(column: r.optionalString(13)))
    }
}
