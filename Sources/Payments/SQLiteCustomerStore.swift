import Foundation
import GRDB
import Tokenizer
import VaultCrypto

/// Customers and instruments in the embedded SQLite database (the tokens' file).
public final class SQLiteCustomerStore: CustomerStore, MandateStore {
    private let pool: DatabasePool

    public init(pool: DatabasePool) throws(PaymentStoreError) {
        self.pool = pool
        var m = DatabaseMigrator()
        m.registerMigration("customers-v1") { db in
            try db.execute(sql: """
                CREATE TABLE customers (
                    id TEXT PRIMARY KEY NOT NULL,
                    reference TEXT,
                    default_instrument TEXT,
                    created_at INTEGER NOT NULL
                );
                CREATE TABLE instruments (
                    id TEXT PRIMARY KEY NOT NULL,
                    customer TEXT NOT NULL REFERENCES customers(id),
                    envelope TEXT NOT NULL,
                    created_at INTEGER NOT NULL
                );
                CREATE INDEX instruments_customer ON instruments(customer);
                """)
        }
        m.registerMigration("mandates-v1") { db in
            try db.execute(sql: """
                CREATE TABLE mandates (
                    id TEXT PRIMARY KEY NOT NULL, customer TEXT NOT NULL, instrument TEXT NOT NULL, amount INTEGER NOT NULL,
                    max_amount INTEGER NOT NULL, currency TEXT NOT NULL, interval TEXT NOT NULL, max_cycles INTEGER NOT NULL,
                    status TEXT NOT NULL, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL
                )
                """)
        }
        do { try m.migrate(pool) } catch {
            throw PaymentStoreError(.unavailable, "cannot create the customer tables: \(SQLitePaymentStore.describe(error))")
        }
    }

    public func create(_ c: CustomerRecord) async throws(PaymentStoreError) {
        try await write { db in
            try db.execute(
                sql: "INSERT INTO customers (id, reference, default_instrument, created_at) VALUES (?, ?, ?, ?)",
                arguments: [c.id, c.reference, c.defaultInstrument, PaymentColumns.millis(c.createdAt)])
        }
    }

    public func customer(_ id: String) async throws(PaymentStoreError) -> CustomerRecord? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM customers WHERE id = ?", arguments: [id]).map {
                CustomerRecord(id: $0["id"], reference: $0["reference"], defaultInstrument: $0["default_instrument"], createdAt: PaymentColumns.date($0["created_at"]))
            }
        }
    }

    public func instruments(of customer: String) async throws(PaymentStoreError) -> [InstrumentRecord] {
        let rows = try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM instruments WHERE customer = ? ORDER BY created_at, id", arguments: [customer]).map(Self.columns)
        }
        var out: [InstrumentRecord] = []
        for row in rows { out.append(try Self.instrument(row)) }
        return out
    }

    public func instrument(_ id: String) async throws(PaymentStoreError) -> InstrumentRecord? {
        guard let row = try await read({ db in try Row.fetchOne(db, sql: "SELECT * FROM instruments WHERE id = ?", arguments: [id]).map(Self.columns) }) else {
            return nil
        }
        return try Self.instrument(row)
    }

    public func attach(_ i: InstrumentRecord, makeDefault: Bool) async throws(PaymentStoreError) -> Bool {
        let json = i.envelope.json
        return try await write { db in
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM customers WHERE id = ?", arguments: [i.customer]) == true else { return false }
            try db.execute(
                sql: "INSERT INTO instruments (id, customer, envelope, created_at) VALUES (?, ?, ?, ?)",
                arguments: [i.id, i.customer, json, PaymentColumns.millis(i.createdAt)])
            try db.execute(
                sql: "UPDATE customers SET default_instrument = ? WHERE id = ? AND (? OR default_instrument IS NULL)",
                arguments: [i.id, i.customer, makeDefault])
            return true
        }
    }

    public func setDefault(customer: String, instrument: String) async throws(PaymentStoreError) -> Bool {
        try await write { db in
            try db.execute(
                sql: "UPDATE customers SET default_instrument = ? WHERE id = ? AND EXISTS (SELECT 1 FROM instruments WHERE id = ? AND customer = ?)",
                arguments: [instrument, customer, instrument, customer])
            return db.changesCount > 0
        }
    }

    public func detach(customer: String, instrument: String) async throws(PaymentStoreError) -> Bool {
        try await write { db in
            try db.execute(sql: "DELETE FROM instruments WHERE id = ? AND customer = ?", arguments: [instrument, customer])
            guard db.changesCount > 0 else { return false }
            try db.execute(sql: "UPDATE customers SET default_instrument = NULL WHERE id = ? AND default_instrument = ?", arguments: [customer, instrument])
            return true
        }
    }

    // MARK: Mandates

    public func createMandate(_ x: MandateRecord) async throws(PaymentStoreError) {
        try await write { db in
            try db.execute(
                sql: "INSERT INTO mandates (\(MandateColumns.list)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                arguments: [x.id, x.customer, x.instrument, x.amount, x.maxAmount, x.currency, x.interval.rawValue, x.maxCycles,
                            x.status.rawValue, PaymentColumns.millis(x.createdAt), PaymentColumns.millis(x.expiresAt)])
        }
    }

    public func mandate(_ id: String) async throws(PaymentStoreError) -> MandateRecord? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT \(MandateColumns.list) FROM mandates WHERE id = ?", arguments: [id]).map { r in
                MandateRecord(
                    id: r["id"], customer: r["customer"], instrument: r["instrument"], amount: r["amount"], maxAmount: r["max_amount"],
                    currency: r["currency"], interval: MandateRecord.Interval(rawValue: r["interval"]) ?? .month, maxCycles: r["max_cycles"],
                    status: MandateRecord.Status(rawValue: r["status"]) ?? .cancelled,
                    createdAt: PaymentColumns.date(r["created_at"]), expiresAt: PaymentColumns.date(r["expires_at"]))
            }
        }
    }

    public func cancelMandate(_ id: String) async throws(PaymentStoreError) -> Bool {
        try await write { db in
            try db.execute(sql: "UPDATE mandates SET status = 'cancelled' WHERE id = ? AND status = 'active'", arguments: [id])
            return db.changesCount > 0
        }
    }

    typealias Columns = (id: String, customer: String, envelope: String, createdAt: Int64)

    static func columns(_ row: Row) -> Columns { (row["id"], row["customer"], row["envelope"], row["created_at"]) }

    static func instrument(_ c: Columns) throws(PaymentStoreError) -> InstrumentRecord {
        InstrumentRecord(id: c.id, customer: c.customer, envelope: try CustomerColumns.envelope(c.envelope), createdAt: PaymentColumns.date(c.createdAt))
    }

    private func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws(PaymentStoreError) -> T {
        do { return try await pool.read(body) } catch {
            throw PaymentStoreError(.unavailable, "customer lookup failed: \(SQLitePaymentStore.describe(error))")
        }
    }

    private func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws(PaymentStoreError) -> T {
        do { return try await pool.write(body) } catch {
            throw PaymentStoreError(.unavailable, "customer write failed: \(SQLitePaymentStore.describe(error))")
        }
    }
}

extension SQLiteCustomerStore {
    /// The stored instruments' table, for key rotation.
    public static func envelopeTable(pool: DatabasePool) -> any EnvelopeTable {
        SQLiteEnvelopeTable(pool: pool, table: "instruments", idColumn: "id", hasCVC: false)
    }
}
