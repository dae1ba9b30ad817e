import Foundation
import VaultCrypto

/// One capture, void or refund in the processor ledger (`vault_ledger_operations`): keyed by the
/// operation id (the processor's idempotency key), tied to the payment id whose authorization row
/// holds the processor's reference. No card data.
public struct LedgerOperation: Sendable, Equatable {
    public var operationID: String
    public var paymentID: String
    /// `capture`, `void` or `refund`.
    public var kind: String
    public var processor: String
    public var amount: Int
    public var currency: String
    public var state: LedgerEntry.State
    /// `succeeded`, `pending` or `failed` once known.
    public var status: String?
    public var failureCode: String?
    public var reference: String?
    public var reason: String?
    public var createdAt: Date
    public var updatedAt: Date

    public init(
        operationID: String, paymentID: String, kind: String, processor: String, amount: Int, currency: String, state: LedgerEntry.State,
        status: String? = nil, failureCode: String? = nil, reference: String? = nil, reason: String? = nil, createdAt: Date, updatedAt: Date? = nil
    ) {
        self.operationID = operationID
        self.paymentID = paymentID
        self.kind = kind
        self.processor = processor
        self.amount = amount
        self.currency = currency
        self.state = state
        self.status = status
        self.failureCode = failureCode
        self.reference = reference
        self.reason = reason
        self.createdAt = createdAt
        self.updatedAt = updatedAt ?? createdAt
    }

    /// Whether it is the same request (a retry), not another one under the same id.
    public func sameRequest(kind: String, paymentID: String, amount: Int) -> Bool {
        self.kind == kind && self.paymentID == paymentID && self.amount == amount
    }
}

/// What `LedgerStore.claimOperation` found.
public enum LedgerOperationClaim: Sendable, Equatable {
    /// The row was made by this call (with the authorization it applies to).
    case claimed(authorization: LedgerEntry)
    /// A row with that operation id was there already.
    case existing(LedgerOperation)
    /// The authorization does not allow it (a code of the catalogue and why); nothing recorded.
    case refused(ErrorCode, String)
}

extension LedgerStore {
    static let operationColumns = """
        operation_id, payment_id, kind, processor, amount, currency, state, status, failure_code, reference, reason, created_at, updated_at
        """

