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
    /// `evt_` and `seq` in 24 hex digits: one per change, never reused.
    public var id: String { Self.id(seq) }
    public let type: String
    public let objectType: String
    public let objectID: String
    /// The object as it was at the change: JSON text made by the trigger (metadata only).
    public let data: String
    public let createdAt: Date
    public var delivery: Delivery

    static let columns = """
        seq, type, object_type, object_id, data, created_at, delivery, attempts, next_attempt_at, last_attempt_at, last_status,
        last_error, delivered_at
        """

    init(row r: SQLRow) throws(StoreError) {
        seq = Int64(try r.int(0))
        type = try r.string(1)
        objectType = try r.string(2)
        objectID = try r.string(3)
        data = try r.string(4)
        createdAt = try r.date(5)
        let delivered = try r.string(6) == "delivered"
        delivery = Delivery(
            delivered: delivered, attempts: try r.int(7), nextAttemptAt: delivered ? nil : r.optionalDate(8), lastAttemptAt: r.optionalDate(9),
            lastStatus: r.optionalInt(10), lastError: r.optionalString(11), deliveredAt: r.optionalDate(12))
    }

    /// The id of the event `seq`.
    public static func id(_ seq: Int64) -> String {
        let hex = String(seq, radix: 16)
        return "evt_" + String(repeating: "0", count: max(0, 24 - hex.count)) + hex
    }

    /// The `seq` of an event id (nil: not one).
    public static func seq(_ id: String) -> Int64? {
        guard id.utf8.count == 28, id.hasPrefix("evt_"),
              id.utf8.dropFirst(4).allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }),
              let n = Int64(id.dropFirst(4), radix: 16), n > 0
        else { return nil }
        return n
    }
}

/// The outbox over the vault's store: listing and reading events (`GET /v1/events`), and what
/// webhook delivery needs (the events due, their outcomes, one deliverer per store, the backlog,
/// retention).
public final class EventStore: Sendable {
    let db: Database

    public init(database: Database) { db = database }

    public func get(_ id: String) async throws(StoreError) -> EventRecord? {
        guard let seq = EventRecord.seq(id) else { return nil }
        return try await db.query("SELECT \(EventRecord.columns) FROM vault_events WHERE seq = ?", [seq]).first.map {
            (row) throws(StoreError) in try EventRecord(row: row)
        }
    }

    /// Newest first (by `seq`: the order they were written), after the cursor event, with
    /// optional filters: an exact `type` (`payment.succeeded`) or a type's object (`payment.*`)
    /// (through the object type's index), one object's id (its index), and the creation range
    /// (no index of its own: rows are walked in `seq` order, which is the order of creation).
    public func list(_ q: ListQuery, type: String?, object: String?) async throws(StoreError) -> ListPage<EventRecord> {
        var clauses: [String] = [], arguments: [any SQLBindable] = []
        if let type {
            clauses.append("object_type = ?")
            arguments.append(String(type.prefix { $0 != "." }))
            if !type.hasSuffix(".*") {
                clauses.append("type = ?")
                arguments.append(type)
            }
        }
        if let object {
            clauses.append("object_id = ?")
            arguments.append(object)
        }
        q.createdRange(into: &clauses, &arguments)
        if let cursor = q.startingAfter {
            guard let seq = EventRecord.seq(cursor), try await !db.query("SELECT 1 FROM vault_events WHERE seq = ?", [seq]).isEmpty else {
                return .unknownCursor
            }
            clauses.append("seq < ?")
            arguments.append(seq)
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

    /// Records attempts' outcomes, in one transaction; with `holder`, only while it holds the
    /// `webhook` lease (a deliverer whose lease lapsed records nothing: the holder sends again).
    public func record(_ outcomes: [(seq: Int64, outcome: Outcome)], at now: Date, holder: String? = nil) async throws(StoreError) {
        guard !outcomes.isEmpty else { return }
        try await db.transaction { (tx) throws(StoreError) in
            if let holder {
                let held = try await tx.query(
                    "SELECT 1 FROM vault_leases WHERE name = 'webhook' AND holder = ? AND until_at > \(tx.dialect.nowMillis)", [holder])
                guard !held.isEmpty else { return }
            }
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

    /// Takes or renews the lease `name` for `holder` for `seconds`: true when `holder` has it
    /// (it was free, lapsed, or already its own). One sidecar of a store delivers at a time.
    /// Times are the database's clock, so the clocks of the sidecars' hosts do not matter.
    public func lease(_ name: String, holder: String, seconds: Int) async throws(StoreError) -> Bool {
        let now = db.dialect.nowMillis
        return try await !db.write("""
            INSERT INTO vault_leases (name, holder, until_at) VALUES (?, ?, \(now) + ?)
            ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until_at = excluded.until_at
            WHERE vault_leases.holder = excluded.holder OR vault_leases.until_at < \(now)
            RETURNING holder
            """, [name, holder, seconds * 1000]).isEmpty
    }

    /// Gives the lease up (at a graceful stop), so another sidecar takes over at once.
    public func release(_ name: String, holder: String) async throws(StoreError) {
        _ = try await db.write("DELETE FROM vault_leases WHERE name = ? AND holder = ?", [name, holder])
    }

    /// Events not delivered yet, and when the oldest of them was written.
    /// (The count reads the pending index only; the oldest is its first entry's.)
    public func backlog() async throws(StoreError) -> (count: Int, oldest: Date?) {
        let count = try await db.query("SELECT COUNT(*) FROM vault_events WHERE delivery = 'pending'").first?.optionalInt(0) ?? 0
        let oldest = try await db.query("SELECT created_at FROM vault_events WHERE delivery = 'pending' ORDER BY seq LIMIT 1").first?.optionalDate(0)
        return (count, oldest)
    }

    /// Deletes events written before `before` (retention), delivered or not; how many. Walks
    /// `seq` from the oldest, 1,000 at a time, and stops at the first younger event (events are
    /// written in time order), so a purge with nothing to do reads one row.
    public func purge(before: Date) async throws(StoreError) -> Int {
        var deleted = 0
        while true {
            let rows = try await db.query("SELECT seq, created_at FROM vault_events ORDER BY seq LIMIT 1000")
            var last: Int?, old = 0
            for row in rows {
                guard try row.date(1) < before else { break }
                last = try row.int(0)
                old += 1
            }
            guard let last else { return deleted }
            deleted += try await db.write("DELETE FROM vault_events WHERE seq <= ? AND created_at < ? RETURNING seq", [last, before]).count
            if old < rows.count || rows.count < 1000 { return deleted }
        }
    }
}
