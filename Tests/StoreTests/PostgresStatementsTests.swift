import Foundation
import Logging
import PostgresNIO
@testable import Store
import Testing

/// Named prepared statements on PostgreSQL (`PostgresStatements`): prepared once per connection,
/// run by name, exactly as unnamed; a first run that fails does not leave the statement broken
/// on its connection.
@Suite("PostgreSQL prepared statements", .enabled(if: StoreBackend.postgresSocket != nil))
struct PostgresStatementsTests {
    /// A fresh migrated database on a client of at most `connections` connections.
    func database(connections: Int = 1, prepared: Bool = true) async throws -> (Database, @Sendable () async -> Void) {
        let (db, _, cleanup) = try await databaseAndClient(connections: connections, prepared: prepared)
        return (db, cleanup)
    }

    func databaseAndClient(connections: Int = 1, prepared: Bool = true) async throws -> (Database, PostgresClient, @Sendable () async -> Void) {
        let socket = StoreBackend.postgresSocket!
        let name = "vault_prep_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let admin = PG(socket: socket, database: "postgres")
        try await admin.client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"))
        var config = PostgresClient.Configuration(unixSocketPath: socket, username: "postgres", password: nil, database: name)
        config.options.maximumConnections = connections
        let client = PostgresClient(configuration: config, backgroundLogger: Logger(label: "test.postgres"))
        let task = Task { await client.run() }
        let db = Database(postgres: client, logger: Logger(label: "test"), preparedStatements: prepared)
        try await db.migrate()
        return (db, client, {
            task.cancel()
            _ = try? await admin.client.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"))
            admin.stop()
        })
    }

    static let lookup = "SELECT COUNT(*) FROM vault_migrations WHERE name = ?"

    /// The vault's statements prepared on the connection (`pg_prepared_statements`), by text.
    func prepared(_ t: Transaction) async throws -> [String: Int] {
        var out: [String: Int] = [:]
        for row in try await t.query("SELECT statement FROM pg_prepared_statements WHERE name LIKE 'vault\\_%'") {
            out[try row.string(0), default: 0] += 1
        }
        return out
    }

