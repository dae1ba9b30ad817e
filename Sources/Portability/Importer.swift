import CardRules
import Dispatch
import Foundation
import Rewrap
import Store
import Tokenizer
import VaultCrypto
import VaultOpen

/// `vault import` (docs/portability.md): cards from a legacy store or a processor's export become
/// tokens of this vault.
///
/// It runs in the gateway's zone: it opens rows sealed to our key (the secret keys) and computes
/// fingerprints (the fingerprint keys). Each row is read through the mapping, checked with the
/// card rules tokenize applies, fingerprinted, and sealed into an envelope v1 to the ring's
/// primary, the crypto spread over the cores (`parallelMap`). A card already stored as a reusable
/// token, or met earlier in the input, yields that token (a duplicate) instead of a new one.
///
/// Resumable: each batch's tokens and its lines' outcomes (`ImportLines`) are written in one
/// durable transaction; a run after a kill starts after the last committed line, so no line ever
/// gets two tokens and the journal (from which the mapping and rejects files are written) is
/// complete.
public struct Importer: Sendable {
    /// What a run did (lines before a resumed run's start are counted too).
    public struct Counts: Sendable, Equatable {
        public var imported = 0
        public var duplicates = 0
        public var rejected = 0
        public init() {}
        public var done: Int { imported + duplicates + rejected }
    }

    /// Where a run stands, for the progress display.
    public struct Progress: Sendable {
        public var done: Int
        public var total: Int
        public var counts: Counts
        public var elapsed: Duration
    }

    let ring: KeyRing
    let primary: PublicKey
    let fingerprintKeys: FingerprintKeys
    let validator: CardValidator
    let batchSize: Int
    let workers: Int
    /// Token lifetime in seconds; nil: until the end of the card's expiry month.
    let ttl: Double?
    /// At most this many lines per second (nil: as fast as it goes), to spare a busy store.
    let maxRate: Double?
    let now: @Sendable () -> Date

    public init(
        ring: KeyRing, primary: PublicKey, fingerprintKeys: FingerprintKeys, validator: CardValidator = CardValidator(),
        batchSize: Int = 2048, workers: Int = ProcessInfo.processInfo.activeProcessorCount, ttl: Double? = nil,
        maxRate: Double? = nil, now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.ring = ring
        self.primary = primary
        self.fingerprintKeys = fingerprintKeys
        self.validator = validator
        self.batchSize = max(1, batchSize)
        self.workers = max(1, workers)
        self.ttl = ttl
        self.maxRate = maxRate.flatMap { $0 > 0 ? $0 : nil }
        self.now = now
    }

    /// The import's id: `imp_` + 32 hex of a keyed BLAKE2b (the primary fingerprint key) of the
    /// format, the mapping and the input. The same command over the same file resumes; a keyed
    /// digest, so that a file of one card cannot be guessed back from it.
    public static func importID(input: SecureBytes, format: ImportFormat, mapping: ImportMapping, key: FingerprintKey) -> String {
        let head = Array("vault-import-v1\n\(format.rawValue)\n\(mapping.canonical)\n\n".utf8)
        let whole = SecureBytes(capacity: head.count + input.count) { out in
            out.copyBytes(from: head)
            input.withUnsafeBytes { if !$0.isEmpty { UnsafeMutableRawBufferPointer(rebasing: out[head.count...]).copyMemory(from: $0) } }
            return head.count + input.count
        }
        return "imp_" + whole.withUnsafeBytes { key.fingerprint(ofDigits: $0) }.prefix(32)
    }

