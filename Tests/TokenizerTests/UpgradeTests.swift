import CardRules
import Foundation
import class GRDB.DatabaseQueue
import Logging
import Payments
import PostgresNIO
import Store
import Testing
import Tokenizer
import VaultCrypto

/// Stores made by the previous vault (commit 838b256, before the store layer: GRDB migrations and
/// unprefixed tables on SQLite, unversioned tables on PostgreSQL, a ledger file per gateway)
/// upgrade in place: every row reads back through the new stores with the values the old vault
/// wrote, the migrations are recorded, a second migration changes nothing, and new writes work.
/// The fixtures (Tests/Fixtures/store-838b256) are made by scripts/make-store-fixtures.
@Suite struct UpgradeTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/store-838b256").path

    /// What the old vault wrote, per backend and table (scripts/make-store-fixtures).
    nonisolated(unsafe) static let expected: [String: [String: [[String: Any]]]] = {
        let data = FileManager.default.contents(atPath: fixtures + "/expected.json") ?? Data()
        let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
        return object.mapValues { ($0 as? [String: Any] ?? [:]).mapValues { $0 as? [[String: Any]] ?? [] } }
    }()

    /// A copy of a fixture file in a fresh directory (the fixture itself stays as made).
    /// A fresh copy of a SQLite fixture. The fixtures are kept as SQL text (`NAME.sql`, the
    /// old file's `iterdump`, tables, indexes, GRDB's migration records and rows exactly), so
    /// no database file is tracked: the file the old vault made is rebuilt from it here.
    static func copy(_ name: String) throws -> (path: String, dir: String) {
        let dir = NSTemporaryDirectory() + "vault-upgrade-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let script = try String(contentsOfFile: fixtures + "/" + name + ".sql", encoding: .utf8)
        let queue = try DatabaseQueue(path: dir + "/" + name)
        try queue.writeWithoutTransaction { db in try db.execute(sql: script) }
        try queue.close()
        return (dir + "/" + name, dir)
    }

    @Test func theFixturesAreThere() {
        for backend in ["sqlite", "postgres"] {
            for table in ["tokens", "payments", "sessions", "customers", "instruments", "mandates"] {
                let rows = Self.expected[backend]?[table] ?? []
                #expect(rows.count > 0, "expected.json has no \(backend) \(table)")
            }
        }
        let charges = Self.expected["gateway"]?["sandbox_charges"] ?? []
        #expect(charges.count > 0)
    }

    @Test func aSQLiteStoreOfThePreviousVersionUpgradesInPlace() async throws {
        let (path, dir) = try Self.copy("store.sqlite")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let db = try Database(sqlitePath: path)
        try await db.migrate()
        try await Self.checkUpgraded(db, rows: try #require(Self.expected["sqlite"]))
        // The old names are gone: one set of tables, the `vault_` ones.
        let left = try await db.query("""
            SELECT name FROM sqlite_master WHERE type = 'table'
            AND name IN ('tokens', 'payments', 'sessions', 'customers', 'instruments', 'mandates', 'cvc_scrub', 'grdb_migrations')
            """)
        #expect(left.isEmpty, "\(left)")
        // Migrating again, as the next start (another handle on the file) does, changes nothing.
        let before = try await Self.snapshot(db)
        let again = try Database(sqlitePath: path)
        try await again.migrate()
        #expect(try await Self.snapshot(again) == before)
        try await Self.newWritesWork(db)
    }

    @Test(.enabled(if: Backend.postgresSocket != nil, "needs VAULT_TEST_POSTGRES_SOCKET (scripts/test)"))
    func aPostgreSQLStoreOfThePreviousVersionUpgradesInPlace() async throws {
        let socket = try #require(Backend.postgresSocket)
        let database = "vault_upgrade_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let admin = RunningClient(socket: socket, database: "postgres")
        try await admin.client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(database)"))
        let running = RunningClient(socket: socket, database: database), other = RunningClient(socket: socket, database: database)
        defer {
            running.stop()
            other.stop()
            Task {
                _ = try? await admin.client.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(database) WITH (FORCE)"))
                admin.stop()
            }
        }
        // The dump as the old vault's database held it, loaded with psql.
        let psql = try FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql").sorted().last
            .map { "/usr/lib/postgresql/\($0)/bin/psql" } ?? "psql"
        let port = socket.split(separator: ".").last.map(String.init) ?? "5432"
        let load = Process()
        load.executableURL = URL(fileURLWithPath: psql)
        load.arguments = [
            "-h", (socket as NSString).deletingLastPathComponent, "-p", port, "-U", "postgres", "-d", database, "-q", "-v", "ON_ERROR_STOP=1",
            "-f", Self.fixtures + "/store-postgres.sql",
        ]
        load.standardOutput = FileHandle.nullDevice
        try load.run()
        load.waitUntilExit()
        try #require(load.terminationStatus == 0, "psql could not load the dump")

        let db = Database(postgres: running.client, logger: Logger(label: "test.upgrade"))
        try await db.migrate()
        try await Self.checkUpgraded(db, rows: try #require(Self.expected["postgres"]))
        #expect(try await db.query("SELECT 1 FROM information_schema.columns WHERE table_name = 'vault_tokens' AND column_name LIKE 'cvc%'").isEmpty)
        let before = try await Self.snapshot(db)
        let again = Database(postgres: other.client, logger: Logger(label: "test.upgrade"))
        try await again.migrate()
        #expect(try await Self.snapshot(again) == before)
        try await Self.newWritesWork(db)
    }

    /// The sandbox gateway's own ledger file (`--processor sandbox:PATH`) opened as a store: its
    /// charges and 3-D Secure challenges join the shared ledger, and its old tables go.
    @Test func theSandboxLedgerFileJoinsTheSharedLedger() async throws {
        let (path, dir) = try Self.copy("gateway-sandbox.sqlite")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let db = try Database(sqlitePath: path)
        try await db.migrate()
        #expect(try await db.appliedMigrations() == Migrations.all.map(\.name))
        let ledger = LedgerStore(database: db)
        let charges = try #require(Self.expected["gateway"]?["sandbox_charges"])
        for c in charges {
            let id = try #require(c["payment_id"] as? String)
            let e = try #require(try await ledger.entry(id), "\(id) is not in vault_ledger")
            #expect(e.processor == "sandbox" && e.state == .done)
            #expect(e.amount == Self.int(c["amount"]) && e.currency == c["currency"] as? String && e.envelopeID == c["envelope_id"] as? String)
            #expect(e.status == c["status"] as? String && e.declineCode == c["decline_code"] as? String)
            #expect(e.reference == c["reference"] as? String && e.transactionID == c["transaction_id"] as? String)
            #expect(Millis.of(e.createdAt) == Int64(Self.int(c["created_at"]) ?? -1) * 1000)
        }
        #expect(try await db.query("SELECT COUNT(*) FROM vault_ledger").first?.int(0) == charges.count)
        #expect(charges.contains { $0["status"] as? String == "requires_action" }, "the fixture has a 3-D Secure challenge")
        for t in Self.expected["gateway"]?["sandbox_3ds"] ?? [] {
            let transaction = try #require(t["transaction_id"] as? String)
            let challenge = try #require(try await ledger.challenge(transaction))
            #expect(challenge.paymentID == t["payment_id"] as? String && challenge.requestJTI == t["request_jti"] as? String)
        }
        let left = try await db.query("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'sandbox_%'")
        #expect(left.isEmpty, "\(left)")
        let again = try Database(sqlitePath: path)
        try await again.migrate()
        #expect(try await again.query("SELECT COUNT(*) FROM vault_ledger").first?.int(0) == charges.count)
    }

    // MARK: Checks

    static func int(_ v: Any?) -> Int? { (v as? NSNumber)?.intValue }
    static func bool(_ v: Any?) -> Bool? { (v as? NSNumber)?.boolValue }
    static func date(_ v: Any?) -> Date? { int(v).map { Millis.date(Int64($0)) } }
    static func string(_ v: Any?) -> String? { v as? String }

    /// Every row of `rows` reads back through the new stores with its values; the migrations are
    /// recorded.
    static func checkUpgraded(_ db: Database, rows: [String: [[String: Any]]]) async throws {
        #expect(try await db.appliedMigrations() == Migrations.all.map(\.name))
        let tokens = SQLTokenStore(database: db), payments = SQLPaymentStore(database: db), customers = SQLCustomerStore(database: db)

        let tokenRows = rows["tokens"] ?? []
        #expect(try await tokens.count() == tokenRows.count)
        for t in tokenRows {
            let token = try #require(string(t["token"]))
            let created = try #require(date(t["created_at"]))
            let r = try #require(try await tokens.get(token, now: created), "\(token) does not read back")
            // The BIN the old vault stored (6 or 8 digits) is cut to the visible prefix, in the row
            // and in the envelope's clear metadata (0016-visible-digits, DESIGN §1); the rest as it was.
            #expect(r.envelope == Self.cut(try CardEnvelope(json: try #require(string(t["envelope"])))))
            let oldBIN = try #require(string(t["bin"]))
            #expect(oldBIN.count > CardNumberInfo.binLength(forLength: r.card.length), "the fixture's BINs are the old, longer ones")
            #expect(r.card.brand.rawValue == string(t["brand"]) && r.card.bin == String(oldBIN.prefix(CardNumberInfo.binLength(forLength: r.card.length))))
            #expect(r.card.last4 == string(t["last4"]))
            #expect(r.fingerprint == string(t["fingerprint"]) && r.singleUse == bool(t["single_use"]))
            #expect(r.createdAt == created && r.expiresAt == date(t["expires_at"]) && !r.hasCVC)
        }
        #expect(tokenRows.contains { $0["fingerprint"] is String }, "the fixture has tokens the gateway fingerprinted")

        let paymentRows = rows["payments"] ?? []
        #expect(Set(paymentRows.compactMap { string($0["status"]) }).isSuperset(of: ["succeeded", "declined", "requires_action"]))
        for p in paymentRows {
            let id = try #require(string(p["id"]))
            let got = try #require(try await payments.get(id), "\(id) does not read back")
            #expect(got.scope == string(p["scope"]) && got.idempotencyKey == string(p["idempotency_key"]) && got.request == string(p["request"]))
            #expect(got.token == string(p["token"]) && got.singleUse == bool(p["single_use"]) && got.amount == int(p["amount"]))
            #expect(got.currency == string(p["currency"]) && got.status.rawValue == string(p["status"]) && got.code == string(p["code"]))
            #expect(got.reference == string(p["reference"]) && got.nextAction == string(p["next_action"]) && got.reason == nil)
            #expect(got.createdAt == date(p["created_at"]) && got.updatedAt == date(p["updated_at"]))
            #expect(try await payments.find(scope: got.scope, idempotencyKey: got.idempotencyKey)?.id == id)
        }

        for s in rows["sessions"] ?? [] {
            let id = try #require(string(s["id"]))
            let got = try #require(try await payments.session(id), "\(id) does not read back")
            #expect(got.amount == int(s["amount"]) && got.currency == string(s["currency"]))
            #expect(got.acceptedBrands.joined(separator: ",") == string(s["brands"]) && got.customer == string(s["customer"]))
            #expect(got.status.rawValue == string(s["status"]) && got.paymentID == string(s["payment_id"]) && got.attempts == int(s["attempts"]))
            #expect(got.createdAt == date(s["created_at"]) && got.expiresAt == date(s["expires_at"]))
        }

        let instrumentRows = rows["instruments"] ?? []
        for c in rows["customers"] ?? [] {
            let id = try #require(string(c["id"]))
            let got = try #require(try await customers.customer(id), "\(id) does not read back")
            #expect(got.reference == string(c["reference"]) && got.defaultInstrument == string(c["default_instrument"]))
            #expect(got.createdAt == date(c["created_at"]))
            let theirs = instrumentRows.filter { string($0["customer"]) == id }.compactMap { string($0["id"]) }
            #expect(Set(try await customers.instruments(of: id).map(\.id)) == Set(theirs))
        }
        for i in instrumentRows {
            let id = try #require(string(i["id"]))
            let got = try #require(try await customers.instrument(id), "\(id) does not read back")
            #expect(got.customer == string(i["customer"]) && got.createdAt == date(i["created_at"]))
            #expect(got.envelope == Self.cut(try CardEnvelope(json: try #require(string(i["envelope"])))) && got.envelope.fields[.cvc] == nil)
        }

        for m in rows["mandates"] ?? [] {
            let id = try #require(string(m["id"]))
            let got = try #require(try await customers.mandate(id), "\(id) does not read back")
            #expect(got.customer == string(m["customer"]) && got.instrument == string(m["instrument"]) && got.amount == int(m["amount"]))
            #expect(got.maxAmount == int(m["max_amount"]) && got.currency == string(m["currency"]) && got.interval.rawValue == string(m["interval"]))
            #expect(got.maxCycles == int(m["max_cycles"]) && got.status.rawValue == string(m["status"]))
            #expect(got.createdAt == date(m["created_at"]) && got.expiresAt == date(m["expires_at"]))
        }

        // Key rotation sees every envelope: tokens and instruments, by kid.
        let kids = try await tokens.envelopeTable.kidCounts().merging(try await customers.envelopeTable.kidCounts(), uniquingKeysWith: +)
        #expect(kids.values.reduce(0, +) == tokenRows.count + instrumentRows.count)
        #expect(!kids.keys.contains("?"))
        // No stored row shows more than the visible prefix, in a column or in an envelope's text.
        for row in try await db.query("SELECT bin, envelope FROM vault_tokens") {
            let envelope = try CardEnvelope(json: try row.string(1))
            #expect(try row.string(0) == envelope.card.bin && envelope.card.bin.count == CardNumberInfo.binLength(forLength: envelope.card.length))
        }
        for row in try await db.query("SELECT envelope FROM vault_instruments") {
            let envelope = try CardEnvelope(json: try row.string(0))
            #expect(envelope.card.bin.count == CardNumberInfo.binLength(forLength: envelope.card.length))
        }
    }

    /// An envelope as 0016-visible-digits leaves it: its `card.bin` cut to the visible prefix.
    static func cut(_ envelope: CardEnvelope) -> CardEnvelope {
        var e = envelope
        e.card.bin = CardNumberInfo.visiblePrefix(e.card.bin, length: e.card.length)
        return e
    }

    /// The schema and the migration records, to compare before and after a second migration.
    static func snapshot(_ db: Database) async throws -> [SQLRow] {
        let schema = db.backend == .sqlite
            ? "SELECT type, name, sql FROM sqlite_master ORDER BY type, name"
            : """
              SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_schema = current_schema()
              UNION ALL SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() ORDER BY 1, 2
              """
        return try await db.query(schema) + (try await db.query("SELECT name, applied_at FROM vault_migrations ORDER BY name"))
    }

    /// What a sidecar does next on the upgraded store: every store writes, and a replay of a
    /// payment made before the upgrade is still that payment.
    static func newWritesWork(_ db: Database) async throws {
        let tokens = SQLTokenStore(database: db), payments = SQLPaymentStore(database: db), customers = SQLCustomerStore(database: db)
        let now = Date()
        let r = record(try sampleEnvelope("6011111111111117"), at: now)
        try await tokens.insert(r)
        #expect(try await tokens.get(r.token, now: now)?.card.last4 == "1117")

        let intent = PaymentStoreSuiteTests.intent(token: r.token, at: now)
        #expect(try await payments.begin(intent) == .created)
        #expect(try await payments.markUnknown(intent.id, reason: "upgrade test", now: now))
        #expect(try await payments.get(intent.id)?.reason == "upgrade test")
        if let old = try await payments.unsettled(before: now.addingTimeInterval(1), limit: 100).first(where: { $0.id != intent.id }) {
            Issue.record("a payment of the old store is unsettled: \(old.id) \(old.status)")
        }
        let legacy = try await db.query("SELECT scope, idempotency_key, request, token, id FROM vault_payments WHERE id <> ? ORDER BY id", [intent.id])
        let first = try #require(legacy.first)
        var replay = PaymentStoreSuiteTests.intent(key: try first.string(1), scope: try first.string(0), token: try first.string(3))
        replay.request = try first.string(2)
        guard case .existing(let existing) = try await payments.begin(replay) else {
            Issue.record("a payment made before the upgrade was not replayed"); return
        }
        #expect(existing.id == (try first.string(4)))

        let session = SessionRecord(
            id: RandomID.make(prefix: "sess_"), amount: 100, currency: "EUR", acceptedBrands: ["visa"], customer: nil, createdAt: now,
            expiresAt: now.addingTimeInterval(600))
        try await payments.createSession(session)
        #expect(try await payments.transitionSession(session.id, from: .open, to: .paying, paymentID: nil))

        let customer = CustomerRecord(id: RandomID.make(prefix: "cus_"), reference: "after-upgrade", createdAt: now)
        try await customers.create(customer)
        let instrument = InstrumentRecord(id: RandomID.make(prefix: "ins_"), customer: customer.id, envelope: try sampleEnvelope(), createdAt: now)
        #expect(try await customers.attach(instrument, makeDefault: false))
        #expect(try await customers.customer(customer.id)?.defaultInstrument == instrument.id)
        let mandate = MandateRecord(
            id: RandomID.make(prefix: "man_"), customer: customer.id, instrument: instrument.id, amount: 500, maxAmount: 700, currency: "EUR",
            interval: .week, maxCycles: 4, createdAt: now, expiresAt: now.addingTimeInterval(86400 * 60))
        try await customers.createMandate(mandate)
        #expect(try await customers.cancelMandate(mandate.id))
    }
}
