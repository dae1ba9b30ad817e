import Foundation

/// The gateway's guessing limit (DESIGN §9, docs/threat-model.md "The fingerprint oracle"): per
/// truncation group (a card's visible prefix, last 4 and length), the distinct cards the gateway
/// fingerprinted in a sliding window. A fingerprint is an oracle: whoever may ask for one can test
/// guesses of a card's hidden digits against a stored fingerprint, and every guess of one card
/// falls in that card's group. A group admits `limit` distinct cards a window; once its window
/// holds `limit`, every fingerprint of the group is withheld, of new cards and of cards counted
/// already alike, until the oldest leaves the window.
///
/// Nothing may tell a counted card from a new one once they are withheld: not the answer, not the
/// audit line (each card's first withholding in the window is reported, counted or new), not a
/// write (every withholding writes the card's row), not the gateway's metric (every withheld
/// answer counts). Every card is decided under its group's lock (a transaction; on PostgreSQL also
/// an advisory lock per group), so that concurrent calls never let a counted card through while
/// new ones fill the group.
///
/// In the gateway's store (shared by every gateway on one PostgreSQL, a gateway-zone table):
/// `vault_fingerprint_guesses`, one row per group and card, both named by keyed hashes the
/// gateway makes with its fingerprint key (never in clear), with when the card was first counted
/// and first withheld in the window. Rows out of the window are deleted as they are met, and by
/// `prune`.
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

    /// `vault_fingerprint_guesses`: `counted_at` and `withheld_at` (Unix milliseconds, or NULL),
    /// `seen_at` the later of them (what pruning walks).
    static let migration = Migration("0015-fingerprint-guesses", zone: .gateway) { (d: Dialect) in
        [
            """
            CREATE TABLE vault_fingerprint_guesses (grp TEXT NOT NULL, member TEXT NOT NULL, counted_at \(d.int), withheld_at \(d.int),
                seen_at \(d.int) NOT NULL, PRIMARY KEY (grp, member))
            """,
            "CREATE INDEX vault_fingerprint_guesses_seen ON vault_fingerprint_guesses (seen_at)",
            // A group's counted cards, however many it has withheld (a guesser's thousands).
            "CREATE INDEX vault_fingerprint_guesses_counted ON vault_fingerprint_guesses (grp, counted_at)",
        ]
    }

    /// A group's cards in the window: counted, and withheld (each since when, or absent).
    struct Window {
        var counted = Set<String>(), withheld = Set<String>(), rows = Set<String>()
    }

    /// Decides each (group, member) pair in order, at `now` (Unix milliseconds), with at most
    /// `limit` distinct members per group counted in the last `window` milliseconds: while a
    /// group has fewer, a counted member is answered and a new one is counted and answered; once
    /// it has `limit`, every member is withheld, and each one's first withholding in the window
    /// is recorded and reported (`firstWithheld`).
    public func admit(_ items: [(group: String, member: String)], limit: Int, window: Int64, now: Int64) async throws(StoreError) -> [Verdict] {
        guard !items.isEmpty else { return [] }
        let from = now - window
        var verdicts = [Verdict?](repeating: nil, count: items.count)
        let locked = Set(items.map(\.group))
        let undecided = Array(items.indices)
        let decided = try await db.transaction { (tx) throws(StoreError) -> [Int: Verdict] in
            let touched = locked.sorted()
            if tx.dialect.backend == .postgres {
                for g in touched { try await tx.query("SELECT pg_advisory_xact_lock(?)", [Self.lockKey(g)]) }
            }
            var out: [Int: Verdict] = [:]
            for g in touched {
                var w = try await Self.window(g, members: Set(undecided.filter { items[$0].group == g }.map { items[$0].member }), from: from, in: tx)
                for i in undecided where items[i].group == g {
                    let m = items[i].member
                    if w.counted.count >= limit {
                        let first = !w.withheld.contains(m)
                        if first {
                            try await Self.mark(g, m, column: "withheld_at", at: now, exists: w.rows.contains(m), in: tx)
                            w.withheld.insert(m)
                            w.rows.insert(m)
                        } else {
                            // The same write as a first withholding's: no timing tells them apart.
                            try await tx.query("UPDATE vault_fingerprint_guesses SET seen_at = ? WHERE grp = ? AND member = ?", [now, g, m])
                        }
                        out[i] = Verdict(admitted: false, count: w.counted.count, firstWithheld: first)
                    } else if w.counted.contains(m) {
                        out[i] = Verdict(admitted: true, count: w.counted.count)
                    } else {
                        try await Self.mark(g, m, column: "counted_at", at: now, exists: w.rows.contains(m), in: tx)
                        w.counted.insert(m)
                        w.rows.insert(m)
                        out[i] = Verdict(admitted: true, count: w.counted.count)
                    }
                }
            }
            return out
        }
        for (i, v) in decided { verdicts[i] = v }
        return verdicts.map { $0! }
    }

    /// Sets `column` of a card's row to `at` (and `seen_at`), making the row when there is none.
    static func mark(_ group: String, _ member: String, column: String, at t: Int64, exists: Bool, in tx: Transaction) async throws(StoreError) {
        if exists {
            try await tx.query("UPDATE vault_fingerprint_guesses SET \(column) = ?, seen_at = ? WHERE grp = ? AND member = ?", [t, t, group, member])
        } else {
            try await tx.query("INSERT INTO vault_fingerprint_guesses (grp, member, \(column), seen_at) VALUES (?, ?, ?, ?)", [group, member, t, t])
        }
    }

    /// A group's window at `from`: its counted cards (at most the limit, through their index), and
    /// of `members` those withheld and those with a row. Each read is bounded by the limit and the
    /// batch, never by how many cards the group has withheld. Rows out of the window are left to
    /// `prune`; every read compares the times with `from`.
    static func window(_ group: String, members: Set<String>, from: Int64, in tx: Transaction) async throws(StoreError) -> Window {
        var w = Window()
        for row in try await tx.query("SELECT member FROM vault_fingerprint_guesses WHERE grp = ? AND counted_at > ?", [group, from]) {
            w.counted.insert(try row.string(0))
        }
        let list = members.sorted()
        let marks = Array(repeating: "?", count: list.count).joined(separator: ", ")
        for row in try await tx.query(
            "SELECT member, COALESCE(withheld_at, 0) > ? FROM vault_fingerprint_guesses WHERE grp = ? AND member IN (\(marks))",
            [from, group] + list as [any SQLBindable])
        {
            let m = try row.string(0)
            w.rows.insert(m)
            if try row.bool(1) { w.withheld.insert(m) }
        }
        return w
    }

    /// Deletes the rows out of the window at `now` (milliseconds).
    public func prune(window: Int64, now: Int64) async throws(StoreError) {
        _ = try await db.write("DELETE FROM vault_fingerprint_guesses WHERE seen_at <= ?", [now - window])
    }

    /// The rows held (tests).
    public func count() async throws(StoreError) -> Int {
        try await db.query("SELECT COUNT(*) FROM vault_fingerprint_guesses")[0].int(0)
    }

    /// The advisory lock of a group: 60 bits of its (hex) name.
    static func lockKey(_ group: String) -> Int64 {
        Int64(group.prefix(15), radix: 16) ?? 0
    }
}

