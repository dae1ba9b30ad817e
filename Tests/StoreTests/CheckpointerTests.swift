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
        // The checkpoints' thread carries its name where `top -H` and `perf` read it.
        #expect(Self.threadNames().contains(SQLiteCheckpointer.threadName))
        let tool = try Database(sqlitePath: dir + "/t.sqlite")
        #expect(tool.checkpointer == nil)
        let toolSetting = try await tool.sqlitePool!.writeWithoutTransaction { try Int.fetchOne($0, sql: "PRAGMA wal_autocheckpoint") }
        #expect(toolSetting == 1000)
    }

    /// Some 160 MiB committed in 400 transactions: the checkpoints ran on their thread, and the
    /// writer started the WAL over after a COMMIT once it held 32 MiB (without the restart it would
    /// hold every page written). All rows are there.
    @Test func theWALIsCheckpointedAndStartsOver() async throws {
        let (db, dir) = try CallingThreadTests.make()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await db.write("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        let row = SQLValue.text(String(repeating: "x", count: 4000))
        var largest: UInt64 = 0
        for batch in 0..<400 {
            _ = try await db.batch("INSERT INTO t (k, v) VALUES (?, ?)", (0..<100).map { [.int(Int64(batch * 100 + $0)), row] })
            let size = (try? FileManager.default.attributesOfItem(atPath: dir + "/t.sqlite-wal")[.size] as? UInt64) ?? 0
            largest = max(largest, size)
        }
        let checkpointer = try #require(db.checkpointer)
        #expect(checkpointer.checkpoints >= 10, "\(checkpointer.checkpoints) checkpoints")
        // The WAL started over: by the writer's RESTART under a steady load, or by SQLite itself
        // when a slow writer (a loaded machine) found it wholly copied.
        #expect(checkpointer.walStartedOver >= 1, "the WAL never started over")
        // 160 MiB written; the WAL held the restart size and what came meanwhile (a checkpointer
        // thread slow to run on a loaded machine delays a restart, hence the margin).
        #expect(largest < 96 << 20, "the WAL grew to \(largest) bytes")
        #expect(try await db.query("SELECT count(*) FROM t").first?.int(0) == 40_000)
    }

    /// A transaction's COMMIT (not only a batch's) starts the WAL over when asked.
    @Test func aTransactionsCommitStartsTheWALOver() async throws {
        let (db, dir) = try CallingThreadTests.make()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await db.write("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        let row = String(repeating: "y", count: 4000)
        for n in 0..<400 {
            try await db.transaction { (t) throws(StoreError) in
                for i in 0..<100 { try await t.query("INSERT INTO t (k, v) VALUES (?, ?)", [n * 100 + i, row]) }
            }
        }
        #expect(try #require(db.checkpointer).walStartedOver >= 1, "the WAL never started over")
    }

    /// The kernel's names of this process's threads.
    static func threadNames() -> [String] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.compactMap { try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8) }
            .map { $0.trimmingCharacters(in: .newlines) }
    }
}
