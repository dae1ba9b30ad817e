import CardRules
import Foundation
import GRDB
import Logging
import PostgresNIO
import Testing
import Payments
import Store
@testable import Tokenizer
import VaultCrypto

/// The token store contract, run against every backend: SQLite always; PostgreSQL when
/// `VAULT_TEST_POSTGRES_SOCKET` names a server's Unix socket (scripts/test starts a throwaway
/// cluster and sets it; CI fails if it is missing, see `postgresIsConfiguredInCI`).
enum Backend: String, CaseIterable, CustomTestStringConvertible {
    case sqlite, postgres
    var testDescription: String { rawValue }

    static let postgresSocket = ProcessInfo.processInfo.environment["VAULT_TEST_POSTGRES_SOCKET"]
    static var available: [Backend] { postgresSocket == nil ? [.sqlite] : [.sqlite, .postgres] }

    /// A fresh store (its own file or database; migrated unless `migrated` is false, for tests
    /// that first lay out what an earlier version made), a way to open it again, and cleanup.
    func make(migrated: Bool = true) async throws -> StoreHarness {
        switch self {
        case .sqlite:
            let dir = NSTemporaryDirectory() + "vault-store-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            let path = dir + "/tokens.sqlite"
            /// Another handle on the file, migrated, as another process (or a restart) opens it.
            @Sendable func open() async throws -> Store.Database {
                let db = try Store.Database(sqlitePath: path)
                try await db.migrate()
                return db
            }
            let db = try Store.Database(sqlitePath: path)
            if migrated { try await db.migrate() }
            return StoreHarness(
                db: db, store: SQLTokenStore(database: db), reopen: { SQLTokenStore(database: try await open()) },
                files: [path, path + "-wal", path + "-shm"], cleanup: { try? FileManager.default.removeItem(atPath: dir) },
                payments: { SQLPaymentStore(database: try await open()) },
                customers: { SQLCustomerStore(database: try await open()) },
                sql: { text in try await db.write(text) })
        case .postgres:
            let socket = Backend.postgresSocket!
            let database = "vault_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
            let admin = RunningClient(socket: socket, database: "postgres")
            try await admin.client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(database)"))
            let running = RunningClient(socket: socket, database: database)
            let db = Store.Database(postgres: running.client, logger: Logger(label: "test.postgres"))
            if migrated { try await db.migrate() }
            let reopened = Box()
            /// Another client on the database, migrated, as another sidecar opens it.
            @Sendable func open() async throws -> Store.Database {
                let r = RunningClient(socket: socket, database: database)
                reopened.append(r)
                let db = Store.Database(postgres: r.client, logger: Logger(label: "test.postgres"))
                try await db.migrate()
                return db
            }
            let socketDir = (socket as NSString).deletingLastPathComponent
            return StoreHarness(
                db: db, store: SQLTokenStore(database: db),
                reopen: { SQLTokenStore(database: try await open()) },
                files: [],
                cleanup: {
                    running.stop()
                    reopened.stopAll()
                    _ = try? await admin.client.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(database) WITH (FORCE)"))
                    admin.stop()
                },
                payments: { SQLPaymentStore(database: try await open()) },
                customers: { SQLCustomerStore(database: try await open()) },
                dump: {
                    let pgDump = try FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")
                        .sorted().last.map { "/usr/lib/postgresql/\($0)/bin/pg_dump" } ?? "pg_dump"
                    let p = Process()
                    p.executableURL = URL(fileURLWithPath: pgDump)
                    let port = socket.split(separator: ".").last.map(String.init) ?? "5432"
                    p.arguments = ["-h", socketDir, "-p", port, "-U", "postgres", "--data-only", database]
                    let out = Pipe()
                    p.standardOutput = out
                    try p.run()
                    let data = out.fileHandleForReading.readDataToEndOfFile()
                    p.waitUntilExit()
                    return String(decoding: data, as: UTF8.self)
                },
                rawFiles: {
                    // The server's own files for this database and its WAL, after a checkpoint
                    // (scripts/test keeps the cluster in <dir>/data beside its socket).
                    try await admin.client.query("CHECKPOINT")
                    var oid: Int64?
                    for try await o in try await admin.client.query(
                        "SELECT oid::BIGINT FROM pg_database WHERE datname = \(database)").decode(Int64.self) { oid = o }
                    let data = socketDir + "/data"
                    var out: [String] = []
                    for sub in ["base/\(oid ?? -1)", "pg_wal"] {
                        let d = data + "/" + sub
                        for name in (try? FileManager.default.contentsOfDirectory(atPath: d)) ?? [] { out.append(d + "/" + name) }
                    }
                    return out
                },
                sql: { text in try await db.write(text) })
        }
    }
}

