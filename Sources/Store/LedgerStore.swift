import Foundation

/// One payment id in the processor ledger: what was asked, and what is known of the outcome. No
/// card data: amounts, the envelope's id (to tell a retry from a reuse), codes and references.
public struct LedgerEntry: Sendable, Equatable {
    public enum State: String, Sendable {
        /// A gateway holds the lease and is (or was, until `leaseUntil`) talking to the processor.
        case sending
        /// Sent at least once, the outcome not known: to settle (`nextTryAt`, until `deadlineAt`).
        case unknown
        /// The processor's outcome is recorded (`status`).
        case done
    }

    public var paymentID: String
    /// `sandbox` or `relay:<template>`.
    public var processor: String
    public var amount: Int
    public var currency: String
    public var envelopeID: String
    public var state: State
    /// `succeeded`, `declined` or `requires_action` once known.
    public var status: String?
    public var declineCode: String?
    public var reference: String?
    /// A 3-D Secure transaction id (`requires_action`).
    public var transactionID: String?
    /// Sends to the processor so far (1 for the first).
    public var attempts: Int
    public var leaseUntil: Date?
    public var nextTryAt: Date?
    /// After it, an outcome still unknown is reported as `unknown` (the payment too).
    public var deadlineAt: Date?
    /// Why the outcome is not known (the last failure), for people.
    public var reason: String?
    public var createdAt: Date
    public var updatedAt: Date

    public init(
        paymentID: String, processor: String, amount: Int, currency: String, envelopeID: String, state: State, status: String? = nil,
        declineCode: String? = nil, reference: String? = nil, transactionID: String? = nil, attempts: Int = 1, leaseUntil: Date? = nil,
        nextTryAt: Date? = nil, deadlineAt: Date? = nil, reason: String? = nil, createdAt: Date, updatedAt: Date? = nil
    ) {
        self.paymentID = paymentID
        self.processor = processor
        self.amount = amount
        self.currency = currency
        self.envelopeID = envelopeID
        self.state = state
        self.status = status
        self.declineCode = declineCode
        self.reference = reference
        self.transactionID = transactionID
        self.attempts = attempts
        self.leaseUntil = leaseUntil
        self.nextTryAt = nextTryAt
        self.deadlineAt = deadlineAt
        self.reason = reason
        self.createdAt = createdAt
        self.updatedAt = updatedAt ?? createdAt
    }

    /// Whether another call may be asking the processor now (its lease has not run out).
    public func isLeased(at now: Date) -> Bool { state == .sending && (leaseUntil ?? .distantPast) > now }

    /// Whether it is the same charge request (a retry), not another one under the same id.
    public func sameRequest(amount: Int, currency: String, envelopeID: String) -> Bool {
        self.amount == amount && self.currency == currency && self.envelopeID == envelopeID
    }
}

/// What `LedgerStore.claim` found.
public enum LedgerClaim: Sendable, Equatable {
    /// The row was made by this call: it (and only it) asks the processor.
    case claimed
    /// A row for that payment id was there already.
    case existing(LedgerEntry)
}

/// The processor ledger (`vault_ledger`, docs/configuration.md "The store"), in the vault's store:
/// every gateway of a store sees the same rows, so a payment id is charged at most once whichever
/// gateway gets it. A row is claimed by an atomic insert before anything is sent; a retry takes it
/// over only by a compare-and-swap on its attempt count, so of two gateways retrying at once
/// exactly one sends.
public final class LedgerStore: Sendable {
    let db: Database

    public init(database: Database) { self.db = database }

    /// The store it is over.
    public var database: Database { db }

    static let columns = """
        payment_id, processor, amount, currency, envelope_id, state, status, decline_code, reference, transaction_id, attempts,
        lease_until, next_try_at, deadline_at, reason, created_at, updated_at
        """

    /// Inserts `entry` unless its payment id has a row; the existing row otherwise.
    public func claim(_ entry: LedgerEntry) async throws(StoreError) -> LedgerClaim {
        try await db.transaction { (tx) throws(StoreError) in try await Self.claim(entry, in: tx) }
    }

    static func claim(_ e: LedgerEntry, in tx: Transaction) async throws(StoreError) -> LedgerClaim {
        let inserted = try await tx.query(
            "INSERT INTO vault_ledger (\(columns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (payment_id) DO NOTHING RETURNING payment_id",
            values(e))
        if !inserted.isEmpty { return .claimed }
        guard let row = try await tx.query("SELECT \(columns) FROM vault_ledger WHERE payment_id = ?", [e.paymentID]).first else {
            throw StoreError(.unavailable, "a ledger row vanished while being read")
        }
        return .existing(try entry(row))
    }

