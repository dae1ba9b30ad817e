import Dispatch
import Foundation
import Logging
import Store
import VaultCrypto
import VaultOpen

/// Recomputes stored card fingerprints under the primary fingerprint key
/// (`vault rewrap --fingerprints`, docs/key-files.md "Rotating the fingerprint key").
///
/// It opens envelopes, so it runs in the gateway's zone with the secret keys and the fingerprint
/// keys. It walks the tokens and the stored instruments whose fingerprint is not named by the
/// primary's kid (a previous key's, or the legacy bare hex), in id order and in batches; for each
/// row it opens the envelope (with the metadata check), computes the card's fingerprint under
/// every key held, links the stored one and those to the new one (so a lookup by the old one
/// still finds the card), and swaps the new one in with compare-and-swap: a row the sidecar
/// changed meanwhile is left alone and read again by the next run.
///
/// Resumable: the rows it picks are exactly those not yet under the primary, so a run after a
/// kill does the rest and nothing twice; links are written before the row, and writing them again
/// changes nothing.
public struct FingerprintRecomputer: Sendable {
    /// A table holding fingerprints: its id column, and whether its envelope carries the
    /// fingerprint too (stored instruments do).
    struct Table: Sendable {
        let name: String
        let table: String
        let idColumn: String
        let envelopeCarriesIt: Bool
    }

    static let tables = [
        Table(name: "tokens", table: "vault_tokens", idColumn: "token", envelopeCarriesIt: false),
        Table(name: "instruments", table: "vault_instruments", idColumn: "id", envelopeCarriesIt: true),
    ]

    let db: Database
    let opener: EnvelopeOpener
    let keys: FingerprintKeys
    let batchSize: Int
    let workers: Int
    let maxRate: Double?
    let logger: Logger

    /// - Throws: `FINGERPRINT_KEY_MISSING` when `opener` holds no fingerprint key.
    public init(
        database: Database, opener: EnvelopeOpener, batchSize: Int = 256, workers: Int = ProcessInfo.processInfo.activeProcessorCount,
        maxRate: Double? = nil, logger: Logger
    ) throws(VaultError) {
        guard let keys = opener.fingerprintKeys else {
            throw VaultError(.fingerprintKeyMissing, "recomputing fingerprints needs the fingerprint keys (fingerprint.fk in the keys directory)")
        }
        db = database
        self.opener = opener
        self.keys = keys
        self.batchSize = max(1, batchSize)
        self.workers = max(1, workers)
        self.maxRate = maxRate.flatMap { $0 > 0 ? $0 : nil }
        self.logger = logger
    }

    /// The primary's prefix: `fp1_<fkid>_`.
    var primaryPrefix: String { FingerprintName.prefix + keys.primary.kid + "_" }

    /// Rows whose stored fingerprint is not the primary key's (what a run has left to do).
    public static func remaining(in db: Database, primaryKid: String) async throws(StoreError) -> Int {
        var n = 0
        for t in tables {
            n += try await db.query(
                "SELECT COUNT(*) FROM \(t.table) WHERE fingerprint IS NOT NULL AND substr(fingerprint, 1, 21) <> ?",
                [FingerprintName.prefix + primaryKid + "_"]
            ).first?.int(0) ?? 0
        }
        return n
    }

    /// One run over both tables. Counts: `rewrapped` = fingerprints recomputed, `skipped` = rows
    /// changed meanwhile (left for the next run), `failed` = envelopes that did not open or check.
    public func run(progress: @Sendable (Rewrapper.Progress) -> Void = { _ in }) async throws -> Rewrapper.Counts {
        var total = Rewrapper.Counts()
        let clock = ContinuousClock(), start = clock.now
        for t in Self.tables {
            let rowTotal = try await db.query(
                "SELECT COUNT(*) FROM \(t.table) WHERE fingerprint IS NOT NULL AND substr(fingerprint, 1, 21) <> ?", [primaryPrefix]
            ).first?.int(0) ?? 0
            var cursor = "", done = 0
            let tableStart = clock.now
            while true {
                // A cancelled run (SIGINT, a test) stops between batches: what is written stays.
                try Task.checkCancellation()
                if let maxRate {
                    let due = tableStart + .milliseconds(Int(Double(done) / maxRate * 1000))
                    if due > clock.now { try await Task.sleep(until: due, clock: clock) }
                }
                let rows = try await db.query(
                    """
                    SELECT \(t.idColumn), envelope, fingerprint FROM \(t.table)
                    WHERE \(t.idColumn) > ? AND fingerprint IS NOT NULL AND substr(fingerprint, 1, 21) <> ?
                    ORDER BY \(t.idColumn) LIMIT ?
                    """, [cursor, primaryPrefix, batchSize]
                ).map { (r) throws(StoreError) in Row(id: try r.string(0), envelope: try r.string(1), fingerprint: try r.string(2)) }
                guard let last = rows.last else { break }
                cursor = last.id
                let counts = try await apply(t, rows, recomputeAll(rows, carried: t.envelopeCarriesIt))
                total = total + counts
                done += rows.count
                progress(Rewrapper.Progress(table: t.name, done: done, total: max(rowTotal, done), counts: total, elapsed: clock.now - start))
            }
        }
        return total
    }

