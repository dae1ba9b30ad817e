import Foundation
import Store
import Tokenizer
import VaultCrypto

/// Customers, their stored instruments and recurring mandates over the vault's `Database`, on
/// either backend. Instruments hold envelopes without a CVC; detaching deletes the envelope.
public final class SQLCustomerStore: CustomerStore, MandateStore {
    let db: Database

    /// A store over a migrated database (`Database.migrate()`).
    public init(database: Database) { db = database }

    /// The stored instruments' table, for key rotation.
    public var envelopeTable: any EnvelopeTable { SQLEnvelopeTable.instruments(db) }

    public func create(_ c: CustomerRecord, claim: CreateClaim?, uniqueReference: Bool) async throws(StoreError) -> CustomerCreation {
        try await db.transaction { (tx) throws(StoreError) in
            if let claim {
                switch try await tx.claim(claim, objectID: c.id, at: c.createdAt) {
                case .claimed: break
                case .replay(let id): return .replay(id)
                case .reused: return .keyReused
                }
            }
            if uniqueReference, let reference = c.reference, try await !Self.takeReference(reference, for: c.id, tx) {
                try await Self.release(claim, tx)
                return .referenceTaken
            }
            try await tx.query(
                "INSERT INTO vault_customers (id, reference, default_instrument, created_at, metadata) VALUES (?, ?, ?, ?, ?)",
                [c.id, c.reference, c.defaultInstrument, c.createdAt, c.metadata.column])
            return .created
        }
    }

    /// Records `reference` as `customer`'s; false when another customer has it.
    static func takeReference(_ reference: String, for customer: String, _ tx: Transaction) async throws(StoreError) -> Bool {
        let inserted = try await tx.query(
            "INSERT INTO vault_customer_references (reference, customer) VALUES (?, ?) ON CONFLICT (reference) DO NOTHING RETURNING customer",
            [reference, customer])
        if !inserted.isEmpty { return true }
        return try await tx.query("SELECT customer FROM vault_customer_references WHERE reference = ?", [reference]).first?.string(0) == customer
    }

    /// A refused creation keeps no claim: the key may be used again once the reference is free.
    static func release(_ claim: CreateClaim?, _ tx: Transaction) async throws(StoreError) {
        guard let claim else { return }
        try await tx.query(
            "DELETE FROM vault_creates WHERE scope = ? AND kind = ? AND idempotency_key = ?", [claim.scope, claim.kind, claim.key])
    }

    public func update(_ id: String, _ change: CustomerChange, uniqueReference: Bool) async throws(StoreError) -> CustomerUpdate {
        try await db.transaction { (tx) throws(StoreError) in
            guard let row = try await tx.query("SELECT metadata FROM vault_customers WHERE id = ?", [id]).first else { return .customerNotFound }
            var metadata: Metadata?
            if let patch = change.metadata {
                let merged = try Metadata(column: row.optionalString(0)).merged(with: patch)
                guard merged.pairs.count <= Metadata.maxKeys else { return .metadataFull }
                metadata = merged
            }
            if let instrument = change.defaultInstrument {
                guard try await !tx.query(
                    "SELECT id FROM vault_instruments WHERE id = ? AND customer = ?", [instrument, id]).isEmpty else { return .instrumentNotFound }
            }
            // One UPDATE for every field changed: one `customer.updated` event per change.
            var set: [String] = [], values: [any SQLBindable] = []
            if let reference = change.reference {
                if uniqueReference, let reference, try await !Self.takeReference(reference, for: id, tx) { return .referenceTaken }
                try await tx.query(
                    "DELETE FROM vault_customer_references WHERE customer = ? AND reference <> ?", [id, reference ?? ""])
                set.append("reference = ?")
                values.append(reference)
            }
            if let instrument = change.defaultInstrument {
                set.append("default_instrument = ?")
                values.append(instrument)
            }
            if let metadata {
                set.append("metadata = ?")
                values.append(metadata.column)
            }
            if !set.isEmpty { try await tx.query("UPDATE vault_customers SET \(set.joined(separator: ", ")) WHERE id = ?", values + [id]) }
            return .updated
        }
    }

