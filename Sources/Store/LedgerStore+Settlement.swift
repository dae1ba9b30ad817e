import Foundation

/// What settling an unknown outcome needs from the ledger beyond claim / retake / lease / settle /
/// markUnknown / release (docs/errors.md "Unknown outcomes"). Every change is a compare-and-swap on
/// the row's attempt count, and, for the holder of a lease, on the lease it holds: a gateway that
/// lost its lease (it ran out and another gateway took the row) changes nothing.
///
/// Three facts the gateway relies on:
/// - every send is preceded by a write of the row that sets `updated_at` (claim, retake, `renew`
///   with `countSend`), so `updated_at` is never earlier than the start of the row's last send;
/// - a row given up at its deadline is `unknown` with no `next_try_at`: nothing settles it but an
///   operator (`vault payments settle`), and it is never due again;
/// - a row deleted as "never received" is gone for good: the payment id was never charged, and a
///   new claim starts again at attempt 1.
extension LedgerStore {
    /// Renews the lease a call holds (`heldUntil`, the lease it set) to `leaseUntil`, counting one
    /// more send when `countSend` (the row's attempts go up by one, `updated_at` is now). False when
    /// the call no longer holds the row: then it must not send.
    public func renew(
        _ paymentID: String, attempts: Int, heldUntil: Date, leaseUntil: Date, countSend: Bool, now: Date
    ) async throws(StoreError) -> Bool {
        try await !db.write("""
            UPDATE vault_ledger SET attempts = attempts + ?, lease_until = ?, updated_at = ?
            WHERE payment_id = ? AND state = 'sending' AND attempts = ? AND lease_until = ? RETURNING payment_id
            """, [countSend ? 1 : 0, leaseUntil, now, paymentID, attempts, heldUntil]).isEmpty
    }

    /// `markUnknown` by the holder of the lease `heldUntil` only: a call that lost its lease (it
    /// ran out and another call took the row) must not clear the other call's lease.
    public func markUnknown(
        _ paymentID: String, attempts: Int, heldUntil: Date, reason: String, nextTryAt: Date, deadlineAt: Date, now: Date
    ) async throws(StoreError) -> Bool {
        try await !db.write("""
            UPDATE vault_ledger SET state = 'unknown', lease_until = NULL, next_try_at = ?, deadline_at = COALESCE(deadline_at, ?),
                reason = ?, updated_at = ?
            WHERE payment_id = ? AND state = 'sending' AND attempts = ? AND lease_until = ? RETURNING payment_id
            """, [nextTryAt, deadlineAt, String(reason.prefix(200)), now, paymentID, attempts, heldUntil]).isEmpty
    }

    /// Deletes a row the processor says it never received (its status query answered "not
    /// found" long enough after the row's last send): nothing was charged, and the payment id may
    /// be sent again from attempt 1. Only by the holder of the lease `heldUntil`.
    public func forget(_ paymentID: String, attempts: Int, heldUntil: Date) async throws(StoreError) -> Bool {
        try await !db.write(
            "DELETE FROM vault_ledger WHERE payment_id = ? AND state = 'sending' AND attempts = ? AND lease_until = ? RETURNING payment_id",
            [paymentID, attempts, heldUntil]
        ).isEmpty
    }

    /// Rows of `processor` (or of a relay ledger imported from an earlier version, `relay`) that a
    /// status query may settle now: `unknown` ones due at `now` and `sending` ones whose lease ran
    /// out, before their deadline. Oldest first.
    public func dueForSettlement(processor: String, now: Date, limit: Int = 100) async throws(StoreError) -> [LedgerEntry] {
        // `scan`: off a server's event loop (the OR of states may walk the ledger).
        try await db.scan("""
            SELECT \(Self.columns) FROM vault_ledger
            WHERE (processor = ? OR processor = 'relay') AND (deadline_at IS NULL OR deadline_at > ?)
              AND ((state = 'unknown' AND next_try_at IS NOT NULL AND next_try_at <= ?)
                   OR (state = 'sending' AND (lease_until IS NULL OR lease_until < ?)))
            ORDER BY created_at LIMIT ?
            """, [processor, now, now, now, limit]).map { (r) throws(StoreError) in try Self.entry(r) }
    }