    struct Row: Sendable {
        let id: String
        let envelope: String
        let fingerprint: String
    }

    enum Outcome: Sendable {
        /// The card's fingerprints under every key (primary first) and the row's new envelope
        /// JSON when the envelope carries the fingerprint.
        case recomputed([String], envelope: String?)
        case failed(String)
    }

    /// Writes a batch: links first (a lookup by the old fingerprint finds the new one from then
    /// on), then the rows, compare-and-swap (a row changed meanwhile is skipped, done next run).
    func apply(_ t: Table, _ rows: [Row], _ outcomes: [Outcome]) async throws -> Rewrapper.Counts {
        var counts = Rewrapper.Counts()
        var changes: [[SQLValue]] = [], envelopeChanges: [[SQLValue]] = []
        for (row, outcome) in zip(rows, outcomes) {
            switch outcome {
            case .failed(let code):
                counts.failed += 1
                logger.error("fingerprint not recomputed", metadata: ["table": "\(t.name)", "id": "\(row.id)", "error": "\(code)"])
            case .recomputed(let all, let envelope):
                try await FingerprintLinks.record([row.fingerprint] + all, in: db)
                if let envelope {
                    envelopeChanges.append([.text(all[0]), .text(envelope), .text(row.id), .text(row.envelope)])
                } else {
                    changes.append([.text(all[0]), .text(row.id), .text(row.fingerprint)])
                }
            }
        }
        for (sql, lists) in [
            ("UPDATE \(t.table) SET fingerprint = ? WHERE \(t.idColumn) = ? AND fingerprint = ? RETURNING \(t.idColumn)", changes),
            ("UPDATE \(t.table) SET fingerprint = ?, envelope = ? WHERE \(t.idColumn) = ? AND envelope = ? RETURNING \(t.idColumn)", envelopeChanges),
        ] where !lists.isEmpty {
            let applied = try await db.batch(sql, lists).filter { !$0.isEmpty }.count
            counts.rewrapped += applied
            counts.skipped += lists.count - applied
        }
        return counts
    }

    /// Recomputes a batch, the crypto spread over `workers` threads.
    func recomputeAll(_ rows: [Row], carried: Bool) -> [Outcome] {
        parallelMap(rows, workers: workers, placeholder: .failed("none")) { recompute($0, carried: carried) }
    }

    /// Opens one row's envelope and computes its card's fingerprints under every key held; for a
    /// table whose envelope carries the fingerprint, the envelope with the new one. The stored
    /// fingerprint is not checked against them: it may be a retired key's.
    func recompute(_ row: Row, carried: Bool) -> Outcome {
        do throws(VaultError) {
            var envelope = try CardEnvelope(json: row.envelope)
            let opened = try opener.open(envelope)
            let all = opened.card.number.withUnsafeBytes { keys.namedFingerprints(ofDigits: $0) }
            // The envelope's own fingerprint is rewritten too where the table keeps it there
            // (instruments) and where an older version sealed one into it (tokens): left under a
            // retired key, the gateway's check would refuse the envelope.
            guard carried || envelope.card.fingerprint != nil else { return .recomputed(all, envelope: nil) }
            envelope.card.fingerprint = all[0]
            return .recomputed(all, envelope: envelope.json)
        } catch {
            return .failed(error.code.rawValue)
        }
    }
}
