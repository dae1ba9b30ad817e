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

    public func create(_ c: CustomerRecord) async throws(StoreError) {
        try await db.write(
            "INSERT INTO vault_customers (id, reference, default_instrument, created_at) VALUES (?, ?, ?, ?)",
            [c.id, c.reference, c.defaultInstrument, c.createdAt])
    }

    public func customer(_ id: String) async throws(StoreError) -> CustomerRecord? {
        guard let r = try await db.query(
            "SELECT id, reference, default_instrument, created_at FROM vault_customers WHERE id = ?", [id]).first else { return nil }
        return CustomerRecord(id: try r.string(0), reference: r.optionalString(1), defaultInstrument: r.optionalString(2), createdAt: try r.date(3))
    }

    public func instruments(of customer: String) async throws(StoreError) -> [InstrumentRecord] {
        try await db.query(
            "SELECT id, customer, envelope, created_at FROM vault_instruments WHERE customer = ? ORDER BY created_at, id", [customer]
        ).map(Self.instrument)
    }

    public func instrument(_ id: String) async throws(StoreError) -> InstrumentRecord? {
        try await db.query("SELECT id, customer, envelope, created_at FROM vault_instruments WHERE id = ?", [id]).map(Self.instrument).first
    }

    public func attach(_ i: InstrumentRecord, makeDefault: Bool) async throws(StoreError) -> Bool {
        let json = i.envelope.json
        return try await db.transaction { (tx) throws(StoreError) in
            // Nothing attaches to a customer that does not exist (customers are never deleted).
            let inserted = try await tx.query("""
                INSERT INTO vault_instruments (id, customer, envelope, created_at)
                SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM vault_customers WHERE id = ?) RETURNING id
                """, [i.id, i.customer, json, i.createdAt, i.customer])
            guard !inserted.isEmpty else { return false }
            try await tx.query(
                "UPDATE vault_customers SET default_instrument = ? WHERE id = ? AND (? OR default_instrument IS NULL)",
                [i.id, i.customer, makeDefault])
            return true
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

    public func createMandate(_ x: MandateRecord) async throws(StoreError) {
        try await db.write(
            "INSERT INTO vault_mandates (\(Self.mandateColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [x.id, x.customer, x.instrument, x.amount, x.maxAmount, x.currency, x.interval.rawValue, x.maxCycles, x.status.rawValue,
             x.createdAt, x.expiresAt])
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