    /// Imports `input` (the whole file) into `db` under `importID`.
    /// - Throws: `IMPORT_MAPPING_INVALID` (the mapping does not fit the header), store errors.
    public func run(
        input: SecureBytes, format: ImportFormat, mapping: ImportMapping, importID: String, db: Database,
        progress: @Sendable (Progress) -> Void = { _ in }
    ) async throws -> Counts {
        let lines = input.withUnsafeBytes { Self.lines($0) }
        var header: [String]? = nil
        var data = lines
        if format == .csv {
            guard let first = lines.first else { throw VaultError(.importMappingInvalid, "the CSV file is empty: it needs a header row", field: "input") }
            header = try input.withUnsafeBytes { (b) throws(VaultError) in try CSVLine.header(UnsafeRawBufferPointer(rebasing: b[first.range])) }
            data.removeFirst()
        }
        let reader = RowReader(format: format, mapping: try mapping.resolved(columns: header), header: header)
        let committed = try await ImportLines.lastLine(importID: importID, in: db)
        var counts = Counts()
        for row in try await ImportLines.rows(importID: importID, in: db) {
            switch row.outcome {
            case "imported": counts.imported += 1
            case "duplicate": counts.duplicates += 1
            default: counts.rejected += 1
            }
        }
        let todo = data.filter { $0.number > committed }
        let total = counts.done + todo.count
        let clock = ContinuousClock(), start = clock.now
        progress(Progress(done: counts.done, total: total, counts: counts, elapsed: .zero))
        // The crypto of the next batch runs (on the workers) while this one commits.
        let batches = stride(from: 0, to: todo.count, by: batchSize).map { Array(todo[$0..<min(todo.count, $0 + batchSize)]) }
        var next = batches.first.map { prepareAll($0, input: input, reader: reader) }
        for (i, batch) in batches.enumerated() {
            let prepared = await next!.value
            next = i + 1 < batches.count ? prepareAll(batches[i + 1], input: input, reader: reader) : nil
            // A cancelled run stops between batches: what is committed stays.
            if Task.isCancelled { next?.cancel(); throw CancellationError() }
            if let maxRate {
                let due = start + .milliseconds(Int(Double(i * batchSize) / maxRate * 1000))
                if due > clock.now { try await Task.sleep(until: due, clock: clock) }
            }
            let batchCounts = try await commit(batch, prepared, importID: importID, db: db)
            counts.imported += batchCounts.imported
            counts.duplicates += batchCounts.duplicates
            counts.rejected += batchCounts.rejected
            progress(Progress(done: counts.done, total: total, counts: counts, elapsed: clock.now - start))
        }
        return counts
    }

    /// A non-blank input line: its 1-based number in the file and its bytes (without newline or CR).
    struct Line: Sendable {
        let number: Int
        let range: Range<Int>
    }

    static func lines(_ bytes: UnsafeRawBufferPointer) -> [Line] {
        var out: [Line] = []
        var start = 0, number = 0
        let n = bytes.count
        while start < n {
            var end = start
            while end < n, bytes[end] != 10 { end += 1 }
            number += 1
            var stop = end
            if stop > start, bytes[stop - 1] == 13 { stop -= 1 }
            if bytes[start..<stop].contains(where: { $0 != 32 && $0 != 9 }) { out.append(Line(number: number, range: start..<stop)) }
            start = end + 1
        }
        return out
    }

    /// Prepares a batch on the workers, off the caller's thread (a dispatch thread waits for them).
    func prepareAll(_ batch: [Line], input: SecureBytes, reader: RowReader) -> Task<[Prepared], Never> {
        Task {
            await withCheckedContinuation { (done: CheckedContinuation<[Prepared], Never>) in
                DispatchQueue.global().async {
                    done.resume(returning: parallelMap(batch, workers: workers, placeholder: Prepared.rejected(VaultError(.importRowMalformed, "not read"))) { line in
                        input.withUnsafeBytes { prepare(UnsafeRawBufferPointer(rebasing: $0[line.range]), reader: reader) }
                    })
                }
            }
        }
    }

    enum Prepared: Sendable {
        /// A new token's record as row values (used unless the card is a duplicate), the
        /// card's fingerprints (the primary key's first) and its expiry (`MM/YYYY`).
        case card(token: String, row: [SQLValue], fingerprints: [String], expiry: String)
        case rejected(VaultError)
    }

    /// Reads, checks, fingerprints and seals one row (the crypto: run on the workers).
    func prepare(_ line: UnsafeRawBufferPointer, reader: RowReader) -> Prepared {
        do throws(VaultError) {
            let row = try reader.read(line)
            let card = try row.card(ring: ring)
            let t = now()
            let metadata = try CardEnvelope.validate(card, validator: validator, now: CalendarMonth(date: t))
            let fingerprints = card.number.withUnsafeBytes { fingerprintKeys.namedFingerprints(ofDigits: $0) }
            let envelope = CardEnvelope.seal(card, metadata: metadata, to: primary)
            let expires = max(ttl.map { t.addingTimeInterval($0) } ?? Self.endOfMonth(card.expiry), t.addingTimeInterval(60))
            let record = TokenRecord(
                token: RandomID.make(prefix: "tok_"), envelope: envelope, cvcField: nil, createdAt: t, expiresAt: expires,
                cvcExpiresAt: nil, singleUse: false, fingerprint: fingerprints[0], metadata: try row.tokenMetadata())
            return .card(token: record.token, row: TokenRows.values(record), fingerprints: fingerprints, expiry: Self.expiryKey(metadata.expMonth, metadata.expYear))
        } catch {
            return .rejected(error)
        }
    }

