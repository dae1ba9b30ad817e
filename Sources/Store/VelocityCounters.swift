import Foundation

/// Velocity counters (docs/velocity.md): how many attempts and declines each scope key (a
/// session, a BIN, a fingerprint, a peer uid, a customer) had per action, in buckets of
/// `width` seconds. A window of a rule is the sum of its last buckets (an approximate sliding
/// window: it slides one bucket at a time). Being in the store, the counters are shared by every
/// sidecar on one PostgreSQL. The rows hold no card data: a key is a session or customer id, a
/// uid, a BIN (6 digits) or a fingerprint (a keyed hash), all stored beside tokens already.
public struct VelocityCounters: Sendable {
    /// One counter: a scope's key, the action and what is counted, and its bucket width.
    public struct Counter: Hashable, Sendable {
        public var scope: String, key: String, action: String, kind: String, width: Int
        public init(scope: String, key: String, action: String, kind: String, width: Int) {
            (self.scope, self.key, self.action, self.kind, self.width) = (scope, key, action, kind, width)
        }
    }

    let db: Database

    public init(database: Database) { db = database }

    /// `vault_velocity`: one row per counter and bucket (the bucket's start, Unix seconds).
    static let migration = Migration("0014-velocity") { (d: Dialect) in
        [
            """
            CREATE TABLE vault_velocity (scope TEXT NOT NULL, key TEXT NOT NULL, action TEXT NOT NULL, kind TEXT NOT NULL,
                width \(d.int) NOT NULL, bucket \(d.int) NOT NULL, count \(d.int) NOT NULL, PRIMARY KEY (scope, key, action, kind, width, bucket))
            """,
            "CREATE INDEX vault_velocity_bucket ON vault_velocity (bucket)",
        ]
    }

    /// The start of the bucket of width `width` holding `t` (Unix seconds).
    public static func bucket(_ t: Int64, width: Int) -> Int64 { t - ((t % Int64(width)) + Int64(width)) % Int64(width) }

    /// The buckets of each counter from `since[counter]` on (Unix seconds): counter → (bucket start, count), in one statement.
    public func buckets(_ since: [Counter: Int64]) async throws(StoreError) -> [Counter: [(bucket: Int64, count: Int)]] {
        guard !since.isEmpty else { return [:] }
        var clauses: [String] = [], args: [any SQLBindable] = []
        for (c, from) in since {
            clauses.append("(scope = ? AND key = ? AND action = ? AND kind = ? AND width = ? AND bucket >= ?)")
            args += [c.scope, c.key, c.action, c.kind, c.width, from]
        }
        var out: [Counter: [(bucket: Int64, count: Int)]] = [:]
        let rows = try await db.query(
            "SELECT scope, key, action, kind, width, bucket, count FROM vault_velocity WHERE " + clauses.joined(separator: " OR "), args)
        for r in rows {
            let c = Counter(scope: try r.string(0), key: try r.string(1), action: try r.string(2), kind: try r.string(3), width: try r.int(4))
            out[c, default: []].append((Int64(try r.int(5)), try r.int(6)))
        }
        return out
    }

    /// Adds one to each counter's bucket holding `now` (Unix seconds), in one statement; the new
    /// counts, in the order of `counters` (duplicates are counted once).
    @discardableResult
    public func add(_ counters: [Counter], now: Int64) async throws(StoreError) -> [Counter: Int] {
        var unique: [Counter] = []
        for c in counters where !unique.contains(c) { unique.append(c) }
        guard !unique.isEmpty else { return [:] }
        var args: [any SQLBindable] = []
        for c in unique { args += [c.scope, c.key, c.action, c.kind, c.width, Self.bucket(now, width: c.width)] }
        let values = unique.map { _ in "(?, ?, ?, ?, ?, ?, 1)" }.joined(separator: ", ")
        let rows = try await db.write("""
            INSERT INTO vault_velocity (scope, key, action, kind, width, bucket, count) VALUES \(values)
            ON CONFLICT (scope, key, action, kind, width, bucket) DO UPDATE SET count = vault_velocity.count + 1
            RETURNING scope, key, action, kind, width, count
            """, args)
        var out: [Counter: Int] = [:]
        for r in rows {
            out[Counter(scope: try r.string(0), key: try r.string(1), action: try r.string(2), kind: try r.string(3), width: try r.int(4))] = try r.int(5)
        }
        return out
    }

    /// Deletes the buckets no window can reach at `now` (Unix seconds), whatever the rules of the
    /// sidecar asking: a window spans at most 10 buckets of its width, so a bucket older than 11
    /// widths is dead (sidecars sharing the store with other rules keep theirs).
    public func prune(now: Int64) async throws(StoreError) {
        try await db.write("DELETE FROM vault_velocity WHERE bucket < ? - 11 * width", [now])
    }

    /// Writes a `velocity.limited` event (docs/events.md) with `data`, a JSON object (the refused
    /// rule, no card data), for the object `id`.
    public func limitedEvent(id: String, data: String, now: Date) async throws(StoreError) {
        try await db.write(
            "INSERT INTO vault_events (type, object_type, object_id, data, created_at) VALUES ('velocity.limited', 'velocity', ?, ?, ?)",
            [id, data, Millis.of(now)])
    }
}

extension Migrations {
    static let velocity = VelocityCounters.migration
}
