import Foundation
import Logging
import PostgresNIO
import Tokenizer
import VaultCrypto

/// Customers and instruments in PostgreSQL, shared by every sidecar of the store.
public final class PostgresCustomerStore: CustomerStore, MandateStore {
    private let client: PostgresClient
    private let logger: Logger

    public init(client: PostgresClient, logger: Logger = Logger(label: "vault.customers.postgres")) {
        self.client = client
        self.logger = logger
    }

    public func migrate() async throws(PaymentStoreError) {
        try await run("migration") { client, logger in
            try await client.withTransaction(logger: logger) { c in
                try await c.query("SELECT pg_advisory_xact_lock(727365001)", logger: logger)
                try await c.query("""
                    CREATE TABLE IF NOT EXISTS vault_customers (
                        id TEXT PRIMARY KEY, reference TEXT, default_instrument TEXT, created_at BIGINT NOT NULL)
                    """, logger: logger)
                try await c.query("""
                    CREATE TABLE IF NOT EXISTS vault_instruments (
                        id TEXT PRIMARY KEY, customer TEXT NOT NULL REFERENCES vault_customers(id),
                        envelope TEXT NOT NULL, created_at BIGINT NOT NULL)
                    """, logger: logger)
                try await c.query("CREATE INDEX IF NOT EXISTS vault_instruments_customer ON vault_instruments (customer)", logger: logger)
                try await c.query("""
                    CREATE TABLE IF NOT EXISTS vault_mandates (
                        id TEXT PRIMARY KEY, customer TEXT NOT NULL, instrument TEXT NOT NULL, amount BIGINT NOT NULL,
                        max_amount BIGINT NOT NULL, currency TEXT NOT NULL, interval TEXT NOT NULL, max_cycles BIGINT NOT NULL,
                        status TEXT NOT NULL, created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL)
                    """, logger: logger)
            }
        }
    }

    public func create(_ c: CustomerRecord) async throws(PaymentStoreError) {
        let t = PaymentColumns.millis(c.createdAt)
        try await run("create customer") { client, logger in
            try await client.query(
                "INSERT INTO vault_customers (id, reference, default_instrument, created_at) VALUES (\(c.id), \(c.reference), \(c.defaultInstrument), \(t))",
                logger: logger)
        }
    }

    public func customer(_ id: String) async throws(PaymentStoreError) -> CustomerRecord? {
        try await run("customer") { client, logger in
            let rows = try await client.query("SELECT id, reference, default_instrument, created_at FROM vault_customers WHERE id = \(id)", logger: logger)
            for try await (id, reference, def, created) in rows.decode((String, String?, String?, Int64).self) {
                return CustomerRecord(id: id, reference: reference, defaultInstrument: def, createdAt: PaymentColumns.date(created))
            }
            return nil
        }
    }

    public func instruments(of customer: String) async throws(PaymentStoreError) -> [InstrumentRecord] {
        try await select("SELECT id, customer, envelope, created_at FROM vault_instruments WHERE customer = \(customer) ORDER BY created_at, id")
    }

    public func instrument(_ id: String) async throws(PaymentStoreError) -> InstrumentRecord? {
        try await select("SELECT id, customer, envelope, created_at FROM vault_instruments WHERE id = \(id)").first
    }

    public func attach(_ i: InstrumentRecord, makeDefault: Bool) async throws(PaymentStoreError) -> Bool {
        let json = i.envelope.json, t = PaymentColumns.millis(i.createdAt)
        return try await run("attach") { client, logger in
            try await client.withTransaction(logger: logger) { c in
                var exists = false
                for try await _ in try await c.query("SELECT 1 FROM vault_customers WHERE id = \(i.customer) FOR UPDATE", logger: logger) { exists = true }
                guard exists else { return false }
                try await c.query(
                    "INSERT INTO vault_instruments (id, customer, envelope, created_at) VALUES (\(i.id), \(i.customer), \(json), \(t))", logger: logger)
                try await c.query(
                    "UPDATE vault_customers SET default_instrument = \(i.id) WHERE id = \(i.customer) AND (\(makeDefault) OR default_instrument IS NULL)",
                    logger: logger)
                return true
            }
        }
    }

