import Foundation
@testable import Store
import Testing

/// A server's SQLite statements (`SQLiteStatements`): reads on read-only connections of their own, one statement
/// each, on the calling thread.
struct SQLiteStatementsTests {
    @Test func valuesComeBackAsThePoolReadsThem() async throws {
        let (db, dir) = try CallingThreadTests.make()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let tools = try Database(sqlitePath: dir + "/t.sqlite")  // GRDB's reader pool
        try await db.write("CREATE TABLE t (i INTEGER, s TEXT, b BLOB, f REAL, n TEXT)")
        try await db.write(
            "INSERT INTO t VALUES (?, ?, CAST(? AS BLOB), 2.75, NULL), (?, ?, NULL, -1.5, ?)",
            [Int64.max, "ünïcødé ✓", "bytes", -7, "", true])
        let sql = "SELECT i, s, b, f, n FROM t ORDER BY i"
        let fast = try await db.query(sql), pool = try await tools.query(sql)
        #expect(fast == pool)
        #expect(fast == [
            SQLRow([.int(-7), .text(""), .null, .int(-1), .text("1")]),  // true in a TEXT column: '1'
            SQLRow([.int(Int64.max), .text("ünïcødé ✓"), .text("bytes"), .int(2), .null]),
        ])
        // Bound values of every kind select the rows they name (an empty text is '', not NULL).
        #expect(try await db.query("SELECT count(*) FROM t WHERE s = ? AND n = ?", ["", true]).first?.int(0) == 1)
        #expect(try await db.query("SELECT count(*) FROM t WHERE i = ? AND n IS ?", [Int64.max, SQLValue.null]).first?.int(0) == 1)
        #expect(db.readers != nil && tools.readers == nil)
    }

    /// The connections are read-only: a statement that would write fails as a store error and
    /// changes nothing.
    @Test func aWriteThroughAReadFailsAndChangesNothing() async throws {
        let (db, dir) = try CallingThreadTests.make()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await db.write("CREATE TABLE t (v INTEGER)")
        try await db.write("INSERT INTO t VALUES (1)")
        await #expect(throws: StoreError.self) { try await db.query("DELETE FROM t RETURNING v") }
        await #expect(throws: StoreError.self) { try await db.query("INSERT INTO t VALUES (2) RETURNING v") }
        await #expect(throws: StoreError.self) { try await db.query("SELECT nope FROM t") }
        // One statement per text, and a value for each placeholder, as GRDB's statements required.
        await #expect(throws: StoreError.self) { try await db.query("SELECT v FROM t; DELETE FROM t") }
        await #expect(throws: StoreError.self) { try await db.query("SELECT v FROM t WHERE v = ? OR v = ?", [1]) }
        await #expect(throws: StoreError.self) { try await db.query("SELECT v FROM t WHERE v = ?", [1, 2]) }
        await #expect(throws: StoreError.self) { try await db.query("  ") }
        #expect(try await db.query("SELECT v FROM t; ").count == 1)
        await #expect(throws: StoreError.self) {
            try await db.transaction { (t) throws(StoreError) in try await t.query("INSERT INTO t VALUES (?); DELETE FROM t", [5]) }
        }
        #expect(try await db.query("SELECT v FROM t").map { try $0.int(0) } == [1])
    }

    /// A read sees every commit that returned before it, including the group commit's.
    @Test func readsSeeWhatWasCommittedBeforeThem() async throws {
        let (db, dir) = try CallingThreadTests.make()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await db.write("CREATE TABLE t (v INTEGER NOT NULL)")
        for i in 1...50 {
            try await db.write("INSERT INTO t VALUES (?)", [i])
            #expect(try await db.query("SELECT count(*), max(v) FROM t").first.map { [try $0.int(0), try $0.int(1)] } == [i, i])
        }
        // The schema changes after a statement was prepared: SQLite prepares it again, with the new columns.
        let all = "SELECT * FROM t ORDER BY v LIMIT 1"
        #expect(try await db.query(all).first?.values.count == 1)
        try await db.write("ALTER TABLE t ADD COLUMN w TEXT NOT NULL DEFAULT 'x'")
        #expect(try await db.query(all).first == SQLRow([.int(1), .text("x")]))
    }

    /// Reads from many tasks at once each get a connection of their own; idle ones beyond
    /// `keep` are closed.
    @Test func concurrentReadsEachHaveAConnection() async throws {
        let (db, dir) = try CallingThreadTests.make()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await db.write("CREATE TABLE t (v INTEGER NOT NULL)")
        _ = try await db.batch("INSERT INTO t VALUES (?)", (0..<100).map { [.int(Int64($0))] })
        let wrong = await withTaskGroup(of: Int.self) { tasks in
            for k in 0..<16 {
                tasks.addTask {
                    var wrong = 0
                    for i in 0..<200 {
                        let v = (k * 7 + i) % 100
                        let row = try? await db.query("SELECT v, v * 2 FROM t WHERE v = ?", [v]).first
                        if (try? row?.int(0)) != v || (try? row?.int(1)) != 2 * v { wrong += 1 }
                    }
                    return wrong
                }
            }
            return await tasks.reduce(0, +)
        }
        #expect(wrong == 0)
        #expect(db.readers!.idleCount <= db.readers!.keep)
        #expect(db.readers!.idleCount >= 1)
    }

    /// A read's bound values do not stay in its connection's prepared statement after it.
    @Test func boundValuesAreClearedAfterARead() async throws {
        let (db, dir) = try CallingThreadTests.make()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await db.write("CREATE TABLE t (k TEXT)")
        let sql = "SELECT count(*) FROM t WHERE k = ?"
        _ = try await db.query(sql, ["value-that-must-not-linger"])
        let texts = db.readers!.expandedStatements(sql)
        #expect(!texts.isEmpty)
        for t in texts {
            #expect(!t.contains("value-that-must-not-linger"), "\(t)")
            #expect(t.contains("NULL"), "\(t)")
        }
    }

    /// A server's transactions run their statements from prepared statements of the writer
    /// connection (`WriterStatements`): rows come back as GRDB's would, a duplicate key is
    /// `duplicate` and leaves the rest of the transaction, and no value stays bound.
    @Test func writerStatementsRunTransactions() async throws {
        let (db, dir) = try CallingThreadTests.make()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await db.write("CREATE TABLE t (k TEXT PRIMARY KEY, n INTEGER, f REAL)")
        let insert = "INSERT INTO t (k, n, f) VALUES (?, ?, ?) RETURNING k, n, f"
        let rows = try await db.transaction { (t) throws(StoreError) in
            let first = try await t.query(insert, ["secret-ish key", 41, SQLValue.null])
            do throws(StoreError) {
                _ = try await t.query(insert, ["secret-ish key", 1, SQLValue.null])
                Issue.record("a duplicate key was inserted")
            } catch {
                #expect(error.code == .duplicate)
            }
            let second = try await t.query(insert, ["", Int64.min, true])
            return first + second
        }
        #expect(rows == [SQLRow([.text("secret-ish key"), .int(41), .null]), SQLRow([.text(""), .int(Int64.min), .int(1)])])
        #expect(try await db.query("SELECT count(*) FROM t").first?.int(0) == 2)
        let expanded = try await db.sqlitePool!.writeWithoutTransaction { _ in db.writerStatements!.expanded(insert) }
        #expect(expanded == insert.replacingOccurrences(of: "?", with: "NULL"), "\(expanded ?? "nil")")
    }

    /// A store's last connection to close checkpoints the WAL and removes it: the read-only
    /// connections close before GRDB's writer.
    @Test func closingTheStoreRemovesTheWAL() async throws {
        let dir = NSTemporaryDirectory() + "vault-calling-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        do {
            let db = try Database(sqlitePath: dir + "/t.sqlite", onCallingThread: true)
            try await db.write("CREATE TABLE t (v INTEGER)")
            try await db.write("INSERT INTO t VALUES (1)")
            #expect(try await db.query("SELECT v FROM t").count == 1)
            #expect(FileManager.default.fileExists(atPath: dir + "/t.sqlite-wal"))
        }
        #expect(!FileManager.default.fileExists(atPath: dir + "/t.sqlite-wal"))
    }

    /// A read-only connection keeps its sorts in memory as every connection of the store does.
    @Test func sortsStayInMemory() async throws {
        let (db, dir) = try CallingThreadTests.make()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(try await db.query("PRAGMA temp_store").first?.int(0) == 2)
        #expect(try await db.scan("PRAGMA temp_store").first?.int(0) == 2)
    }
}