    /// The sandbox's decided charge and, for a challenge, its 3-D Secure transaction, in one
    /// transaction; the existing row when the payment id has one.
    /// `refundRule`: a sandbox test card's refund behaviour, kept for its refunds (the card is
    /// never seen again).
    public func claim(
        _ entry: LedgerEntry, challenge: (transactionID: String, requestJTI: String)?, refundRule: String? = nil
    ) async throws(StoreError) -> LedgerClaim {
        try await db.transaction { (tx) throws(StoreError) in
            let claim = try await Self.claim(entry, in: tx)
            if claim == .claimed, let refundRule {
                try await tx.query(
                    "INSERT INTO vault_sandbox_refund_rules (payment_id, rule) VALUES (?, ?) ON CONFLICT (payment_id) DO NOTHING",
                    [entry.paymentID, refundRule])
            }
            if claim == .claimed, let challenge {
                try await tx.query(
                    "INSERT INTO vault_sandbox_3ds (transaction_id, payment_id, request_jti) VALUES (?, ?, ?)",
                    [challenge.transactionID, entry.paymentID, challenge.requestJTI])
            }
            return claim
        }
    }

    /// A payment id's row, if any.
    public func entry(_ paymentID: String) async throws(StoreError) -> LedgerEntry? {
        guard let row = try await db.query("SELECT \(Self.columns) FROM vault_ledger WHERE payment_id = ?", [paymentID]).first else { return nil }
        return try Self.entry(row)
    }

    /// Takes over a row that is not `done` for another send: only if it still has `attempts`
    /// attempts and no live lease. The row as taken (state `sending`, one more attempt, leased
    /// until `leaseUntil`), or nil when another call took it first.
    public func retake(_ paymentID: String, attempts: Int, leaseUntil: Date, now: Date) async throws(StoreError) -> LedgerEntry? {
        let rows = try await db.write("""
            UPDATE vault_ledger SET state = 'sending', attempts = attempts + 1, lease_until = ?, updated_at = ?
            WHERE payment_id = ? AND state <> 'done' AND attempts = ? AND (state = 'unknown' OR lease_until IS NULL OR lease_until < ?)
            RETURNING \(Self.columns)
            """, [leaseUntil, now, paymentID, attempts, now])
        return try rows.first.map { (r) throws(StoreError) in try Self.entry(r) }
    }

    /// Takes the lease of a row that is not `done` without sending (a status query): same rules
    /// as `retake`, the attempt count unchanged.
    public func lease(_ paymentID: String, attempts: Int, leaseUntil: Date, now: Date) async throws(StoreError) -> LedgerEntry? {
        let rows = try await db.write("""
            UPDATE vault_ledger SET state = 'sending', lease_until = ?, updated_at = ?
            WHERE payment_id = ? AND state <> 'done' AND attempts = ? AND (state = 'unknown' OR lease_until IS NULL OR lease_until < ?)
            RETURNING \(Self.columns)
            """, [leaseUntil, now, paymentID, attempts, now])
        return try rows.first.map { (r) throws(StoreError) in try Self.entry(r) }
    }

    /// Records the processor's outcome. False when the row was already `done` (the first
    /// outcome stands) or is gone.
    public func settle(
        _ paymentID: String, status: String, declineCode: String?, reference: String?, transactionID: String? = nil, now: Date
    ) async throws(StoreError) -> Bool {
        try await !db.write("""
            UPDATE vault_ledger SET state = 'done', status = ?, decline_code = ?, reference = ?, transaction_id = COALESCE(?, transaction_id),
                lease_until = NULL, next_try_at = NULL, reason = NULL, updated_at = ?
            WHERE payment_id = ? AND state <> 'done' RETURNING payment_id
            """, [status, declineCode, reference, transactionID, now, paymentID]).isEmpty
    }

    /// The outcome is not known after a send (or a status query): the row waits for its next
    /// try at `nextTryAt`. Sets the deadline if the row has none. False when it is `done`.
    public func markUnknown(_ paymentID: String, reason: String, nextTryAt: Date, deadlineAt: Date, now: Date) async throws(StoreError) -> Bool {
        try await !db.write("""
            UPDATE vault_ledger SET state = 'unknown', lease_until = NULL, next_try_at = ?, deadline_at = COALESCE(deadline_at, ?),
                reason = ?, updated_at = ?
            WHERE payment_id = ? AND state <> 'done' RETURNING payment_id
            """, [nextTryAt, deadlineAt, String(reason.prefix(200)), now, paymentID]).isEmpty
    }

    /// Deletes a claim whose first send never left this host (no connection was made, or the
    /// URL was refused): nothing can have been charged. Only a row still on its first attempt
    /// goes; one sent before stays (an earlier send may have charged).
    public func release(_ paymentID: String) async throws(StoreError) -> Bool {
        try await !db.write(
            "DELETE FROM vault_ledger WHERE payment_id = ? AND state = 'sending' AND attempts = 1 RETURNING payment_id", [paymentID]
        ).isEmpty
    }