    /// The first instant after the card's expiry month (UTC): when its token stops resolving.
    static func endOfMonth(_ e: CardExpiry) -> Date {
        var parts = tm()
        parts.tm_year = Int32(e.month == 12 ? e.year + 1 : e.year) - 1900
        parts.tm_mon = Int32(e.month == 12 ? 0 : e.month)
        parts.tm_mday = 1
        return Date(timeIntervalSince1970: TimeInterval(timegm(&parts)))
    }

    /// Dedupes a prepared batch, then stores its new tokens and every line's outcome in one
    /// transaction; links a card's fingerprints under other keys (during a fingerprint-key
    /// rotation) once its token is stored, as tokenize does.
    func commit(_ batch: [Line], _ prepared: [Prepared], importID: String, db: Database) async throws -> Counts {
        let t = now()
        var allFingerprints: [String] = []
        for case .card(_, _, let fps, _) in prepared { allFingerprints += fps }
        let existing = try await Self.existingReusableTokens(allFingerprints, in: db, now: t)
        var seen: [String: String] = [:]   // primary fingerprint and expiry → token, this batch
        var records: [[SQLValue]] = [], journal: [ImportLines.Row] = [], links: [[String]] = []
        var counts = Counts()
        for (line, p) in zip(batch, prepared) {
            switch p {
            case .rejected(let error):
                counts.rejected += 1
                journal.append(.init(line: line.number, outcome: "rejected", token: nil, code: error.code.rawValue, field: error.field))
            case .card(let token, let row, let fps, let expiry):
                // The same card with the same expiry (a card stored with another expiry is
                // another token: its envelope and metadata carry that expiry).
                if let existingToken = fps.lazy.compactMap({ existing[$0 + "|" + expiry] ?? seen[$0 + "|" + expiry] }).first {
                    counts.duplicates += 1
                    journal.append(.init(line: line.number, outcome: "duplicate", token: existingToken, code: nil, field: nil))
                    continue
                }
                seen[fps[0] + "|" + expiry] = token
                records.append(row)
                if fps.count > 1 { links.append(fps) }
                counts.imported += 1
                journal.append(.init(line: line.number, outcome: "imported", token: token, code: nil, field: nil))
            }
        }
        let stored = records
        let lines = journal
        let inserted = try await db.transaction { (tx) throws(StoreError) in
            let inserted = try await TokenRows.insert(values: stored, in: tx)
            // A random 128-bit token taken already is not expected; if it ever is, nothing commits.
            guard inserted.count == stored.count else { throw StoreError(.tokenExists, "a token with that id exists") }
            try await ImportLines.append(lines, importID: importID, in: tx)
            return inserted.count
        }
        _ = inserted
        for group in links { try await FingerprintLinks.record(group, in: db) }
        return counts
    }

    /// `MM/YYYY`, the key of an expiry in dedupe's maps.
    static func expiryKey(_ month: Int, _ year: Int) -> String { String(format: "%02d/%04d", month, year) }

    /// Dedupe's one lookup, for a whole batch: the live reusable (multi-use) tokens stored under
    /// any of `fingerprints`, oldest first; `fingerprint|MM/YYYY` (the card's expiry) → token.
    /// (Tokenize's `"dedupe": true` asks the token store the same for one card,
    /// `TokenStore.reusable`; a batch of 2,048 cards asks once per 500 fingerprints here.)
    static func existingReusableTokens(_ fingerprints: [String], in db: Database, now: Date) async throws(StoreError) -> [String: String] {
        var found: [String: String] = [:]
        let unique = Array(Set(fingerprints))
        let exp = { (key: String) in "CAST(\(db.dialect.envelopeCardField("envelope", key)) AS INTEGER)" }
        for start in stride(from: 0, to: unique.count, by: 500) {
            let part = Array(unique[start..<min(unique.count, start + 500)])
            let rows = try await db.query(
                "SELECT fingerprint, token, \(exp("exp_month")), \(exp("exp_year")) FROM vault_tokens WHERE fingerprint IN ("
                    + part.map { _ in "?" }.joined(separator: ", ") + ") AND single_use = ? AND expires_at > ? ORDER BY created_at, token",
                part.map { $0 as any SQLBindable } + [false, now])
            for row in rows {
                let key = try row.string(0) + "|" + expiryKey(try row.int(2), try row.int(3))
                if found[key] == nil { found[key] = try row.string(1) }
            }
        }
        return found
    }
}
