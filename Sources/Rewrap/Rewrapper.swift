import Dispatch
import Foundation
import Logging
import Tokenizer
import VaultCrypto
import VaultOpen

/// Re-seals every stored envelope that is not sealed to the primary key (`vault rewrap`).
///
/// It needs the secret keys, so it runs in the gateway's zone, never in the sidecar. It walks each
/// envelope table in id order in batches; for a row sealed to another kid it opens the envelope
/// (with the metadata check), seals the same card again to the primary under the same envelope id
/// (the processor's ledger knows envelopes by id), and swaps it in with compare-and-swap, so a row
/// the sidecar changed meanwhile (deleted, consumed, CVC dropped) is never overwritten with an
/// older copy. Such rows are read again in a later pass.
///
/// Nothing to resume from: a run after a kill finds the rows already rewrapped sealed to the
/// primary and skips them. Each batch is one durable transaction.
public struct Rewrapper: Sendable {
    /// What a run did.
    public struct Counts: Sendable, Equatable {
        /// Sealed again to the primary.
        public var rewrapped = 0
        /// Already sealed to the primary, or gone (deleted meanwhile).
        public var skipped = 0
        /// Could not be opened or checked (the code is logged with the row id).
        public var failed = 0
        public init() {}
        static func + (a: Counts, b: Counts) -> Counts {
            var c = a
            c.rewrapped += b.rewrapped
            c.skipped += b.skipped
            c.failed += b.failed
            return c
        }
    }

    /// Where a run stands, for the progress display.
    public struct Progress: Sendable {
        public var table: String
        public var done: Int
        public var total: Int
        public var counts: Counts
        public var elapsed: Duration
    }

    let opener: EnvelopeOpener
    let primary: PublicKey
    let tables: [any EnvelopeTable]
    let batchSize: Int
    let workers: Int
    let logger: Logger
    /// At most this many rows per second (nil: as fast as it goes), to spare a busy store.
    let maxRate: Double?

    /// A rewrapper sealing to `ring`'s primary (the ring must be pinned to a key ring description).
    /// - Throws: `KEY_RING_NOT_FOUND` without a description, `KEY_MISMATCH` when the primary's
    ///   secret key is not held (the ring checks it when pinned).
    public init(
        ring: KeyRing, tables: [any EnvelopeTable], batchSize: Int = 256, workers: Int = ProcessInfo.processInfo.activeProcessorCount,
        maxRate: Double? = nil, logger: Logger
    ) throws(VaultError) {
        guard let description = ring.pinned, let primary = ring.publicKey(for: description.primary) else {
            throw VaultError(.keyRingNotFound, "rewrap needs the key ring (ring.json) to know the primary key")
        }
        self.opener = EnvelopeOpener(ring: ring)
        self.primary = primary
        self.tables = tables
        self.batchSize = max(1, batchSize)
        self.workers = max(1, workers)
        self.logger = logger
        self.maxRate = maxRate.flatMap { $0 > 0 ? $0 : nil }
    }

    /// Runs passes over every table until a pass changes nothing more (at most `maxPasses`).
    public func run(maxPasses: Int = 3, progress: @Sendable (Progress) -> Void = { _ in }) async throws -> Counts {
        var total = Counts()
        let clock = ContinuousClock(), start = clock.now
        for table in tables {
            var pass = 0, lost = 0
            repeat {
                pass += 1
                let rowTotal = try await table.rowCount()
                let before = total, first = pass == 1
                let (counts, lostNow) = try await runPass(table, rowTotal: rowTotal) { done, counts in
                    progress(Progress(table: table.name, done: done, total: rowTotal, counts: first ? before + counts : before, elapsed: clock.now - start))
                }
                if first {
                    total = total + counts
                } else {
                    // Later passes settle only the rows lost to a concurrent change last time:
                    // rewrapped now, or gone (deleted, or rewrapped by another run).
                    total.rewrapped += counts.rewrapped
                    total.skipped += max(0, lost - counts.rewrapped - lostNow)
                }
                lost = lostNow
            } while lost > 0 && pass < maxPasses
            if lost > 0 {
                total.failed += lost
                logger.warning("rows kept changing during rewrap; run it again", metadata: ["table": "\(table.name)", "rows": "\(lost)"])
            }
        }
        return total
    }

    /// One pass over a table: returns its counts and how many rows were lost to concurrent changes.
    private func runPass(
        _ table: any EnvelopeTable, rowTotal: Int, report: (Int, Counts) -> Void
    ) async throws -> (Counts, Int) {
        var counts = Counts()
        var cursor: String?
        var done = 0, lost = 0
        let clock = ContinuousClock(), start = clock.now
        while true {
            if let maxRate {
                let due = start + .milliseconds(Int(Double(done) / maxRate * 1000))
                if due > clock.now { try await Task.sleep(until: due, clock: clock) }
            }
            let rows = try await table.rows(after: cursor, limit: batchSize)
            guard let last = rows.last else { break }
            cursor = last.id
            let outcomes = rewrapAll(rows)
            var changes: [EnvelopeChange] = []
            for (row, outcome) in zip(rows, outcomes) {
                switch outcome {
                case .current: counts.skipped += 1
                case .failed(let code):
                    counts.failed += 1
                    logger.error("envelope not rewrapped", metadata: ["table": "\(table.name)", "id": "\(row.id)", "error": "\(code)"])
                case .change(let change): changes.append(change)
                }
            }
            if !changes.isEmpty {
                let applied = try await table.replace(changes)
                let n = applied.filter { $0 }.count
                counts.rewrapped += n
                lost += changes.count - n
            }
            done += rows.count
            report(done, counts)
        }
        return (counts, lost)
    }

    enum Outcome: Sendable {
        case current
        case change(EnvelopeChange)
        case failed(String)
    }

    /// Rewraps a batch, the crypto spread over `workers` threads.
    func rewrapAll(_ rows: [EnvelopeRow]) -> [Outcome] {
        parallelMap(rows, workers: workers, placeholder: .current) { rewrap($0) }
    }

    /// Rewraps one row; `.current` when it is sealed to the primary already.
    func rewrap(_ row: EnvelopeRow) -> Outcome {
        do throws(VaultError) {
            var envelope = try CardEnvelope(json: row.envelope)
            if envelope.kid == primary.kid { return .current }
            if let cvc = row.cvc { envelope.fields[.cvc] = cvc }
            let opened = try opener.open(envelope)
            let sealed = CardEnvelope.seal(opened.card, metadata: envelope.card, to: primary, id: envelope.id)
            let cvc = row.cvc == nil ? nil : sealed.fields[.cvc]
            return .change(EnvelopeChange(row: row, envelope: sealed.droppingCVC().json, cvc: cvc))
        } catch {
            return .failed(error.code.rawValue)
        }
    }
}
