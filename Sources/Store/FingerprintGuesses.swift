import Foundation

/// The gateway's guessing limit (DESIGN §9, docs/threat-model.md "The fingerprint oracle"): per
/// truncation group (a card's visible prefix, last 4 and length), the distinct cards the gateway
/// fingerprinted in a sliding window. A fingerprint is an oracle: whoever may ask for one can test
/// guesses of a card's hidden digits against a stored fingerprint, and every guess of one card
/// falls in that card's group. A group admits `limit` distinct cards a window; once its window
/// holds `limit`, every fingerprint of the group is withheld, of new cards and of cards counted
/// already alike (were a counted card still answered, "answered" among "withheld" would name the
/// stored card), until the oldest leaves the window.
///
/// In the gateway's store (shared by every gateway on one PostgreSQL, a gateway-zone table):
/// `vault_fingerprint_guesses`, one row per group and card, both named by keyed hashes the
/// gateway makes with its fingerprint key (never in clear): `counted` cards with the time they
/// were first counted, and withheld ones with the time they were first withheld (so that a card
/// asked about again, by the sidecar's filler, is reported once a window). Rows older than the
/// window are deleted as they are met, and by `prune`.
public struct FingerprintGuesses: Sendable {
    /// The verdict on one card.
    public struct Verdict: Sendable, Equatable {
        /// Whether its fingerprint may be answered.
        public var admitted: Bool
        /// The distinct cards counted in its group's window (itself included when it was counted).
        public var count: Int
        /// Withheld, and for the first time in the window (what the gateway reports and audits).
        public var firstWithheld: Bool
        public init(admitted: Bool, count: Int, firstWithheld: Bool = false) {
            (self.admitted, self.count, self.firstWithheld) = (admitted, count, firstWithheld)
        }
    }

    let db: Database

    public init(database: Database) { db = database }

    /// `vault_fingerprint_guesses`.
    static let migration = Migration("0015-fingerprint-guesses", zone: .gateway) { (d: Dialect) in
        [
            """
            CREATE TABLE vault_fingerprint_guesses (grp TEXT NOT NULL, member TEXT NOT NULL, seen_at \(d.int) NOT NULL,
                counted \(d.bool) NOT NULL, PRIMARY KEY (grp, member))
            """,
            "CREATE INDEX vault_fingerprint_guesses_seen ON vault_fingerprint_guesses (seen_at)",
        ]
    }

    /// A group's rows in the window: the cards counted, and those withheld.
    struct Window {
        var counted = Set<String>(), withheld = Set<String>()
    }