struct StoreHarness: Sendable {
    /// The store's database (the handle `store` uses).
    let db: Store.Database
    let store: any TokenStore
    let reopen: @Sendable () async throws -> any TokenStore
    let files: [String]
    let cleanup: @Sendable () async -> Void
    /// A payment store in the same database (a new handle on each call, as another sidecar would open).
    var payments: @Sendable () async throws -> any PaymentStore
    /// A customer store in the same database.
    var customers: @Sendable () async throws -> any CustomerStore
    /// A plain-text dump of the store (pg_dump for PostgreSQL; nil for SQLite, whose files are read).
    var dump: @Sendable () throws -> String? = { nil }
    /// The database server's own files for this store (PostgreSQL: its data files and WAL).
    var rawFiles: @Sendable () async throws -> [String] = { [] }
    /// Runs one SQL statement on the store's database.
    var sql: @Sendable (String) async throws -> Void
}

/// Clients opened by a harness, stopped at its cleanup.
final class Box: @unchecked Sendable {
    private let lock = NSLock()
    private var clients: [RunningClient] = []
    func append(_ c: RunningClient) { lock.withLock { clients.append(c) } }
    func stopAll() { lock.withLock { clients }.forEach { $0.stop() } }
}

/// A PostgresClient with its run loop going, over the server's Unix socket.
final class RunningClient: @unchecked Sendable {
    let client: PostgresClient
    private let task: Task<Void, Never>
    init(socket: String, database: String) {
        client = PostgresClient(
            configuration: .init(unixSocketPath: socket, username: "postgres", password: nil, database: database),
            backgroundLogger: Logger(label: "test.postgres"))
        let c = client
        task = Task { await c.run() }
    }
    func stop() { task.cancel() }
}

let publicKey = try! PublicKey(rawBytes: Array(repeating: 7, count: 32))

func sampleEnvelope(_ number: String = "4242424242424242", cvc: String? = "123", name: String? = nil) throws -> CardEnvelope {
    let card = try CardData(
        number: SecureBytes(Array(number.utf8)), expiry: CardExpiry(month: 12, year: 2030),
        cvc: cvc.map { SecureBytes(Array($0.utf8)) }, name: name.map { SecureBytes(Array($0.utf8)) })
    return try CardEnvelope.seal(card, to: publicKey, now: CalendarMonth(year: 2026, month: 11))
}

func record(_ envelope: CardEnvelope, token: String = RandomID.make(prefix: "tok_"), at t: Date = Date(), ttl: Double = 900, cvcTTL: Double = 300) -> TokenRecord {
    TokenRecord(
        token: token, envelope: envelope.droppingCVC(), cvcField: envelope.fields[.cvc], createdAt: t,
        expiresAt: t.addingTimeInterval(ttl), cvcExpiresAt: envelope.fields[.cvc] == nil ? nil : t.addingTimeInterval(cvcTTL),
        singleUse: true)
}

@Suite struct StoreSuiteTests {
    @Test(arguments: Backend.available)
    func insertGetDeleteRoundTrip(_ backend: Backend) async throws {
        let h = try await backend.make()
        let store = h.store
        defer { Task { await h.cleanup() } }
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let r = record(try sampleEnvelope(), at: now)
        try await store.insert(r)
        let got = try #require(try await store.get(r.token, now: now))
        #expect(got.token == r.token)
        #expect(got.envelope == r.envelope)
        // The store never keeps a CVC (HeldCVCs does, in memory): it comes back without one.
        #expect(r.cvcField != nil && got.cvcField == nil && got.cvcExpiresAt == nil)
        #expect(got.fullEnvelope == r.envelope)
        #expect(got.card == r.card)
        #expect(got.expiresAt == r.expiresAt)
        #expect(got.singleUse)
        #expect(try await store.count() == 1)
        #expect(try await store.delete(r.token))
        #expect(try await store.delete(r.token) == false)
        #expect(try await store.get(r.token, now: now) == nil)
    }

