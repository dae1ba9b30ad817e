import Foundation
import Synchronization
@testable import Store
import Testing

/// A server's SQLite store (`Database.onCallingThread`): its statements run on the calling
/// thread, and a transaction whose task is cancelled is still rolled back (GRDB's async call
/// would not run in a cancelled task, and the writer would stay inside the transaction: the
/// next writes would join it).
struct CallingThreadTests {
    static func make() throws -> (Database, String) {
        let dir = NSTemporaryDirectory() + "vault-calling-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return (try Database(sqlitePath: dir + "/t.sqlite", onCallingThread: true), dir)
    }

    @Test(arguments: [false, true])
    func aCancelledTransactionIsRolledBack(onCallingThread: Bool) async throws {
        let dir = NSTemporaryDirectory() + "vault-calling-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let db = try Database(sqlitePath: dir + "/t.sqlite", onCallingThread: onCallingThread)
        try await db.write("CREATE TABLE t (v TEXT NOT NULL)")
        let inserted = AsyncStream<Void>.makeStream()
        let task = Task {
            try await db.transaction { (t) throws(StoreError) in
                try await t.query("INSERT INTO t (v) VALUES (?)", ["cancelled"])
                inserted.continuation.yield()
                // Waits for its cancellation, then fails as a request that gave up would.
                while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(2)) }
                throw StoreError(.unavailable, "cancelled")
            }
        }
        for await _ in inserted.stream { break }
        task.cancel()
        await #expect(throws: StoreError.self) { try await task.value }
        // The writer is out of the transaction: this write commits on its own, the first never does.
        try await db.write("INSERT INTO t (v) VALUES (?)", ["after"])
        let rows = try await db.query("SELECT v FROM t ORDER BY v")
        #expect(rows.map { $0.optionalString(0) } == ["after"])
        let inside = try await db.sqlitePool!.writeWithoutTransaction { $0.isInsideTransaction }
        #expect(!inside)
    }

    /// Statement and savepoint journals hold prior images of the store's pages: kept in memory
    /// (`temp_store = MEMORY`) on every connection, never in a file under /var/tmp.
    @Test func journalsAndSortsStayInMemory() async throws {
        let (db, dir) = try Self.make()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(try await db.query("PRAGMA temp_store").first?.int(0) == 2)
        let writer = try await db.sqlitePool!.writeWithoutTransaction { try Int.fetchOne($0, sql: "PRAGMA temp_store") }
        #expect(writer == 2)
    }

    @Test func readsAndTransactionsRunOnTheCallingThread() async throws {
        let (db, dir) = try Self.make()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await db.write("CREATE TABLE t (v INTEGER NOT NULL)")
        try await db.transaction { (t) throws(StoreError) in
            for i in 0..<10 { try await t.query("INSERT INTO t (v) VALUES (?)", [i]) }
        }
        #expect(try await db.query("SELECT count(*) FROM t").first?.int(0) == 10)
        #expect(try await db.scan("SELECT sum(v) FROM t").first?.int(0) == 45)
    }
}