    /// Records `op` unless its id has a row, checked in one transaction against the payment's
    /// authorization (locked on PostgreSQL) and its other operations: a capture or void needs an
    /// authorization `requires_capture` with no capture or void recorded (a failed one aside), a
    /// capture at most the authorized amount; a refund a captured payment and at most what its
    /// refunds (succeeded, pending or not yet known) leave of the captured amount.
    public func claimOperation(_ op: LedgerOperation) async throws(StoreError) -> LedgerOperationClaim {
        try await db.transaction { (tx) throws(StoreError) -> LedgerOperationClaim in
            if let row = try await tx.query("SELECT \(Self.operationColumns) FROM vault_ledger_operations WHERE operation_id = ?", [op.operationID]).first {
                return .existing(try Self.operation(row))
            }
            let lock = tx.dialect.backend == .postgres ? " FOR UPDATE" : ""
            guard let row = try await tx.query("SELECT \(Self.columns) FROM vault_ledger WHERE payment_id = ?\(lock)", [op.paymentID]).first else {
                return .refused(.authorizationNotFound, "the processor has no authorization for this payment id")
            }
            let auth = try Self.entry(row)
            guard auth.state == .done else { return .refused(.authorizationPending, "the authorization's outcome is not known yet") }
            let live = "state <> 'done' OR status IN ('succeeded', 'pending')"
            switch op.kind {
            case "capture", "void":
                let notAllowed: ErrorCode = op.kind == "capture" ? .paymentNotCapturable : .paymentNotCancelable
                guard auth.status == "requires_capture" else { return .refused(notAllowed, "the authorization is not waiting for a capture") }
                let settled = try await tx.query(
                    "SELECT 1 FROM vault_ledger_operations WHERE payment_id = ? AND kind IN ('capture', 'void') AND (\(live))", [op.paymentID])
                guard settled.isEmpty else { return .refused(notAllowed, "the authorization was captured or voided already") }
                if op.kind == "capture", op.amount > auth.amount {
                    return .refused(.captureExceedsAuthorized, "the capture exceeds the authorized amount (\(auth.amount))")
                }
            default:
                var captured: Int? = auth.status == "succeeded" ? auth.amount : nil
                if auth.status == "requires_capture" {
                    captured = try await tx.query(
                        "SELECT amount FROM vault_ledger_operations WHERE payment_id = ? AND kind = 'capture' AND status = 'succeeded'",
                        [op.paymentID]).first?.optionalInt(0)
                }
                guard let captured else { return .refused(.paymentNotRefundable, "nothing was captured on this payment") }
                let refunded = try await tx.query(
                    "SELECT CAST(COALESCE(SUM(amount), 0) AS BIGINT) FROM vault_ledger_operations WHERE payment_id = ? AND kind = 'refund' AND (\(live))",
                    [op.paymentID]).first?.optionalInt(0) ?? 0
                guard op.amount <= captured - refunded else {
                    return .refused(.refundExceedsCaptured, "the refunds would exceed the captured amount (\(captured - refunded) left)")
                }
            }
            try await tx.query(
                "INSERT INTO vault_ledger_operations (\(Self.operationColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [op.operationID, op.paymentID, op.kind, op.processor, op.amount, op.currency, op.state.rawValue, op.status, op.failureCode,
                 op.reference, op.reason, op.createdAt, op.updatedAt])
            return .claimed(authorization: auth)
        }
    }

    /// An operation id's row, if any.
    public func operation(_ operationID: String) async throws(StoreError) -> LedgerOperation? {
        guard let row = try await db.query(
            "SELECT \(Self.operationColumns) FROM vault_ledger_operations WHERE operation_id = ?", [operationID]).first else { return nil }
        return try Self.operation(row)
    }

    /// Records a relay operation's outcome unless one is recorded already (an operator's, or a
    /// concurrent call's after the processor answered it the same). Whether this call recorded it.
    public func finishOperation(
        _ operationID: String, status: String, failureCode: String?, reference: String?, now: Date
    ) async throws(StoreError) -> Bool {
        try await !db.write("""
            UPDATE vault_ledger_operations SET state = 'done', status = ?, failure_code = ?, reference = ?, reason = NULL, updated_at = ?
            WHERE operation_id = ? AND state <> 'done' RETURNING operation_id
            """, [status, failureCode, reference, now, operationID]).isEmpty
    }

    /// Leaves a relay operation `unknown` (sent, the answer lost or unclear) with why, if the call
    /// still holds it (`heldSince`: the `updated_at` it set when it took the row).
    public func markOperationUnknown(_ operationID: String, heldSince: Date, reason: String, now: Date) async throws(StoreError) -> Bool {
        try await !db.write("""
            UPDATE vault_ledger_operations SET state = 'unknown', reason = ?, updated_at = ?
            WHERE operation_id = ? AND state = 'sending' AND updated_at = ? RETURNING operation_id
            """, [reason, now, operationID, heldSince]).isEmpty
    }

    /// Takes a relay operation over to send it again under the same idempotency key: by a
    /// compare-and-swap on its `updated_at` (the value read), so of concurrent calls one sends.
    public func retakeOperation(_ operationID: String, updatedAt: Date, now: Date) async throws(StoreError) -> Bool {
        try await !db.write("""
            UPDATE vault_ledger_operations SET state = 'sending', updated_at = ?
            WHERE operation_id = ? AND state <> 'done' AND updated_at = ? RETURNING operation_id
            """, [now, operationID, updatedAt]).isEmpty
    }

    /// Removes a relay operation that was never sent (no connection was made on its first send),
    /// by the call that made it: nothing was done, the same operation id may be sent again.
    public func forgetOperation(_ operationID: String, heldSince: Date) async throws(StoreError) -> Bool {
        try await !db.write(
            "DELETE FROM vault_ledger_operations WHERE operation_id = ? AND state = 'sending' AND updated_at = ? RETURNING operation_id",
            [operationID, heldSince]
        ).isEmpty
    }

    /// The sandbox's refund behaviour for a payment's test card (`refund_fails`, `refund_pending`),
    /// recorded at its authorization; nil for an ordinary card.
    public func refundRule(_ paymentID: String) async throws(StoreError) -> String? {
        try await db.query("SELECT rule FROM vault_sandbox_refund_rules WHERE payment_id = ?", [paymentID]).first?.optionalString(0)
    }

    static func operation(_ r: SQLRow) throws(StoreError) -> LedgerOperation {
        guard let state = LedgerEntry.State(rawValue: try r.string(6)) else { throw StoreError(.corruptRow, "a ledger operation has an unknown state") }
        return LedgerOperation(
            operationID: try r.string(0), paymentID: try r.string(1), kind: try r.string(2), processor: try r.string(3), amount: try r.int(4),
            currency: try r.string(5), state: state, status: r.optionalString(7), failureCode: r.optionalString(8), reference: r.optionalString(9),
            reason: r.optionalString(10), createdAt: try r.date(11), updatedAt: try r.date(12))
    }
}