    /// Rows to settle now: `unknown` ones due at `now`, and `sending` ones whose lease ran out (a
    /// gateway died mid-call). Oldest first. A row given up at its deadline (`unknown` without a
    /// next try, `giveUp`) is never due.
    public func due(now: Date, limit: Int = 100) async throws(StoreError) -> [LedgerEntry] {
        try await db.query("""
            SELECT \(Self.columns) FROM vault_ledger
            WHERE (state = 'unknown' AND next_try_at IS NOT NULL AND next_try_at <= ?) OR (state = 'sending' AND (lease_until IS NULL OR lease_until < ?))
            ORDER BY created_at LIMIT ?
            """, [now, now, limit]).map { (r) throws(StoreError) in try Self.entry(r) }
    }

    /// Rows not `done`, for metrics (`unknown` past their deadline are counted apart).
    public func unsettledCount(now: Date) async throws(StoreError) -> (unsettled: Int, pastDeadline: Int) {
        let row = try await db.scan("""
            SELECT COUNT(*), COALESCE(SUM(CASE WHEN deadline_at IS NOT NULL AND deadline_at < ? THEN 1 ELSE 0 END), 0)
            FROM vault_ledger WHERE state <> 'done'
            """, [now]).first
        return (row?.optionalInt(0) ?? 0, row?.optionalInt(1) ?? 0)
    }

    // MARK: The sandbox's 3-D Secure

    /// The payment and the challenge request's `jti` of a sandbox 3-D Secure transaction.
    public func challenge(_ transactionID: String) async throws(StoreError) -> (paymentID: String, requestJTI: String)? {
        guard let row = try await db.query(
            "SELECT payment_id, request_jti FROM vault_sandbox_3ds WHERE transaction_id = ?", [transactionID]).first else { return nil }
        return (try row.string(0), try row.string(1))
    }

    /// The challenge request's `jti` of a payment waiting for 3-D Secure, and its ledger row.
    public func awaitingChallenge(_ paymentID: String) async throws(StoreError) -> (entry: LedgerEntry, requestJTI: String?)? {
        guard let e = try await entry(paymentID) else { return nil }
        let jti = try await db.query(
            "SELECT request_jti FROM vault_sandbox_3ds WHERE payment_id = ?", [paymentID]).first?.optionalString(0)
        return (e, jti)
    }

    /// What `confirmChallenge` did.
    public enum Confirmation: Sendable, Equatable { case confirmed, resultReplayed, notAwaiting }

    /// Uses 3-D Secure result `resultID` (once, ever) to finish a payment waiting for it.
    public func confirmChallenge(
        _ paymentID: String, resultID: String, status: String, declineCode: String?, reference: String, now: Date
    ) async throws(StoreError) -> Confirmation {
        try await db.transaction { (tx) throws(StoreError) in
            let awaiting = try await tx.query(
                "SELECT 1 FROM vault_ledger WHERE payment_id = ? AND state = 'done' AND status = 'requires_action'", [paymentID])
            guard !awaiting.isEmpty else { return .notAwaiting }
            let fresh = try await tx.query(
                "INSERT INTO vault_sandbox_3ds_used (jti) VALUES (?) ON CONFLICT (jti) DO NOTHING RETURNING jti", [resultID])
            guard !fresh.isEmpty else { return .resultReplayed }
            // A concurrent confirmation with another result may have won meanwhile: then this
            // one changes nothing (its result is used up all the same).
            let updated = try await tx.query("""
                UPDATE vault_ledger SET status = ?, decline_code = ?, reference = ?, updated_at = ?
                WHERE payment_id = ? AND state = 'done' AND status = 'requires_action' RETURNING payment_id
                """, [status, declineCode, reference, now, paymentID])
            return updated.isEmpty ? .notAwaiting : .confirmed
        }
    }

    // MARK: Rows

    static func values(_ e: LedgerEntry) -> [any SQLBindable] {
        [e.paymentID, e.processor, e.amount, e.currency, e.envelopeID, e.state.rawValue, e.status, e.declineCode, e.reference,
         e.transactionID, e.attempts, e.leaseUntil, e.nextTryAt, e.deadlineAt, e.reason, e.createdAt, e.updatedAt]
    }

    static func entry(_ r: SQLRow) throws(StoreError) -> LedgerEntry {
        guard let state = LedgerEntry.State(rawValue: try r.string(5)) else { throw StoreError(.corruptRow, "a ledger row has an unknown state") }
        return LedgerEntry(
            paymentID: try r.string(0), processor: try r.string(1), amount: try r.int(2), currency: try r.string(3),
            envelopeID: try r.string(4), state: state, status: r.optionalString(6), declineCode: r.optionalString(7),
            reference: r.optionalString(8), transactionID: r.optionalString(9), attempts: try r.int(10), leaseUntil: r.optionalDate(11),
            nextTryAt: r.optionalDate(12), deadlineAt: r.optionalDate(13), reason: r.optionalString(14), createdAt: try r.date(15),
            updatedAt: try r.date(16))
    }
}
