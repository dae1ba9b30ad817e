import CardRules
import Foundation
import GRDB
import Logging
import PostgresNIO
import Testing
import Payments
import Tokenizer
import VaultCrypto

/// The token store contract, run against every backend: SQLite always; PostgreSQL when
/// `VAULT_TEST_POSTGRES_SOCKET` names a server's Unix socket (scripts/test starts a throwaway
/// cluster and sets it; CI fails if it is missing, see `postgresIsConfiguredInCI`).
enum Backend: String, CaseIterable, CustomTestStringConvertible {
    case sqlite, postgres
    var testDescription: String { rawValue }

    static let postgresSocket = ProcessInfo.processInfo.environment["VAULT_TEST_POSTGRES_SOCKET"]
    static var available: [Backend] { postgresSocket == nil ? [.sqlite] : [.sqlite, .postgres] }

    /// A fresh, empty store (its own file or database), a way to open it again, and cleanup.
    func make() async throws -> StoreHarness {
        switch self {
        case .sqlite:
            let dir = NSTemporaryDirectory() + "vault-store-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            let path = dir + "/tokens.sqlite"
            let store = try SQLiteTokenStore(path: path)
            return StoreHarness(
                store: store, reopen: { try SQLiteTokenStore(path: path) },
                files: [path, path + "-wal", path + "-shm"], cleanup: { try? FileManager.default.removeItem(atPath: dir) },
                payments: { try SQLitePaymentStore(pool: store.database) },
                customers: { try SQLiteCustomerStore(pool: store.database) })
        case .postgres:
            let socket = Backend.postgresSocket!
            let database = "vault_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
            let admin = RunningClient(socket: socket, database: "postgres")
            try await admin.client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(database)"))
            @Sendable func open() async throws -> (PostgresTokenStore, RunningClient) {
                let running = RunningClient(socket: socket, database: database)
                let store = PostgresTokenStore(client: running.client)
                try await store.migrate()
                return (store, running)
            }
            let (store, running) = try await open()
            let reopened = Box()
            let socketDir = (socket as NSString).deletingLastPathComponent
            return StoreHarness(
                store: store,
                reopen: { let (s, r) = try await open(); reopened.clients.append(r); return s },
                files: [],
                cleanup: {
                    running.stop()
                    reopened.clients.forEach { $0.stop() }
                    try? await admin.client.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(database) WITH (FORCE)"))
                    admin.stop()
                },
                payments: {
                    let store = PostgresPaymentStore(client: running.client)
                    try await store.migrate()
                    return store
                },
                customers: {
                    let store = PostgresCustomerStore(client: running.client)
                    try await store.migrate()
                    return store
                },
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
                sql: { text in try await running.client.query(PostgresQuery(unsafeSQL: text)) })
        }
    }
}

struct StoreHarness: Sendable {
    let store: any TokenStore
    let reopen: @Sendable () async throws -> any TokenStore
    let files: [String]
    let cleanup: @Sendable () async -> Void
    /// A payment store in the same database (a new one on each call, as another sidecar would open).
    var payments: @Sendable () async throws -> any PaymentStore
    /// A customer store in the same database.
    var customers: @Sendable () async throws -> any CustomerStore
    /// A plain-text dump of the store (pg_dump for PostgreSQL; nil for SQLite, whose files are read).
    var dump: @Sendable () throws -> String? = { nil }
    /// Runs SQL statements on the store's database (PostgreSQL; for SQLite, use the pool).
    var sql: @Sendable (String) async throws -> Void = { _ in }
}

final class Box: @unchecked Sendable { var clients: [RunningClient] = [] }

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
let fingerprintKey = try! FingerprintKey(secureBytes: SecureBytes(Array(repeating: 5, count: 32)))

