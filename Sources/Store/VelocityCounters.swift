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
    /// The window reads of concurrent requests, one statement for several (PostgreSQL).
    let reads: CoalescedReads?

    /// Counters over a migrated store. `coalesce`: whether reads that arrive while one is on the
    /// wire go together in the next statement (`CoalescedReads`); by default on PostgreSQL, where
    /// a read is a round trip, and not on SQLite, where it runs on the calling thread.
    public init(database: Database, coalesce: Bool? = nil) {
        db = database
        reads = coalesce ?? (database.dialect.backend == .postgres)
            ? CoalescedReads { (since) throws(StoreError) in try await VelocityCounters.read(since, in: database) } : nil
    }

    /// Statements the coalesced reads have run so far (tests); nil when reads are not coalesced.
    public var coalescedStatements: Int? { reads?.statements }

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

    /// The buckets of each counter from `since[counter]` on (Unix seconds): counter → (bucket
    /// start, count), in one statement (shared with concurrent reads on PostgreSQL: `CoalescedReads`).
    public func buckets(_ since: [Counter: Int64]) async throws(StoreError) -> [Counter: [(bucket: Int64, count: Int)]] {
        guard !since.isEmpty else { return [:] }
        if let reads { return try await reads.read(since) }
        return try await Self.read(since, in: db)
    }

    /// `buckets` as one statement of its own.
    static func read(_ since: [Counter: Int64], in db: Database) async throws(StoreError) -> [Counter: [(bucket: Int64, count: Int)]] {
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

/// The velocity window reads of concurrent requests, coalesced: reads that arrive while one is on
/// the wire wait and go together in the next statement (their counters merged, each from the
/// earliest bucket any of them asks), and each gets its own counters' buckets from its own `since`
/// on. On PostgreSQL a read is a round trip that costs the sidecar and the server more than the
/// statement's own work (issue 16: with the default rules the velocity read was about a fifth of
/// the CPU of a payment and a tenth of a tokenize's); one statement now serves the reads that
/// overlap. A lone read goes at once (no timer). Being no older than an independent read would
/// be, a coalesced one keeps the limiter's guarantee (docs/velocity.md).
///
/// `LeaderBatches` runs them: one statement is on the wire at a time; with the default rules a
/// request reads one to three counters, so the reads queued behind a statement go in the next one.
/// A failed statement fails every read of its batch, and a leading request that is cancelled (its
/// client gone) does not fail the others' reads.
final class CoalescedReads: Sendable {
    typealias Since = [VelocityCounters.Counter: Int64]
    typealias Buckets = [VelocityCounters.Counter: [(bucket: Int64, count: Int)]]
    typealias Run = @Sendable (Since) async throws(StoreError) -> Buckets
    /// At most this many counters in one statement (six binds each: it stays a prepared statement,
    /// `PostgresStatements.maxParameters`), but always at least one whole read (a read with more
    /// goes alone).
    static let maxCounters = 21

    private let batches: LeaderBatches<Since, Result<Buckets, StoreError>>

    /// `run`: one statement for the merged counters (`VelocityCounters.read`; tests give their own).
    init(_ run: @escaping Run) {
        batches = LeaderBatches(take: Self.take) { reads in
            let merged = Self.merge(reads)
            let all: Result<Buckets, StoreError>
            do throws(StoreError) { all = .success(try await run(merged)) } catch { all = .failure(error) }
            return reads.map { since in all.map { Self.part($0, since) } }
        }
    }

    /// Statements run so far (tests).
    var statements: Int { batches.batches }
    /// Reads waiting for a statement (tests).
    var queued: Int { batches.queued }

    func read(_ since: Since) async throws(StoreError) -> Buckets {
        try await batches.submit(since).get()
    }

    /// How many of the queued reads go in the next statement: while their counters stay within
    /// `maxCounters` (the first always).
    static func take(_ reads: [Since]) -> Int {
        var merged: Since = [:]
        for (n, since) in reads.enumerated() {
            merged.merge(since) { min($0, $1) }
            if n > 0, merged.count > maxCounters { return n }
        }
        return reads.count
    }

    /// The counters of `reads`, each from the earliest bucket any of them asks.
    static func merge(_ reads: [Since]) -> Since {
        reads.reduce(into: [:]) { merged, since in merged.merge(since) { min($0, $1) } }
    }

    /// The buckets of `since`'s counters, each from its own start on.
    static func part(_ all: Buckets, _ since: [VelocityCounters.Counter: Int64]) -> Buckets {
        var out: Buckets = [:]
        for (c, from) in since {
            guard let rows = all[c] else { continue }
            let kept = rows.filter { $0.bucket >= from }
            if !kept.isEmpty { out[c] = kept }
        }
        return out
    }
}
