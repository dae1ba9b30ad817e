import Foundation
import Store

/// One event of the outbox (`vault_events`, written by the store's triggers: docs/events.md).
public struct EventRecord: Sendable, Equatable {
    /// Its webhook delivery: pending until an endpoint answered 2xx.
    public struct Delivery: Sendable, Equatable {
        public var delivered: Bool
        public var attempts: Int
        public var nextAttemptAt: Date?
        public var lastAttemptAt: Date?
        /// The HTTP status of the last attempt (nil: no answer, see `lastError`).
        public var lastStatus: Int?
        /// Why the last failed attempt failed, in words the vault chose (never the receiver's body);
        /// kept once delivered, as a record of the retries.
        public var lastError: String?
        public var deliveredAt: Date?
    }

    /// Order of writing (store-wide); an object's events are in the order of its changes.
    public let seq: Int64
    public let id: String
    public let type: String
    public let objectType: String
    public let objectID: String
    /// The object as it was at the change: JSON text made by the trigger (metadata only).
    public let data: String
    public let createdAt: Date
    public var delivery: Delivery

    static let columns = """
        seq, id, type, object_type, object_id, data, created_at, delivery, attempts, next_attempt_at, last_attempt_at, last_status,
        last_error, delivered_at
        """

    init(row r: SQLRow) throws(StoreError) {
        seq = Int64(try r.int(0))
        id = try r.string(1)
        type = try r.string(2)
        objectType = try r.string(3)
        objectID = try r.string(4)
        data = try r.string(5)
        createdAt = try r.date(6)
        let delivered = try r.string(7) == "delivered"
        delivery = Delivery(
            delivered: delivered, attempts: try r.int(8), nextAttemptAt: delivered ? nil : r.optionalDate(9), lastAttemptAt: r.optionalDate(10),
            lastStatus: r.optionalInt(11), lastError: r.optionalString(12), deliveredAt: r.optionalDate(13))
    }
}

/// The outbox over the vault's store: listing and reading events (`GET /v1/events`), and what
/// webhook delivery needs (the events due, their outcomes, one deliverer per store, the backlog,
/// retention).
public final class EventStore: Sendable {
    let db: Database

    public init(database: Database) { db = database }

    public func get(_ id: String) async throws(StoreError) -> EventRecord? {
        try await db.query("SELECT \(EventRecord.columns) FROM vault_events WHERE id = ?", [id]).first.map {
            (row) throws(StoreError) in try EventRecord(row: row)
        }
    }

    /// Newest first (by `seq`: the order they were written), after the cursor event, with
    /// optional filters: an exact `type` (`payment.succeeded`) or a type's object (`payment.*`),
    /// one object's id, and the creation range.
    public func list(_ q: ListQuery, type: String?, object: String?) async throws(StoreError) -> ListPage<EventRecord> {
        var clauses: [String] = [], arguments: [any SQLBindable] = []
        if let type {
            if type.hasSuffix(".*") {
                clauses.append("object_type = ?")
                arguments.append(String(type.dropLast(2)))
            } else {
                clauses.append("type = ?")
                arguments.append(type)
            }
        }
        if let object {
            clauses.append("object_id = ?")
            arguments.append(object)
        }
        if let from = q.createdFrom {
            clauses.append("created_at >= ?")
            arguments.append(from)
        }
        if let to = q.createdTo {
            clauses.append("created_at <= ?")
            arguments.append(to)
        }
        if let cursor = q.startingAfter {
            guard let row = try await db.query("SELECT seq FROM vault_events WHERE id = ?", [cursor]).first else { return .unknownCursor }
            clauses.append("seq < ?")
            arguments.append(try row.int(0))
        }
        let whereSQL = clauses.isEmpty ? "" : " WHERE " + clauses.joined(separator: " AND ")
        let limit = min(max(q.limit, ListQuery.limits.lowerBound), ListQuery.limits.upperBound)
        let rows = try await db.query("SELECT \(EventRecord.columns) FROM vault_events\(whereSQL) ORDER BY seq DESC LIMIT \(limit + 1)", arguments)
        return try ListPage<SQLRow>.page(Array(rows.prefix(limit)), hasMore: rows.count > limit).map { (row) throws(StoreError) in
            try EventRecord(row: row)
        }
    }