    @Test(arguments: Backend.available)
    func duplicatesAreRefusedAndChangeNothing(_ backend: Backend) async throws {
        let h = try await backend.make()
        let store = h.store
        defer { Task { await h.cleanup() } }
        let r = record(try sampleEnvelope())
        try await store.insert(r)
        var other = record(try sampleEnvelope("5555555555554444"))
        other.token = r.token
        let error = await #expect(throws: StoreError.self) { try await store.insert(other) }
        #expect(error?.code == .tokenExists)
        #expect(try await store.get(r.token, now: Date())?.card.last4 == "4242")
        #expect(try await store.count() == 1)
    }

    /// Readiness's store check: a cheap real query through the store's pool or client.
    @Test(arguments: Backend.available)
    func pingAnswersOnEveryBackend(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        try await h.store.ping()
        try await h.db.ping()
    }

    /// A commit is on disk when it returns: the writer runs synchronous=FULL even though GRDB's
    /// WAL set-up would lower it to NORMAL.
    @Test func sqliteCommitsAreSynchronousFull() async throws {
        let dir = NSTemporaryDirectory() + "vault-sync-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let pool = try #require(try Store.Database(sqlitePath: dir + "/t.sqlite").sqlitePool)
        let level = try await pool.write { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
        #expect(level == 2, "synchronous is \(level ?? -1), not FULL (2)")
        let mode = try await pool.write { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") }
        #expect(mode == "wal")
    }

    /// A tokenize whose task is cancelled while it waits in the group commit (its client went
    /// away) and then leads the next batch does not fail the other rows of that batch: the batch's
    /// statement runs in a task of its own (on PostgreSQL a cancelled task's connection lease
    /// fails). A first insert is held by a table lock while three more queue behind it.
    @Test(arguments: Backend.available.filter { $0 == .postgres })
    func aCancelledInsertDoesNotFailTheRowsCommittedWithIt(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let store = try #require(h.store as? SQLTokenStore)
        let envelope = try sampleEnvelope()
        let (x, l, b, c) = (record(envelope), record(envelope), record(envelope), record(envelope))
        let db = h.db
        let (first, leader, others) = try await db.transaction { (tx) throws(StoreError) in
            try await tx.query("LOCK TABLE vault_tokens IN EXCLUSIVE MODE")
            let first = Task { () async -> StoreError? in
                do throws(StoreError) { try await store.insert(x) } catch { return error }
                return nil
            }
            for _ in 0..<1000 {
                let blocked = try await db.query(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO vault_tokens%'")
                if !blocked.isEmpty { break }
                try? await Task.sleep(for: .milliseconds(10))
            }
            let leader = Task { () async -> StoreError? in
                do throws(StoreError) { try await store.insert(l) } catch { return error }
                return nil
            }
            for _ in 0..<1000 where store.queuedInserts < 1 { try? await Task.sleep(for: .milliseconds(5)) }
            let others = [b, c].map { r in
                Task { () async -> StoreError? in
                    do throws(StoreError) { try await store.insert(r) } catch { return error }
                    return nil
                }
            }
            for _ in 0..<1000 where store.queuedInserts < 3 { try? await Task.sleep(for: .milliseconds(5)) }
            #expect(store.queuedInserts == 3)
            leader.cancel()
            return (first, leader, others)
        }
        #expect(await first.value == nil)
        _ = await leader.value
        for (r, t) in zip([b, c], others) {
            #expect(await t.value == nil, "a row was failed by its leader's cancellation")
            #expect(try await store.get(r.token, now: Date()) != nil)
        }
    }

    /// Many concurrent inserts (the store commits them in groups, on both backends): every one acknowledged
    /// is there, and a duplicate among them is refused alone, without failing its neighbours.
    @Test(arguments: Backend.available)
    func concurrentInsertsAllLandAndADuplicateFailsAlone(_ backend: Backend) async throws {
        let h = try await backend.make()
        let store = h.store
        defer { Task { await h.cleanup() } }
        let envelope = try sampleEnvelope()
        let records = (0..<300).map { _ in record(envelope) }
        var clash = record(try sampleEnvelope("5555555555554444"))
        clash.token = records[150].token
        let outcomes = await withTaskGroup(of: (String, StoreError.Code?, String).self) { group in
            for r in records + [clash] {
                group.addTask {
                    do throws(StoreError) {
                        try await store.insert(r)
                        return (r.token, nil, r.envelope.id)
                    } catch {
                        return (r.token, error.code, r.envelope.id)
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.filter { $0.1 == nil }.count == 300)
        #expect(outcomes.filter { $0.1 == .tokenExists }.map(\.0) == [records[150].token])
        #expect(try await store.count() == 300)
        // The one acknowledged of the two is the one stored (PostgreSQL: a batch is one multi-row INSERT).
        let acknowledged = outcomes.first { $0.0 == records[150].token && $0.1 == nil }?.2
        #expect(try await store.get(records[150].token, now: Date())?.envelope.id == acknowledged)
        let reopened = try await h.reopen()
        for r in records { #expect(try await reopened.get(r.token, now: Date()) != nil) }
    }

    @Test(arguments: Backend.available)
    func expiryCVCTTLAndPurge(_ backend: Backend) async throws {
        let h = try await backend.make()
        let store = h.store
        defer { Task { await h.cleanup() } }
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        let a = record(try sampleEnvelope(), at: t0, ttl: 600, cvcTTL: 60)
        let b = record(try sampleEnvelope("5555555555554444"), at: t0, ttl: 1200, cvcTTL: 60)
        let c = record(try sampleEnvelope("378282246310005", cvc: nil), at: t0, ttl: 1200)
        for r in [a, b, c] { try await store.insert(r) }
        // Past a's TTL: a is gone for readers, then purged; the store held no CVC to drop.
        #expect(try await store.get(a.token, now: t0.addingTimeInterval(599)) != nil)
        #expect(try await store.get(a.token, now: t0.addingTimeInterval(600)) == nil)
        let purged = try await store.purgeExpired(now: t0.addingTimeInterval(700))
        #expect(purged == PurgeResult(tokensDeleted: 1, cvcsDropped: 0))
        #expect(try await store.count() == 2)
        #expect(try await store.purgeExpired(now: t0.addingTimeInterval(700)) == PurgeResult(tokensDeleted: 0, cvcsDropped: 0))
    }

    @Test(arguments: Backend.available)
    func fingerprintsAreFilledOnceAndListed(_ backend: Backend) async throws {
        let h = try await backend.make()
        let store = h.store
        defer { Task { await h.cleanup() } }
        let now = Date()
        var a = record(try sampleEnvelope(), at: now)
        a.fingerprint = String(repeating: "a", count: 64)
        let b = record(try sampleEnvelope("5555555555554444"), at: now)
        let c = record(try sampleEnvelope("378282246310005", cvc: nil), at: now)
        for r in [a, b, c] { try await store.insert(r) }
        #expect(try await store.get(a.token, now: now)?.fingerprint == a.fingerprint)
        let missing = try await store.withoutFingerprint(after: "", limit: 10, now: now).map(\.token)
        #expect(missing == [b.token, c.token].sorted())
        let first = try #require(missing.first)
        #expect(try await store.withoutFingerprint(after: first, limit: 10, now: now).map(\.token) == Array(missing.dropFirst()))
        let fp = String(repeating: "b", count: 64)
        // Only tokens without one are set; a's stays.
        #expect(try await store.setFingerprints([(b.token, fp), (a.token, fp)]) == 1)
        #expect(try await store.get(b.token, now: now)?.card.fingerprint == fp)
        #expect(try await store.get(a.token, now: now)?.fingerprint == a.fingerprint)
        #expect(try await store.withoutFingerprint(after: "", limit: 10, now: now).map(\.token) == [c.token])
    }

    @Test(arguments: Backend.available)
    func acknowledgedTokensSurviveReopening(_ backend: Backend) async throws {
        let h = try await backend.make()
        let store = h.store
        defer { Task { await h.cleanup() } }
        var tokens: [String] = []
        for _ in 0..<20 {
            let r = record(try sampleEnvelope())
            try await store.insert(r)
            tokens.append(r.token)
        }
        let again = try await h.reopen()
        for t in tokens { #expect(try await again.get(t, now: Date()) != nil) }
    }

    @Test(arguments: Backend.available)
    func storeFilesHoldNoCardData(_ backend: Backend) async throws {
        let h = try await backend.make()
        let store = h.store
        defer { Task { await h.cleanup() } }
        let tokenizer = Tokenizer(store: store, primaryKey: publicKey)
        let pans = ["4242424242424242", "5555555555554444", "378282246310005", "6011111111111117"]
        for pan in pans {
            let card = try CardData(
                number: SecureBytes(Array(pan.utf8)), expiry: CardExpiry(month: 12, year: 2031),
                cvc: SecureBytes(Array((pan.hasPrefix("37") ? "7391" : "739").utf8)), name: SecureBytes(Array("Zebediah Quux".utf8)))
            _ = try await tokenizer.tokenize(card)
        }
        var scanned = 0
        for file in h.files {
            guard let data = FileManager.default.contents(atPath: file) else { continue }
            scanned += data.count
            let text = String(decoding: data, as: UTF8.self)
            for pan in pans { #expect(!text.contains(pan), "\(file) holds a PAN") }
            #expect(!text.contains("Zebediah"), "\(file) holds a cardholder name")
        }
        if let dump = try h.dump() {
            #expect(dump.contains("vault_tokens") && dump.contains("tok_"), "the dump holds the tokens")
            for pan in pans { #expect(!dump.contains(pan), "the PostgreSQL dump holds a PAN") }
            #expect(!dump.contains("Zebediah"))
            scanned += dump.utf8.count
        }
        #expect(scanned > 0)
    }
}

extension StoreSuiteTests {
    /// Issue 19, item 5: a CVC never reaches a database file, so no WAL frame, free page, dead row
    /// version or dump can give it back after authorization. Every store file (SQLite: the file,
    /// its WAL and shm; PostgreSQL: pg_dump, the database's data files and the server's WAL after
    /// a checkpoint) is scanned for each CVC's sealed field.
    @Test(arguments: Backend.available)
    func cvcNeverReachesTheStoreFiles(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let tokenizer = Tokenizer(store: h.store, primaryKey: publicKey)
        var sealedCVCs: [String] = []
        for (pan, cvc) in [("4242424242424242", "987"), ("5555555555554444", "654"), ("378282246310005", "3210")] {
            let card = try CardData(
                number: SecureBytes(Array(pan.utf8)), expiry: CardExpiry(month: 12, year: 2031), cvc: SecureBytes(Array(cvc.utf8)))
            let r = try await tokenizer.tokenize(card)
            sealedCVCs.append(try #require(r.cvcField))
            #expect(try await tokenizer.record(r.token).hasCVC)
            tokenizer.dropCVC(r.token)   // what the first authorization attempt does
        }
        let envelope = try sampleEnvelope("6011111111111117", cvc: "321")
        let r = try await tokenizer.tokenize(envelope: envelope)
        sealedCVCs.append(try #require(envelope.fields[.cvc]))
        tokenizer.dropCVC(r.token)
        _ = try await tokenizer.purgeExpired()

        var needles: [Data] = []
        for text in sealedCVCs {
            needles.append(Data(text.utf8))
            if let raw = Data(base64Encoded: text) { needles.append(raw.suffix(32)) }   // ciphertext ‖ tag
        }
        var scanned = 0
        for file in h.files + (try await h.rawFiles()) {
            guard let data = FileManager.default.contents(atPath: file) else { continue }
            scanned += data.count
            for n in needles { #expect(data.range(of: n) == nil, "\(file) holds a sealed CVC") }
        }
        if let dump = try h.dump() {
            scanned += dump.utf8.count
            for text in sealedCVCs { #expect(!dump.contains(text), "the dump holds a sealed CVC") }
        }
        #expect(scanned > 0)
    }

    /// A SQLite store made before CVCs left the store (a `cvc` column with sealed CVCs in the
    /// file, the WAL and free pages) is emptied and rebuilt when opened: none is left anywhere.
    @Test func anOlderSQLiteStoreLosesItsCVCsOnUpgrade() async throws {
        let dir = NSTemporaryDirectory() + "vault-upgrade-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/tokens.sqlite"
        // What the previous version wrote: migration v1 only, CVC fields in the cvc column, some
        // dropped (UPDATE … SET cvc = NULL) the way it did after an authorization.
        var fields: [String] = []
        do {
            let queue = try DatabaseQueue(path: path)
            try await queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA journal_mode = WAL") }
            var v1 = DatabaseMigrator()
            v1.registerMigration("v1") { db in
                try db.execute(sql: """
                    CREATE TABLE tokens (token TEXT PRIMARY KEY NOT NULL, envelope TEXT NOT NULL, cvc TEXT, brand TEXT NOT NULL,
                        bin TEXT NOT NULL, last4 TEXT NOT NULL, fingerprint TEXT, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,
                        cvc_expires_at INTEGER, single_use INTEGER NOT NULL);
                    """)
            }
            try v1.migrate(queue)
            for (i, pan) in ["4242424242424242", "5555555555554444", "6011111111111117"].enumerated() {
                let e = try sampleEnvelope(pan, cvc: "9\(i)7")
                fields.append(e.fields[.cvc]!)
                try await queue.write { db in
                    try db.execute(
                        sql: "INSERT INTO tokens VALUES (?, ?, ?, 'visa', '42424242', '4242', NULL, 0, 9999999999999, 9999999999999, 1)",
                        arguments: [RandomID.make(prefix: "tok_"), e.droppingCVC().json, e.fields[.cvc]])
                }
            }
            try await queue.write { db in try db.execute(sql: "UPDATE tokens SET cvc = NULL WHERE rowid = 1") }
        }
        // The old version's file holds them (so the check below can fail).
        let before = FileManager.default.contents(atPath: path) ?? Data()
        #expect(fields.dropFirst().allSatisfy { before.range(of: Data($0.utf8)) != nil }, "the old store holds its CVCs")
        let db = try Store.Database(sqlitePath: path)
        try await db.migrate()
        let store = SQLTokenStore(database: db)
        #expect(try await store.count() == 3)
        for file in [path, path + "-wal", path + "-shm"] {
            let data = FileManager.default.contents(atPath: file) ?? Data()
            for f in fields { #expect(data.range(of: Data(f.utf8)) == nil, "\(file) still holds a sealed CVC") }
        }
        // Scrubbed once (the marker table is gone); a scrub that did not finish (its marker still
        // there) runs at the next open.
        let marker = "SELECT COUNT(*) FROM sqlite_master WHERE name = 'vault_cvc_scrub'"
        #expect(try await db.query(marker).first?.int(0) == 0)
        try await db.write("CREATE TABLE vault_cvc_scrub (pending INTEGER NOT NULL)")
        try await db.write("INSERT INTO vault_cvc_scrub VALUES (1)")
        let again = try Store.Database(sqlitePath: path)
        try await again.migrate()
        #expect(try await again.query(marker).first?.int(0) == 0)
        #expect(try await SQLTokenStore(database: again).count() == 3)
    }
}

@Suite struct BackendConfigurationTests {
    /// CI must run the store suite against PostgreSQL too, not silently skip it.
    @Test func postgresIsConfiguredInCI() {
        if ProcessInfo.processInfo.environment["CI"] == "true" {
            #expect(Backend.postgresSocket != nil, "CI runs without VAULT_TEST_POSTGRES_SOCKET: the PostgreSQL backend went untested")
        }
        #expect(Backend.available.contains(.sqlite))
    }
}