    public func delete(_ id: String) async throws(StoreError) -> CustomerDeletion {
        try await db.transaction { (tx) throws(StoreError) in
            guard try await !tx.query("SELECT id FROM vault_customers WHERE id = ?", [id]).isEmpty else { return .customerNotFound }
            let inFlight = try await tx.query("""
                SELECT p.id FROM vault_payments p JOIN vault_instruments i ON p.token = i.id
                WHERE i.customer = ? AND p.status IN ('processing', 'requires_action') LIMIT 1
                """, [id])
            guard inFlight.isEmpty else { return .paymentInFlight }
            let cancelled = try await tx.query(
                "UPDATE vault_mandates SET status = 'cancelled' WHERE customer = ? AND status = 'active' RETURNING id", [id]
            ).map { (r) throws(StoreError) in try r.string(0) }
            let instruments = try await tx.query("DELETE FROM vault_instruments WHERE customer = ? RETURNING id", [id])
                .map { (r) throws(StoreError) in try r.string(0) }
            try await tx.query("DELETE FROM vault_customer_references WHERE customer = ?", [id])
            try await tx.query("DELETE FROM vault_customers WHERE id = ?", [id])
            // Erasure reaches the events outbox too (docs/events.md): the customer's and its
            // instruments' events keep only their id, object and `erased` (no reference, metadata
            // or card metadata), delivered or not.
            for object in [id] + instruments {
                try await tx.query(
                    "UPDATE vault_events SET data = '{\"id\":\"' || object_id || '\",\"object\":\"' || object_type || '\",\"erased\":true}' WHERE object_id = ?",
                    [object])
            }
            return .erased(CustomerErasure(customer: id, instruments: instruments.sorted(), mandatesCancelled: cancelled.sorted()))
        }
    }

    public func adoptUniqueReferences() async throws(StoreError) -> Int {
        try await db.transaction { (tx) throws(StoreError) in
            try await tx.query("""
                INSERT INTO vault_customer_references (reference, customer)
                SELECT c.reference, c.id FROM vault_customers c
                WHERE c.reference IS NOT NULL AND NOT EXISTS (
                    SELECT 1 FROM vault_customers o WHERE o.reference = c.reference AND (o.created_at < c.created_at OR (o.created_at = c.created_at AND o.id < c.id)))
                ON CONFLICT (reference) DO NOTHING
                """)
            let shared = try await tx.query("""
                SELECT COUNT(*) FROM vault_customers c
                WHERE c.reference IS NOT NULL AND NOT EXISTS (SELECT 1 FROM vault_customer_references r WHERE r.customer = c.id)
                """)
            return try shared.first?.int(0) ?? 0
        }
    }

    public func customer(_ id: String) async throws(StoreError) -> CustomerRecord? {
        guard let r = try await db.query("SELECT \(Self.customerColumns) FROM vault_customers WHERE id = ?", [id]).first else { return nil }
        return try Self.customer(r)
    }

    public func instruments(of customer: String) async throws(StoreError) -> [InstrumentRecord] {
        try await db.query(
            "SELECT id, customer, envelope, created_at FROM vault_instruments WHERE customer = ? ORDER BY created_at, id", [customer]
        ).map(Self.instrument)
    }

    public func instrument(_ id: String) async throws(StoreError) -> InstrumentRecord? {
        try await db.query("SELECT id, customer, envelope, created_at FROM vault_instruments WHERE id = ?", [id]).map(Self.instrument).first
    }

    public func attach(_ i: InstrumentRecord, makeDefault: Bool, dedupe: Bool) async throws(StoreError) -> AttachOutcome {
        let json = i.envelope.json
        let sameCard: [String] = if dedupe, let fp = i.envelope.card.fingerprint { try await FingerprintLinks.candidates(of: fp, in: db) } else { [] }
        return try await db.transaction { (tx) throws(StoreError) -> AttachOutcome in
            // Nothing attaches to a customer that does not exist (or was deleted meanwhile). On
            // PostgreSQL the customer row is locked, so two attaches of one card take turns (a
            // SQLite write transaction is alone anyway).
            let lock = tx.dialect.backend == .postgres ? " FOR UPDATE" : ""
            guard try await !tx.query("SELECT id FROM vault_customers WHERE id = ?\(lock)", [i.customer]).isEmpty else { return .customerNotFound }
            let outcome: AttachOutcome
            let held = sameCard.isEmpty ? [] : try await tx.query(
                "SELECT id, customer, envelope, created_at FROM vault_instruments WHERE customer = ? AND \(FingerprintLinks.filter("fingerprint", sameCard).0) ORDER BY created_at, id",
                [i.customer] + sameCard
            ).map(Self.instrument)
            let card = i.envelope.card
            if let same = held.first(where: { $0.envelope.card.expMonth == card.expMonth && $0.envelope.card.expYear == card.expYear }) {
                outcome = .existing(same)
            } else if var other = held.max(by: { ($0.envelope.card.expYear, $0.envelope.card.expMonth) < ($1.envelope.card.expYear, $1.envelope.card.expMonth) }) {
                // The card held with another expiry. A reissue (a later expiry): the instrument
                // keeps its id and takes the new envelope (and the fingerprint it carries). An
                // older card typed again changes nothing.
                if (card.expYear, card.expMonth) > (other.envelope.card.expYear, other.envelope.card.expMonth) {
                    try await tx.query("UPDATE vault_instruments SET envelope = ?, fingerprint = ? WHERE id = ?", [json, card.fingerprint, other.id])
                    other.envelope = i.envelope
                    outcome = .updated(other)
                } else {
                    outcome = .existing(other)
                }
            } else {
                try await tx.query(
                    "INSERT INTO vault_instruments (id, customer, envelope, created_at, fingerprint) VALUES (?, ?, ?, ?, ?)",
                    [i.id, i.customer, json, i.createdAt, card.fingerprint])
                outcome = .attached
            }
            let id = switch outcome { case .existing(let x), .updated(let x): x.id; default: i.id }
            try await tx.query(
                "UPDATE vault_customers SET default_instrument = ? WHERE id = ? AND (? OR default_instrument IS NULL)",
                [id, i.customer, makeDefault])
            return outcome
        }
    }