/// Group commit of a server's SQLite writes (`CommitGroup`).
struct CommitGroupTests {
    @Test func concurrentTransactionsShareCommitsAndAFailedOneIsRolledBackAlone() async throws {
        let (db, dir) = try CallingThreadTests.make()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Another handle on the file (another process would have its own): it sees committed rows only.
        let other = try Database(sqlitePath: dir + "/t.sqlite")
        try await db.write("CREATE TABLE t (v INTEGER NOT NULL)")
        let before = db.group.commits
        let outcomes = await withTaskGroup(of: (Int, Bool, Bool).self) { tasks in
            for i in 0..<60 {
                tasks.addTask {
                    do throws(StoreError) {
                        try await db.transaction { (t) throws(StoreError) in
                            try await t.query("INSERT INTO t (v) VALUES (?)", [i])
                            try? await Task.sleep(for: .milliseconds(1))
                            try await t.query("INSERT INTO t (v) VALUES (?)", [1000 + i])
                            if i == 7 { throw StoreError(.unavailable, "refused") }
                        }
                        // Returned: both rows are committed, visible to another connection.
                        let seen = try await other.query("SELECT count(*) FROM t WHERE v IN (?, ?)", [i, 1000 + i]).first?.int(0)
                        return (i, true, seen == 2)
                    } catch {
                        return (i, false, false)
                    }
                }
            }
            var out: [(Int, Bool, Bool)] = []
            for await o in tasks { out.append(o) }
            return out
        }
        for (i, ok, seen) in outcomes {
            #expect(ok == (i != 7), "transaction \(i)")
            if i != 7 { #expect(seen, "transaction \(i) returned before its rows were committed") }
        }
        let rows = try await other.query("SELECT v FROM t ORDER BY v").map { try $0.int(0) }
        #expect(rows == (0..<60).filter { $0 != 7 } + (0..<60).filter { $0 != 7 }.map { 1000 + $0 })
        let commits = db.group.commits - before
        #expect(commits >= 1 && commits < 60, "\(commits) commits for 60 transactions")
    }

    /// BEGIN IMMEDIATE runs on the calling thread without waiting; while another connection
    /// (another process) holds the write lock, the transaction waits for it on GRDB's writer
    /// queue, as long as the busy timeout, instead of failing with SQLITE_BUSY.
    @Test func aTransactionWaitsForAnotherConnectionsWriteLock() async throws {
        let (db, dir) = try CallingThreadTests.make()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let other = try Database(sqlitePath: dir + "/t.sqlite")
        try await db.write("CREATE TABLE t (v INTEGER NOT NULL)")
        let otherWriter = try #require(other.sqlitePool)
        try await otherWriter.writeWithoutTransaction { try $0.execute(sql: "BEGIN IMMEDIATE") }
        let done = Atomic<Bool>(false), doneWhileHeld = Atomic<Bool>(false)
        // The other connection lets go from a thread of its own after 300 ms (a busy test run
        // cannot hold it back behind the task pool for the busy timeout), noting first whether
        // the transaction had gone on while it held the lock.
        let releaser = Thread {
            Thread.sleep(forTimeInterval: 0.3)
            doneWhileHeld.store(done.load(ordering: .sequentiallyConsistent), ordering: .sequentiallyConsistent)
            try? otherWriter.writeWithoutTransaction {
                try $0.execute(sql: "INSERT INTO t (v) VALUES (2)")
                try $0.execute(sql: "COMMIT")
            }
        }
        let task = Task {
            _ = try await db.transaction { (t) throws(StoreError) in try await t.query("INSERT INTO t (v) VALUES (?)", [1]) }
            done.store(true, ordering: .sequentiallyConsistent)
        }
        releaser.start()
        try await task.value
        let early = doneWhileHeld.load(ordering: .sequentiallyConsistent)
        #expect(!early, "the transaction went on while another connection held the write lock")
        #expect(try await db.query("SELECT v FROM t ORDER BY v").map { try $0.int(0) } == [1, 2])
        // The writer's busy timeout is the store's again, and the next transaction begins at once.
        let timeout = try await db.sqlitePool!.writeWithoutTransaction { try Int.fetchOne($0, sql: "PRAGMA busy_timeout") }
        #expect(timeout == Int(Database.busyTimeout * 1000))
        _ = try await db.transaction { (t) throws(StoreError) in try await t.query("INSERT INTO t (v) VALUES (?)", [3]) }
        #expect(try await other.query("SELECT count(*) FROM t").first?.int(0) == 3)
    }

    @Test func writesAndBatchesJoinTheGroup() async throws {
        let (db, dir) = try CallingThreadTests.make()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await db.write("CREATE TABLE t (v INTEGER NOT NULL UNIQUE)")
        await withTaskGroup(of: Void.self) { tasks in
            for i in 0..<20 {
                tasks.addTask {
                    if i % 2 == 0 {
                        _ = try? await db.write("INSERT INTO t (v) VALUES (?)", [i])
                    } else {
                        _ = try? await db.batch("INSERT INTO t (v) VALUES (?)", [[.int(Int64(i))], [.int(Int64(100 + i))]])
                    }
                }
            }
        }
        // A batch with a duplicate fails whole and alone.
        await #expect(throws: StoreError.self) { try await db.batch("INSERT INTO t (v) VALUES (?)", [[.int(500)], [.int(0)]]) }
        let rows = try await db.query("SELECT v FROM t ORDER BY v").map { try $0.int(0) }
        #expect(rows == Array(0..<20) + (0..<20).filter { $0 % 2 == 1 }.map { 100 + $0 })
    }

    /// A member that fails while others wait is answered after the group's commit: what failed it
    /// may be another member's row (a duplicate key), which a read after the answer must find.
    @Test func aFailedMemberIsAnsweredOnlyOnceTheGroupCommitted() async throws {
        let (db, dir) = try CallingThreadTests.make()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let other = try Database(sqlitePath: dir + "/t.sqlite")
        try await db.write("CREATE TABLE t (v INTEGER NOT NULL UNIQUE)")
        let release = Mutex(false)
        let first = Task {
            try await db.transaction { (t) throws(StoreError) in
                try await t.query("INSERT INTO t (v) VALUES (1)")
                while !db.writersWaiting { try? await Task.sleep(for: .milliseconds(1)) }
            }
        }
        while db.group.members == 0 { try await Task.sleep(for: .milliseconds(1)) }
        // The second hits the first's row (not committed yet) and fails, while a third waits.
        let second = Task { () -> Bool in
            do throws(StoreError) {
                try await db.transaction { (t) throws(StoreError) in
                    while !db.writersWaiting { try? await Task.sleep(for: .milliseconds(1)) }
                    try await t.query("INSERT INTO t (v) VALUES (1)")
                }
                return false
            } catch {
                // Answered: the row that failed it is there for anyone to read.
                return (try? await other.query("SELECT count(*) FROM t WHERE v = 1").first?.int(0)) == 1
            }
        }
        while db.group.members < 2 { try await Task.sleep(for: .milliseconds(1)) }
        let third = Task {
            try await db.transaction { (t) throws(StoreError) in
                try await t.query("INSERT INTO t (v) VALUES (3)")
                while !release.withLock({ $0 }) { try? await Task.sleep(for: .milliseconds(1)) }
            }
        }
        try await Task.sleep(for: .milliseconds(100))
        release.withLock { $0 = true }
        try await first.value
        try await third.value
        #expect(await second.value, "the failed member was answered before the row that failed it was committed")
        #expect(try await other.query("SELECT v FROM t ORDER BY v").map { try $0.int(0) } == [1, 3])
    }

    @Test func membersWaitingForACommitThatSQLiteRolledBackAreFailed() async throws {
        let (db, dir) = try CallingThreadTests.make()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await db.write("CREATE TABLE t (v INTEGER NOT NULL)")
        let first = Task {
            try await db.transaction { (t) throws(StoreError) in
                try await t.query("INSERT INTO t (v) VALUES (1)")
                // Done once the second waits for the lock: then this one waits for the group's commit.
                while !db.writersWaiting { try? await Task.sleep(for: .milliseconds(1)) }
            }
        }
        while db.group.members == 0 { try await Task.sleep(for: .milliseconds(1)) }
        let second = Task {
            try await db.transaction { (t) throws(StoreError) in
                // As SQLite does itself on an I/O error or a full disk: the whole transaction goes.
                try await t.query("ROLLBACK")
                throw StoreError(.unavailable, "disk I/O error")
            }
        }
        await #expect(throws: StoreError.self) { try await second.value }
        await #expect(throws: StoreError.self) { try await first.value }
        #expect(try await db.query("SELECT count(*) FROM t").first?.int(0) == 0)
        // The next write begins a transaction of its own.
        try await db.write("INSERT INTO t (v) VALUES (2)")
        #expect(try await db.query("SELECT v FROM t").map { try $0.int(0) } == [2])
    }
}