    public func setDefault(customer: String, instrument: String) async throws(PaymentStoreError) -> Bool {
        try await run("set default") { client, logger in
            let rows = try await client.query("""
                UPDATE vault_customers SET default_instrument = \(instrument) WHERE id = \(customer)
                AND EXISTS (SELECT 1 FROM vault_instruments WHERE id = \(instrument) AND customer = \(customer)) RETURNING id
                """, logger: logger)
            for try await _ in rows { return true }
            return false
        }
    }

    public func detach(customer: String, instrument: String) async throws(PaymentStoreError) -> Bool {
        try await run("detach") { client, logger in
            try await client.withTransaction(logger: logger) { c in
                var deleted = false
                for try await _ in try await c.query(
                    "DELETE FROM vault_instruments WHERE id = \(instrument) AND customer = \(customer) RETURNING id", logger: logger) { deleted = true }
                guard deleted else { return false }
                try await c.query(
                    "UPDATE vault_customers SET default_instrument = NULL WHERE id = \(customer) AND default_instrument = \(instrument)", logger: logger)
                return true
            }
        }
    }

    // MARK: Mandates

    public func createMandate(_ x: MandateRecord) async throws(PaymentStoreError) {
        let c = PaymentColumns.millis(x.createdAt), e = PaymentColumns.millis(x.expiresAt)
        try await run("create mandate") { client, logger in
            try await client.query("""
                INSERT INTO vault_mandates (\(unescaped: MandateColumns.list)) VALUES (\(x.id), \(x.customer), \(x.instrument),
                \(Int64(x.amount)), \(Int64(x.maxAmount)), \(x.currency), \(x.interval.rawValue), \(Int64(x.maxCycles)), \(x.status.rawValue), \(c), \(e))
                """, logger: logger)
        }
    }

    public func mandate(_ id: String) async throws(PaymentStoreError) -> MandateRecord? {
        try await run("mandate") { client, logger in
            let rows = try await client.query("SELECT \(unescaped: MandateColumns.list) FROM vault_mandates WHERE id = \(id)", logger: logger)
            for try await row in rows {
                let r = row.makeRandomAccess()
                return MandateRecord(
                    id: try r[0].decode(String.self), customer: try r[1].decode(String.self), instrument: try r[2].decode(String.self),
                    amount: Int(try r[3].decode(Int64.self)), maxAmount: Int(try r[4].decode(Int64.self)), currency: try r[5].decode(String.self),
                    interval: MandateRecord.Interval(rawValue: try r[6].decode(String.self)) ?? .month, maxCycles: Int(try r[7].decode(Int64.self)),
                    status: MandateRecord.Status(rawValue: try r[8].decode(String.self)) ?? .cancelled,
                    createdAt: PaymentColumns.date(try r[9].decode(Int64.self)), expiresAt: PaymentColumns.date(try r[10].decode(Int64.self)))
            }
            return nil
        }
    }

    public func cancelMandate(_ id: String) async throws(PaymentStoreError) -> Bool {
        try await run("cancel mandate") { client, logger in
            for try await _ in try await client.query(
                "UPDATE vault_mandates SET status = 'cancelled' WHERE id = \(id) AND status = 'active' RETURNING id", logger: logger) { return true }
            return false
        }
    }

    private func select(_ query: PostgresQuery) async throws(PaymentStoreError) -> [InstrumentRecord] {
        let rows: [(String, String, String, Int64)] = try await run("instruments") { client, logger in
            var out: [(String, String, String, Int64)] = []
            for try await row in try await client.query(query, logger: logger).decode((String, String, String, Int64).self) { out.append(row) }
            return out
        }
        var out: [InstrumentRecord] = []
        for (id, customer, envelope, created) in rows {
            out.append(InstrumentRecord(id: id, customer: customer, envelope: try CustomerColumns.envelope(envelope), createdAt: PaymentColumns.date(created)))
        }
        return out
    }

    private func run<T: Sendable>(_ what: String, _ body: (PostgresClient, Logger) async throws -> T) async throws(PaymentStoreError) -> T {
        try await runPostgres(client, logger, what, body)
    }
}

extension PostgresCustomerStore {
    /// The stored instruments' table, for key rotation.
    public static func envelopeTable(client: PostgresClient, logger: Logger) -> any EnvelopeTable {
        PostgresEnvelopeTable(client: client, logger: logger, name: "instruments", table: "vault_instruments", idColumn: "id", hasCVC: false)
    }
}