    /// Pending events whose next attempt is due, oldest first, each the earliest pending event of
    /// its object (so an object's events are delivered in order: a later one waits for the
    /// earlier one's delivery).
    public func due(now: Date, limit: Int) async throws(StoreError) -> [EventRecord] {
        try await db.query("""
            SELECT \(EventRecord.columns) FROM vault_events e WHERE e.delivery = 'pending' AND e.next_attempt_at <= ?
            AND NOT EXISTS (SELECT 1 FROM vault_events p WHERE p.object_id = e.object_id AND p.delivery = 'pending' AND p.seq < e.seq)
            ORDER BY e.seq LIMIT \(max(1, limit))
            """, [now]).map { (row) throws(StoreError) in try EventRecord(row: row) }
    }

    /// The outcome of one delivery attempt.
    public enum Outcome: Sendable, Equatable {
        case delivered(status: Int)
        /// Not delivered: retry at `retryAt`.
        case failed(status: Int?, error: String, retryAt: Date)
    }

    /// Records attempts' outcomes, in one transaction.
    public func record(_ outcomes: [(seq: Int64, outcome: Outcome)], at now: Date) async throws(StoreError) {
        guard !outcomes.isEmpty else { return }
        try await db.transaction { (tx) throws(StoreError) in
            for (seq, outcome) in outcomes {
                switch outcome {
                case .delivered(let status):
                    try await tx.query("""
                        UPDATE vault_events SET delivery = 'delivered', attempts = attempts + 1, last_attempt_at = ?, last_status = ?,
                        delivered_at = ? WHERE seq = ? AND delivery = 'pending'
                        """, [now, status, now, seq])
                case .failed(let status, let error, let retryAt):
                    try await tx.query("""
                        UPDATE vault_events SET attempts = attempts + 1, last_attempt_at = ?, last_status = ?, last_error = ?,
                        next_attempt_at = ? WHERE seq = ? AND delivery = 'pending'
                        """, [now, status, error, retryAt, seq])
                }
            }
        }
    }

    /// Takes or renews the lease `name` for `holder` until `until`: true when `holder` has it (it
    /// was free, expired, or already its own). One sidecar of a store delivers at a time.
    public func lease(_ name: String, holder: String, until: Date, now: Date) async throws(StoreError) -> Bool {
        try await !db.write("""
            INSERT INTO vault_leases (name, holder, until_at) VALUES (?, ?, ?)
            ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until_at = excluded.until_at
            WHERE vault_leases.holder = excluded.holder OR vault_leases.until_at < ?
            RETURNING holder
            """, [name, holder, until, now]).isEmpty
    }

    /// Gives the lease up (at a graceful stop), so another sidecar takes over at once.
    public func release(_ name: String, holder: String) async throws(StoreError) {
        _ = try await db.write("DELETE FROM vault_leases WHERE name = ? AND holder = ?", [name, holder])
    }

    /// Events not delivered yet, and when the oldest of them was written.
    public func backlog() async throws(StoreError) -> (count: Int, oldest: Date?) {
        let row = try await db.query("SELECT COUNT(*), MIN(created_at) FROM vault_events WHERE delivery = 'pending'").first
        return (row?.optionalInt(0) ?? 0, row?.optionalDate(1))
    }

    /// Deletes events written before `before` (retention), delivered or not; how many.
    public func purge(before: Date) async throws(StoreError) -> Int {
        try await db.write("DELETE FROM vault_events WHERE created_at < ? RETURNING seq", [before]).count
    }
}