func sampleEnvelope(_ number: String = "4242424242424242", cvc: String? = "123", name: String? = nil) throws -> CardEnvelope {
    let card = try CardData(
        number: SecureBytes(Array(number.utf8)), expiry: CardExpiry(month: 12, year: 2030),
        cvc: cvc.map { SecureBytes(Array($0.utf8)) }, name: name.map { SecureBytes(Array($0.utf8)) })
    return try CardEnvelope.seal(card, to: publicKey, fingerprintKey: fingerprintKey, now: CalendarMonth(year: 2026, month: 11))
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
        #expect(got.cvcField == r.cvcField)
        #expect(got.fullEnvelope == r.fullEnvelope)
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
        let error = await #expect(throws: TokenStoreError.self) { try await store.insert(other) }
        #expect(error?.code == .tokenExists)
        #expect(try await store.get(r.token, now: Date())?.card.last4 == "4242")
        #expect(try await store.count() == 1)
    }

    /// A commit is on disk when it returns: the writer runs synchronous=FULL even though GRDB's
    /// WAL set-up would lower it to NORMAL.
    @Test func sqliteCommitsAreSynchronousFull() async throws {
        let dir = NSTemporaryDirectory() + "vault-sync-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try SQLiteTokenStore(path: dir + "/t.sqlite")
        let level = try await store.database.write { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
        #expect(level == 2, "synchronous is \(level ?? -1), not FULL (2)")
        let mode = try await store.database.write { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") }
        #expect(mode == "wal")
    }

    /// Many concurrent inserts (the SQLite store commits them in groups): every one acknowledged
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
        let outcomes = await withTaskGroup(of: (String, TokenStoreError.Code?).self) { group in
            for r in records + [clash] {
                group.addTask {
                    do throws(TokenStoreError) {
                        try await store.insert(r)
                        return (r.token, nil)
                    } catch {
                        return (r.token, error.code)
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.filter { $0.1 == nil }.count == 300)
        #expect(outcomes.filter { $0.1 == .tokenExists }.map(\.0) == [records[150].token])
        #expect(try await store.count() == 300)
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
        // Past the CVC TTL: the CVC is no longer returned, even before a purge.
        #expect(try await store.get(a.token, now: t0.addingTimeInterval(61))?.cvcField == nil)
        #expect(try await store.get(a.token, now: t0.addingTimeInterval(59))?.cvcField != nil)
        // Past a's TTL: a is gone for readers, then purged; b loses its CVC; c had none.
        #expect(try await store.get(a.token, now: t0.addingTimeInterval(600)) == nil)
        let purged = try await store.purgeExpired(now: t0.addingTimeInterval(700))
        #expect(purged == PurgeResult(tokensDeleted: 1, cvcsDropped: 1))
        #expect(try await store.count() == 2)
        let bAfter = try #require(try await store.get(b.token, now: t0.addingTimeInterval(700)))
        #expect(bAfter.cvcField == nil && bAfter.fullEnvelope.fields[.cvc] == nil)
        #expect(try await store.purgeExpired(now: t0.addingTimeInterval(700)) == PurgeResult(tokensDeleted: 0, cvcsDropped: 0))
    }

    @Test(arguments: Backend.available)
    func dropCVC(_ backend: Backend) async throws {
        let h = try await backend.make()
        let store = h.store
        defer { Task { await h.cleanup() } }
        let r = record(try sampleEnvelope())
        try await store.insert(r)
        #expect(try await store.dropCVC(r.token))
        #expect(try await store.dropCVC(r.token) == false)
        let got = try #require(try await store.get(r.token, now: Date()))
        #expect(got.cvcField == nil)
        #expect(got.envelope.fields[.pan] == r.envelope.fields[.pan])
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
        let tokenizer = Tokenizer(store: store, primaryKey: publicKey, fingerprintKey: fingerprintKey)
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

@Suite struct BackendConfigurationTests {
    /// CI must run the store suite against PostgreSQL too, not silently skip it.
    @Test func postgresIsConfiguredInCI() {
        if ProcessInfo.processInfo.environment["CI"] == "true" {
            #expect(Backend.postgresSocket != nil, "CI runs without VAULT_TEST_POSTGRES_SOCKET: the PostgreSQL backend went untested")
        }
        #expect(Backend.available.contains(.sqlite))
    }
}