    /// Decides each (group, member) pair in order, at `now` (Unix milliseconds), with at most
    /// `limit` distinct members per group counted in the last `window` milliseconds: while a
    /// group has fewer, a counted member is answered (no write) and a new one is counted and
    /// answered; once it has `limit`, every member is withheld. Anything to write is decided in
    /// one transaction (on PostgreSQL under a lock per group, so gateways sharing the store never
    /// let a group past its limit together).
    public func admit(_ items: [(group: String, member: String)], limit: Int, window: Int64, now: Int64) async throws(StoreError) -> [Verdict] {
        guard !items.isEmpty else { return [] }
        let from = now - window
        let groups = Set(items.map(\.group)).sorted()
        // What needs no write: a counted card of a group with room, a card withheld already of a
        // full group (most tokenizes of a card seen before, and the filler's repeated asks).
        // A group is decided without a write only when every item of it in this batch is: a new
        // card earlier in the batch could fill the group before a counted one later in it.
        let seen = try await Self.windows(groups, from: from, in: db)
        var verdicts = [Verdict?](repeating: nil, count: items.count)
        var written = Set<String>()
        for (i, item) in items.enumerated() {
            let w = seen[item.group] ?? Window()
            if w.counted.count < limit, w.counted.contains(item.member) {
                verdicts[i] = Verdict(admitted: true, count: w.counted.count)
            } else if w.counted.count >= limit, w.withheld.contains(item.member) || w.counted.contains(item.member) {
                verdicts[i] = Verdict(admitted: false, count: w.counted.count)
            } else {
                written.insert(item.group)
            }
        }
        let undecided = items.indices.filter { written.contains(items[$0].group) }
        guard !undecided.isEmpty else { return verdicts.map { $0! } }
        let decided = try await db.transaction { (tx) throws(StoreError) -> [Int: Verdict] in
            let touched = Set(undecided.map { items[$0].group }).sorted()
            if tx.dialect.backend == .postgres {
                for g in touched { try await tx.query("SELECT pg_advisory_xact_lock(?)", [Self.lockKey(g)]) }
            }
            var out: [Int: Verdict] = [:]
            for g in touched {
                try await tx.query("DELETE FROM vault_fingerprint_guesses WHERE grp = ? AND seen_at <= ?", [g, from])
                var w = Window()
                for row in try await tx.query("SELECT member, counted FROM vault_fingerprint_guesses WHERE grp = ?", [g]) {
                    if try row.bool(1) { w.counted.insert(try row.string(0)) } else { w.withheld.insert(try row.string(0)) }
                }
                for i in undecided where items[i].group == g {
                    let m = items[i].member
                    if w.counted.count >= limit {
                        let first = !w.counted.contains(m) && !w.withheld.contains(m)
                        if first {
                            try await tx.query(
                                "INSERT INTO vault_fingerprint_guesses (grp, member, seen_at, counted) VALUES (?, ?, ?, FALSE)", [g, m, now])
                            w.withheld.insert(m)
                        }
                        out[i] = Verdict(admitted: false, count: w.counted.count, firstWithheld: first)
                    } else if w.counted.contains(m) {
                        out[i] = Verdict(admitted: true, count: w.counted.count)
                    } else {
                        if w.withheld.remove(m) != nil {
                            try await tx.query(
                                "UPDATE vault_fingerprint_guesses SET counted = TRUE, seen_at = ? WHERE grp = ? AND member = ?", [now, g, m])
                        } else {
                            try await tx.query(
                                "INSERT INTO vault_fingerprint_guesses (grp, member, seen_at, counted) VALUES (?, ?, ?, TRUE)", [g, m, now])
                        }
                        w.counted.insert(m)
                        out[i] = Verdict(admitted: true, count: w.counted.count)
                    }
                }
            }
            return out
        }
        for (i, v) in decided { verdicts[i] = v }
        return verdicts.map { $0! }
    }

    /// The windows of `groups` from `from` on, in one statement.
    static func windows(_ groups: [String], from: Int64, in db: Database) async throws(StoreError) -> [String: Window] {
        let marks = Array(repeating: "?", count: groups.count).joined(separator: ", ")
        var out: [String: Window] = [:]
        for row in try await db.query(
            "SELECT grp, member, counted FROM vault_fingerprint_guesses WHERE grp IN (\(marks)) AND seen_at > ?", groups + [from] as [any SQLBindable])
        {
            let g = try row.string(0), m = try row.string(1)
            if try row.bool(2) { out[g, default: Window()].counted.insert(m) } else { out[g, default: Window()].withheld.insert(m) }
        }
        return out
    }

    /// Deletes the rows first counted before `now − window` (milliseconds).
    public func prune(window: Int64, now: Int64) async throws(StoreError) {
        _ = try await db.write("DELETE FROM vault_fingerprint_guesses WHERE seen_at <= ?", [now - window])
    }

    /// The rows held (tests, metrics).
    public func count() async throws(StoreError) -> Int {
        try await db.query("SELECT COUNT(*) FROM vault_fingerprint_guesses")[0].int(0)
    }

    /// The advisory lock of a group: 60 bits of its (hex) name.
    static func lockKey(_ group: String) -> Int64 {
        Int64(group.prefix(15), radix: 16) ?? 0
    }
}
