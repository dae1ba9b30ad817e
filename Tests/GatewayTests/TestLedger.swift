import Foundation
import Logging
import PostgresNIO
import Store
import Testing

/// A fresh processor ledger of each backend for the gateway's tests: SQLite always; PostgreSQL
/// when `VAULT_TEST_POSTGRES_SOCKET` names a server's socket (scripts/test starts one). As in
/// Tests/StoreTests: two handles on one store stand for two gateways.
enum LedgerBackend: String, CaseIterable, CustomTestStringConvertible {
    case sqlite, postgres
    var testDescription: String { rawValue }
    static let postgresSocket = ProcessInfo.processInfo.environment["VAULT_TEST_POSTGRES_SOCKET"]
    static var available: [LedgerBackend] { postgresSocket == nil ? [.sqlite] : [.sqlite, .postgres] }

    /// Two handles (two gateways) on one migrated store, and its cleanup.
    func make(dir: String) async throws -> (LedgerStore, LedgerStore, @Sendable () async -> Void) {
        switch self {
        case .sqlite:
            let path = dir + "/ledger-\(UUID().uuidString).sqlite"
            let a = try Database(sqlitePath: path), b = try Database(sqlitePath: path)
            try await a.migrate()
            return (LedgerStore(database: a), LedgerStore(database: b), {})
        case .postgres:
            let socket = Self.postgresSocket!
            let name = "vault_gw_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
            let admin = PGClient(socket: socket, database: "postgres")
            try await admin.client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"))
            let one = PGClient(socket: socket, database: name), two = PGClient(socket: socket, database: name)
            let a = Database(postgres: one.client, logger: Logger(label: "test")), b = Database(postgres: two.client, logger: Logger(label: "test"))
            try await a.migrate()
            return (LedgerStore(database: a), LedgerStore(database: b), {
                one.stop()
                two.stop()
                _ = try? await admin.client.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"))
                admin.stop()
            })
        }
    }

    /// One migrated SQLite ledger at `path` (a gateway's embedded default).
    static func sqlite(_ path: String) async throws -> LedgerStore {
        let db = try Database(sqlitePath: path)
        try await db.migrate()
        return LedgerStore(database: db)
    }
}

final class PGClient: @unchecked Sendable {
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
