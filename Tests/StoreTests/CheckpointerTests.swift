import Foundation
@testable import Store
import Testing

/// A server's SQLite store checkpoints its WAL on a thread of its own (`SQLiteCheckpointer`), not
/// inside a COMMIT, and the WAL still starts over instead of growing without end.
struct CheckpointerTests {
    /// The writer connection has no automatic checkpoint: SQLite's default hook (a checkpoint in
    /// the COMMIT that passes 1000 pages) is replaced by the checkpointer's signal. A tool's store
    /// (not `onCallingThread`) keeps the default.
    @Test func theWriterDoesNotCheckpointInItsCommits() async throws {
        let (db, dir) = try CallingThreadTests.make()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let server = try await db.sqlitePool!.writeWithoutTransaction { try Int.fetchOne($0, sql: "PRAGMA wal_autocheckpoint") }
        #expect(server == 0)
        let tool = try Database(sqlitePath: dir + "/t.sqlite")
        #expect(tool.checkpointer == nil)
        let toolSetting = try await tool.sqlitePool!.writeWithoutTransaction { try Int.fetchOne($0, sql: "PRAGMA wal_autocheckpoint") }
        #expect(toolSetting == 1000)
    }

    /// Some 120 MiB committed in 300 transactions: the checkpoints ran, and the WAL started over
    /// (it stays near the restart size, 32 MiB, instead of holding every page written). All rows
    /// are there.
    @Test func theWALIsCheckpointedAndStartsOver() async throws {
        let (db, dir) = try CallingThreadTests.make()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await db.write("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        let row = SQLValue.text(String(repeating: "x", count: 4000))
        var largest: UInt64 = 0
        for batch in 0..<300 {
            _ = try await db.batch("INSERT INTO t (k, v) VALUES (?, ?)", (0..<100).map { [.int(Int64(batch * 100 + $0)), row] })
            let size = (try? FileManager.default.attributesOfItem(atPath: dir + "/t.sqlite-wal")[.size] as? UInt64) ?? 0
            largest = max(largest, size)
        }
        let checkpointer = try #require(db.checkpointer)
        #expect(checkpointer.checkpoints >= 10, "\(checkpointer.checkpoints) checkpoints")
        // 120 MiB written; the WAL never held more than the restart size and what came meanwhile.
        #expect(largest < 64 << 20, "the WAL grew to \(largest) bytes")
        #expect(try await db.query("SELECT count(*) FROM t").first?.int(0) == 30_000)
    }
}