    public func setDefault(customer: String, instrument: String) async throws(StoreError) -> Bool {
        try await !db.write("""
            UPDATE vault_customers SET default_instrument = ? WHERE id = ?
            AND EXISTS (SELECT 1 FROM vault_instruments WHERE id = ? AND customer = ?) RETURNING id
            """, [instrument, customer, instrument, customer]).isEmpty
    }

    public func detach(customer: String, instrument: String) async throws(StoreError) -> Bool {
        try await db.transaction { (tx) throws(StoreError) in
            let deleted = try await tx.query(
                "DELETE FROM vault_instruments WHERE id = ? AND customer = ? RETURNING id", [instrument, customer])
            guard !deleted.isEmpty else { return false }
            try await tx.query(
                "UPDATE vault_customers SET default_instrument = NULL WHERE id = ? AND default_instrument = ?", [customer, instrument])
            return true
        }
    }

    public func list(_ q: ListQuery, metadata: [(key: String, value: String)]) async throws(StoreError) -> ListPage<CustomerRecord> {
        try await db.page("vault_customers", columns: Self.customerColumns, filters: Metadata.filters(metadata, owner: .customer), q).map(Self.customer)
    }

    static let customerColumns = "id, reference, default_instrument, created_at, metadata"

    static func customer(_ r: SQLRow) throws(StoreError) -> CustomerRecord {
        CustomerRecord(
            id: try r.string(0), reference: r.optionalString(1), defaultInstrument: r.optionalString(2), createdAt: try r.date(3),
            metadata: try Metadata(column: r.optionalString(4)))
    }

    public func listInstruments(_ q: ListQuery, fingerprint: String?, customer: String?) async throws(StoreError) -> ListPage<InstrumentRecord> {
        var filters: [(String, [any SQLBindable])] = []
        if let fingerprint { filters.append(FingerprintLinks.filter("fingerprint", try await FingerprintLinks.candidates(of: fingerprint, in: db))) }
        if let customer { filters.append(("customer = ?", [customer])) }
        return try await db.page("vault_instruments", columns: "id, customer, envelope, created_at", filters: filters, q).map(Self.instrument)
    }

    static func instrument(_ r: SQLRow) throws(StoreError) -> InstrumentRecord {
        let text = try r.string(2)
        let envelope: CardEnvelope
        do throws(VaultError) {
            envelope = try CardEnvelope(json: text)
        } catch {
            throw StoreError(.corruptRow, "a stored instrument no longer parses (\(error.code.rawValue))")
        }
        return InstrumentRecord(id: try r.string(0), customer: try r.string(1), envelope: envelope, createdAt: try r.date(3))
    }

    // MARK: Mandates

    static let mandateColumns = "id, customer, instrument, amount, max_amount, currency, interval, max_cycles, status, created_at, expires_at"

    public func createMandate(_ x: MandateRecord, claim: CreateClaim?) async throws(StoreError) -> CreateClaim.Outcome {
        try await db.transaction { (tx) throws(StoreError) in
            if let claim {
                let outcome = try await tx.claim(claim, objectID: x.id, at: x.createdAt)
                guard outcome == .claimed else { return outcome }
            }
            try await tx.query(
                "INSERT INTO vault_mandates (\(Self.mandateColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [x.id, x.customer, x.instrument, x.amount, x.maxAmount, x.currency, x.interval.rawValue, x.maxCycles, x.status.rawValue,
                 x.createdAt, x.expiresAt])
            return .claimed
        }
    }

    public func mandate(_ id: String) async throws(StoreError) -> MandateRecord? {
        guard let r = try await db.query("SELECT \(Self.mandateColumns) FROM vault_mandates WHERE id = ?", [id]).first else { return nil }
        guard let interval = MandateRecord.Interval(rawValue: try r.string(6)), let status = MandateRecord.Status(rawValue: try r.string(8)) else {
            throw StoreError(.corruptRow, "a mandate has an interval or status this version does not know")
        }
        return MandateRecord(
            id: try r.string(0), customer: try r.string(1), instrument: try r.string(2), amount: try r.int(3), maxAmount: try r.int(4),
            currency: try r.string(5), interval: interval, maxCycles: try r.int(7), status: status, createdAt: try r.date(9),
            expiresAt: try r.date(10))
    }

    public func cancelMandate(_ id: String) async throws(StoreError) -> Bool {
        try await !db.write("UPDATE vault_mandates SET status = 'cancelled' WHERE id = ? AND status = 'active' RETURNING id", [id]).isEmpty
    }
}