    /// Rows past their deadline that nobody has given up yet (and no call holds): a row without a
    /// deadline (imported from an earlier version) has `created_at + defaultDeadline`.
    public func pastDeadline(now: Date, defaultDeadline: TimeInterval, limit: Int = 100) async throws(StoreError) -> [LedgerEntry] {
        try await db.query("""
            SELECT \(Self.columns) FROM vault_ledger
            WHERE state <> 'done' AND COALESCE(deadline_at, created_at + ?) < ?
              AND ((state = 'unknown' AND next_try_at IS NOT NULL) OR (state = 'sending' AND (lease_until IS NULL OR lease_until < ?)))
            ORDER BY created_at LIMIT ?
            """, [Int64(defaultDeadline * 1000), now, now, limit]).map { (r) throws(StoreError) in try Self.entry(r) }
    }

    /// Gives a row up at its deadline: `unknown` for good (no next try), `reason` kept for people.
    /// False when it changed meanwhile (settled, taken, or given up by another gateway): so of
    /// several gateways exactly one reports it.
    public func giveUp(_ paymentID: String, attempts: Int, reason: String, now: Date) async throws(StoreError) -> Bool {
        try await !db.write("""
            UPDATE vault_ledger SET state = 'unknown', lease_until = NULL, next_try_at = NULL, reason = ?, updated_at = ?,
                deadline_at = COALESCE(deadline_at, ?)
            WHERE payment_id = ? AND attempts = ?
              AND ((state = 'unknown' AND next_try_at IS NOT NULL) OR (state = 'sending' AND (lease_until IS NULL OR lease_until < ?)))
            RETURNING payment_id
            """, [String(reason.prefix(200)), now, now, paymentID, attempts, now]).isEmpty
    }

    /// What an operator's settlement (`vault payments settle`) did to the ledger row.
    public enum HandSettlement: Sendable, Equatable {
        /// The row was not done: it now holds the given outcome (or, for "not charged", is gone).
        case settled
        /// The row was done with the same outcome already: nothing changed.
        case alreadySettled
        /// No row: this store's ledger never sent the payment id.
        case noRow
        /// The row is done with another outcome (`status`): refused.
        case conflict(status: String)
        /// A gateway holds the row's lease now (it is being sent or asked about): refused.
        case inFlight
    }

    /// An operator's outcome for a payment id (`status` succeeded or declined; nil: the processor
    /// did not charge it, and the row is deleted so the payment id may be sent again). A declined
    /// outcome without `declineCode` is recorded `generic_decline` and matches any recorded code.
    public func settleByHand(
        _ paymentID: String, status: String?, declineCode: String?, reference: String?, now: Date
    ) async throws(StoreError) -> HandSettlement {
        try await db.transaction { (tx) throws(StoreError) -> HandSettlement in
            guard let row = try await tx.query("SELECT \(Self.columns) FROM vault_ledger WHERE payment_id = ?", [paymentID]).first else {
                return .noRow
            }
            let e = try Self.entry(row)
            if e.state == .done {
                guard let status, e.status == status, status != "declined" || declineCode == nil || e.declineCode == declineCode else {
                    return .conflict(status: e.status ?? "done")
                }
                return .alreadySettled
            }
            if e.isLeased(at: now) { return .inFlight }
            if let status {
                try await tx.query("""
                    UPDATE vault_ledger SET state = 'done', status = ?, decline_code = ?, reference = ?, lease_until = NULL,
                        next_try_at = NULL, reason = 'settled by an operator', updated_at = ?
                    WHERE payment_id = ?
                    """, [status, status == "declined" ? declineCode ?? "generic_decline" : nil, reference, now, paymentID])
            } else {
                try await tx.query("DELETE FROM vault_ledger WHERE payment_id = ?", [paymentID])
            }
            return .settled
        }
    }
}
