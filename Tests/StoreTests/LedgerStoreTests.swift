import Foundation
import Logging
import PostgresNIO
import Store
import Testing

/// A fresh database of each backend: SQLite always; PostgreSQL when `VAULT_TEST_POSTGRES_SOCKET`
/// names a server's socket (scripts/test starts one).
enum StoreBackend: String, CaseIterable, CustomTestStringConvertible {
    case sqlite, postgres
    var testDescription: String { rawValue }
    static let postgresSocket = ProcessInfo.processInfo.environment["VAULT_TEST_POSTGRES_SOCKET"]
    static var available: [StoreBackend] { postgresSocket == nil ? [.sqlite] : [.sqlite, .postgres] }

    /// A migrated empty database, a second handle on it (another process would have its own),
    /// and cleanup.
    func make() async throws -> (Database, Database, @Sendable () async -> Void) {
        switch self {
        case .sqlite:
            let dir = NSTemporaryDirectory() + "vault-store-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            let a = try Database(sqlitePath: dir + "/vault.sqlite"), b = try Database(sqlitePath: dir + "/vault.sqlite")
            try await a.migrate()
            return (a, b, { try? FileManager.default.removeItem(atPath: dir) })
        case .postgres:
            let socket = Self.postgresSocket!
            let name = "vault_store_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
            let admin = PG(socket: socket, database: "postgres")
            try await admin.client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"))
            let one = PG(socket: socket, database: name), two = PG(socket: socket, database: name)
            let a = Database(postgres: one.client, logger: Logger(label: "test")), b = Database(postgres: two.client, logger: Logger(label: "test"))
            try await a.migrate()
            return (a, b, {
                one.stop()
                two.stop()
                _ = try? await admin.client.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"))
                admin.stop()
            })
        }
    }
}

final class PG: @unchecked Sendable {
    let client: PostgresClient
    private let task: Task<Void, Never>
    init(socket: String, database: String, user: String = "postgres") {
        client = PostgresClient(
            configuration: .init(unixSocketPath: socket, username: user, password: nil, database: database),
            backgroundLogger: Logger(label: "test.postgres"))
        let c = client
        task = Task { await c.run() }
    }
    func stop() { task.cancel() }
}

@Suite("The processor ledger, on both backends")
struct LedgerStoreTests {
    func entry(_ id: String = "pay_" + UUID().uuidString.prefix(8).lowercased(), at t: Date = Date()) -> LedgerEntry {
        LedgerEntry(
            paymentID: id, processor: "relay:test", amount: 1000, currency: "EUR", envelopeID: "env_1", state: .sending,
            leaseUntil: t.addingTimeInterval(30), createdAt: t)
    }

    @Test(arguments: StoreBackend.available)
    func migratingTwiceChangesNothingAndRecordsEveryMigration(_ backend: StoreBackend) async throws {
        let (a, b, cleanup) = try await backend.make()
        defer { Task { await cleanup() } }
        try await b.migrate()
        #expect(try await a.appliedMigrations() == Migrations.all.map(\.name))
    }

    @Test(arguments: StoreBackend.available)
    func aPaymentIDIsClaimedOnceAcrossGateways(_ backend: StoreBackend) async throws {
        let (a, b, cleanup) = try await backend.make()
        defer { Task { await cleanup() } }
        let e = entry()
        // Two gateways (two handles on one store) claim the same payment id at once: one wins.
        async let one = LedgerStore(database: a).claim(e)
        async let two = LedgerStore(database: b).claim(e)
        let claims = try await [one, two]
        #expect(claims.filter { $0 == .claimed }.count == 1)
        #expect(claims.contains { if case .existing(let x) = $0 { x.paymentID == e.paymentID } else { false } })
    }

    @Test(arguments: StoreBackend.available)
    func aRetryTakesAnUnknownRowOverExactlyOnce(_ backend: StoreBackend) async throws {
        let (a, b, cleanup) = try await backend.make()
        defer { Task { await cleanup() } }
        let now = Date()
        let e = entry(at: now)
        #expect(try await LedgerStore(database: a).claim(e) == .claimed)
        // Leased: nobody else may send.
        #expect(try await LedgerStore(database: b).retake(e.paymentID, attempts: 1, leaseUntil: now.addingTimeInterval(30), now: now) == nil)
        #expect(try await LedgerStore(database: a).markUnknown(
            e.paymentID, reason: "timeout", nextTryAt: now, deadlineAt: now.addingTimeInterval(60), now: now))
        #expect(try await LedgerStore(database: a).due(now: now.addingTimeInterval(1)).map(\.paymentID) == [e.paymentID])
        async let x = LedgerStore(database: a).retake(e.paymentID, attempts: 1, leaseUntil: now.addingTimeInterval(30), now: now)
        async let y = LedgerStore(database: b).retake(e.paymentID, attempts: 1, leaseUntil: now.addingTimeInterval(30), now: now)
        let taken = try await [x, y].compactMap { $0 }
        #expect(taken.count == 1)
        #expect(taken.first?.attempts == 2 && taken.first?.state == .sending)
        // A row sent before is never released as "nothing sent".
        #expect(try await LedgerStore(database: a).release(e.paymentID) == false)
        #expect(try await LedgerStore(database: a).settle(e.paymentID, status: "succeeded", declineCode: nil, reference: "ch_1", now: now))
        #expect(try await LedgerStore(database: b).settle(e.paymentID, status: "declined", declineCode: "x", reference: nil, now: now) == false)
        let done = try #require(try await LedgerStore(database: b).entry(e.paymentID))
        #expect(done.state == .done && done.status == "succeeded" && done.reference == "ch_1" && done.deadlineAt != nil)
        #expect(try await LedgerStore(database: a).due(now: now.addingTimeInterval(3600)).isEmpty)
    }

    @Test(arguments: StoreBackend.available)
    func aFirstSendThatNeverLeftIsReleased(_ backend: StoreBackend) async throws {
        let (a, _, cleanup) = try await backend.make()
        defer { Task { await cleanup() } }
        let e = entry()
        _ = try await LedgerStore(database: a).claim(e)
        #expect(try await LedgerStore(database: a).release(e.paymentID))
        #expect(try await LedgerStore(database: a).entry(e.paymentID) == nil)
    }

    @Test(arguments: StoreBackend.available)
    func aThreeDSResultConfirmsOnce(_ backend: StoreBackend) async throws {
        let (a, _, cleanup) = try await backend.make()
        defer { Task { await cleanup() } }
        var e = entry()
        e.state = .done
        e.status = "requires_action"
        e.transactionID = "tx_1"
        let store = LedgerStore(database: a)
        #expect(try await store.claim(e, challenge: ("tx_1", "jti_1")) == .claimed)
        #expect(try await store.challenge("tx_1")?.paymentID == e.paymentID)
        #expect(try await store.confirmChallenge(e.paymentID, resultID: "r1", status: "succeeded", declineCode: nil, reference: "sbx_1", now: Date()) == .confirmed)
        #expect(try await store.confirmChallenge(e.paymentID, resultID: "r1", status: "succeeded", declineCode: nil, reference: "sbx_1", now: Date()) == .notAwaiting)
        #expect(try await store.entry(e.paymentID)?.status == "succeeded")
    }
}