    @Test("a statement seen twice is prepared once per connection and run by name, with the answers of an unnamed one")
    func preparedOnceRunByName() async throws {
        let (db, cleanup) = try await database()
        defer { Task { await cleanup() } }
        let migrations = try await db.query("SELECT COUNT(*) FROM vault_migrations").first?.int(0) ?? 0
        #expect(migrations > 0)
        let (first, second, third, byText) = try await db.transaction { (t) throws(StoreError) in
            let first = try await t.query(Self.lookup, ["no such migration"]).first?.int(0)
            let second = try await t.query(Self.lookup, ["no such migration"]).first?.int(0)
            let third = try await t.query(Self.lookup, ["no such migration"]).first?.int(0)
            do { return (first, second, third, try await prepared(t)) } catch { throw StoreError(.unavailable, "\(error)") }
        }
        #expect(first == 0 && second == 0 && third == 0)
        let text = "SELECT COUNT(*) FROM vault_migrations WHERE name = $1"
        #expect(byText[text] == 1, "seen once, then prepared once, run twice by name: \(byText)")
        // A NULL bind is another statement (its type is the server's to infer, as unnamed).
        for _ in 0..<2 { #expect(try await db.query(Self.lookup, [SQLValue.null]).first?.int(0) == 0) }
        let after = try await db.transaction { (t) throws(StoreError) in
            do { return try await prepared(t) } catch { throw StoreError(.unavailable, "\(error)") }
        }
        #expect(after[text] == 2)
        // DDL is never prepared, nor a list of parameters; they run unnamed as before.
        try await db.write("CREATE TABLE prep_probe (a TEXT)")
        for _ in 0..<3 {
            #expect(try await db.write("INSERT INTO prep_probe (a) VALUES (?) RETURNING a", ["x"]).first?.string(0) == "x")
            #expect(try await db.query("SELECT COUNT(*) FROM prep_probe WHERE a IN (?, ?)", ["x", "y"]).first?.int(0) ?? 0 > 0)
        }
        let probes = try await db.query("SELECT COUNT(*) FROM pg_prepared_statements WHERE statement LIKE '%prep_probe WHERE a IN%'")
        #expect(try probes.first?.int(0) == 0)
    }

    /// PostgresNIO runs a name as the statement it first prepared under it on the connection: two
    /// stores over one client (or two processes behind a pooler) must never give one name to two
    /// statements. A name is the statement's content.
    @Test("names are the statements' content: two stores over one client keep their statements apart, and share a statement's name")
    func twoStoresOnOneClient() async throws {
        let (db, client, cleanup) = try await databaseAndClient(connections: 1)
        defer { Task { await cleanup() } }
        let other = Database(postgres: client, logger: Logger(label: "test"))
        for n in 1...3 {
            #expect(try await db.query("SELECT ?::bigint + 1", [n]).first?.int(0) == n + 1)
            #expect(try await other.query("SELECT ?::bigint * 10", [n]).first?.int(0) == n * 10)
            #expect(try await other.query("SELECT ?::bigint + 1", [n]).first?.int(0) == n + 1)
        }
        let names = try await db.query("SELECT name FROM pg_prepared_statements WHERE statement LIKE 'SELECT $1::bigint%' ORDER BY name")
            .map { (r) throws(StoreError) in try r.string(0) }
        #expect(names.count == 2, "one name per statement, whichever store ran it: \(names)")
        #expect(names.allSatisfy { $0.hasPrefix("vault_") && $0.count == 38 }, "\(names)")
        #expect(PostgresStatements.name("t\nSELECT 1") == PostgresStatements.name("t\nSELECT 1"))
        #expect(PostgresStatements.name("t\nSELECT 1") != PostgresStatements.name("i\nSELECT 1"))
    }

    /// Behind a pooler that hands server sessions around, a name prepared on one session is unknown
    /// on the next (26000): the store stops naming statements, and the next run works unnamed.
    @Test("a server that does not hold a prepared name turns naming off, and the store goes on unnamed")
    func aLostNameTurnsNamingOff() async throws {
        let (db, cleanup) = try await database(connections: 1)
        defer { Task { await cleanup() } }
        for _ in 0..<3 { #expect(try await db.query(Self.lookup, ["x"]).first?.int(0) == 0) }
        // What a pooler does: the next statement lands on a session without it.
        _ = try await db.query("DEALLOCATE ALL")
        await #expect(throws: StoreError.self) { try await db.query(Self.lookup, ["x"]) }
        guard case .postgres(_, _, let statements?) = db.engine else { Issue.record("no statements"); return }
        #expect(!statements.naming)
        #expect(try await db.query(Self.lookup, ["x"]).first?.int(0) == 0)
        #expect(try await db.query(Self.lookup, ["y"]).first?.int(0) == 0)
    }

    @Test("prepared_statements=off runs every statement unnamed")
    func offPreparesNothing() async throws {
        let (db, cleanup) = try await database(prepared: false)
        defer { Task { await cleanup() } }
        let rows = try await db.transaction { (t) throws(StoreError) in
            _ = try await t.query(Self.lookup, ["x"])
            return try await t.query("SELECT COUNT(*) FROM pg_prepared_statements")
        }
        #expect(try rows.first?.int(0) == 0)
        #expect(throws: Never.self) { try StoreLocation("postgres://u@/db?host=/tmp&prepared_statements=off") }
        guard case .postgres(let p) = try StoreLocation("postgres://u@/db?host=/tmp&prepared_statements=off") else {
            Issue.record("not a PostgreSQL location")
            return
        }
        #expect(p.preparedStatements == false)
        #expect(throws: (any Error).self) { try StoreLocation("postgres://u@/db?host=/tmp&prepared_statements=maybe") }
    }

    /// PostgresNIO keeps a failed Parse as the statement name's answer on its connection: a
    /// statement first run in a transaction that had already failed would fail there for good
    /// under that name. It is given a fresh name instead.
    @Test("a statement whose first run failed (in an aborted transaction) runs on the same connection afterwards")
    func failedFirstRunIsRetriedUnderAFreshName() async throws {
        let (db, cleanup) = try await database(connections: 1)
        defer { Task { await cleanup() } }
        // Seen once (unnamed): its next run is its first by name.
        #expect(try await db.query(Self.lookup, ["x"]).first?.int(0) == 0)
        let failure = await #expect(throws: StoreError.self) {
            try await db.transaction { (t) throws(StoreError) in
                do { _ = try await t.query("SELECT 1 / ?", [0]) } catch {}
                // The transaction has failed: this statement's Parse is refused (25P02).
                _ = try await t.query(Self.lookup, ["x"])
            }
        }
        #expect(failure != nil)
        // One connection: the same one, where the first name's Parse failed.
        #expect(try await db.query(Self.lookup, ["x"]).first?.int(0) == 0)
        #expect(try await db.query(Self.lookup, ["y"]).first?.int(0) == 0)
        let names = try await db.query("SELECT name FROM pg_prepared_statements WHERE statement LIKE 'SELECT COUNT(*) FROM vault_migrations WHERE name%'")
        #expect(try names.map { (r) throws(StoreError) in try r.string(0) }.contains { $0.hasSuffix("_r1") })
    }
}

/// Which statements `PostgresStatements` names (no server needed).
struct PreparableStatementTests {
    @Test("which statements are named: by their first word, never with a list of parameters")
    func whichStatementsArePrepared() {
        for text in ["SELECT 1", "  select a FROM t WHERE b = $1", "INSERT INTO t VALUES ($1)", "update t SET a = $1", "DELETE FROM t", "WITH x AS (SELECT 1) SELECT * FROM x",
                     "(SELECT a FROM t WHERE k = $1) UNION ALL (SELECT a FROM t WHERE k = $2)", "SELECT a FROM t WHERE b IN (SELECT c FROM u WHERE d = $1)"] {
            #expect(PostgresStatements.preparable(text), "\(text)")
        }
        for text in ["SELECT a FROM t WHERE b IN ($1, $2)", "DELETE FROM t WHERE a IN ($1)", "BEGIN", "COMMIT", "CREATE TABLE t (a INT)", "", "IN ($", "SET x = 1"] {
            #expect(!PostgresStatements.preparable(text), "\(text)")
        }
        #expect(PostgresStatements.hasParameterList("IN ($"))
        #expect(PostgresStatements.hasParameterList("x IN ($1)"))
        #expect(!PostgresStatements.hasParameterList("IN (SELECT"))
        #expect(!PostgresStatements.hasParameterList("IN ("))
        #expect(!PostgresStatements.hasParameterList("in ($1)"))
        #expect(PostgresStatements.hasParameterList(String("SELECT é WHERE a IN ($1)".dropFirst(0))))
    }
}
