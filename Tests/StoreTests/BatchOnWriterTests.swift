import Foundation
import GRDB
@testable import Store
import Synchronization
import Testing

/// A server's batch (`Database.batch`, the tokens' group commit) with no transaction open runs on
/// the writer's queue, BEGIN to COMMIT in one trip: its statements (rows, indexes, triggers) do
/// not take the calling thread (an event loop). A batch that finds a transaction open joins it.
struct BatchOnWriterTests {
    /// Runs its jobs on one thread of its own, so a test knows which thread called.
    final class OneThreadExecutor: TaskExecutor, @unchecked Sendable {
        private let condition = NSCondition()
        private var jobs: [UnownedJob] = []
        let thread = Mutex<UInt>(0)

        init() {
            let t = Thread { [self] in
                thread.withLock { $0 = UInt(bitPattern: Int(pthread_self())) }
                while true {
                    condition.lock()
                    while jobs.isEmpty { condition.wait() }
                    let job = jobs.removeFirst()
                    condition.unlock()
                    job.runSynchronously(on: asUnownedTaskExecutor())
                }
            }
            t.start()
            while thread.withLock({ $0 }) == 0 { usleep(1000) }
        }

        func enqueue(_ job: UnownedJob) {
            condition.withLock {
                jobs.append(job)
                condition.signal()
            }
        }
    }

    /// The threads a SQL function `caller_thread()` was called on, in order.
    final class Seen: @unchecked Sendable {
        private let lock = NSLock()
        private var threads: [UInt] = []
        func add(_ t: UInt) { lock.withLock { threads.append(t) } }
        func take() -> [UInt] { lock.withLock { defer { threads = [] }; return threads } }
    }

    /// `caller_thread()` on the writer's connection: records the thread running the statement.
    static func threads(_ db: Store.Database) -> Seen {
        let seen = Seen()
        db.sqlitePool!.writeWithoutTransaction { c in
            c.add(function: DatabaseFunction("caller_thread", argumentCount: 0, pure: false) { _ in
                seen.add(UInt(bitPattern: Int(pthread_self())))
                return 1
            })
        }
        return seen
    }

    @Test func aLoneBatchRunsOnTheWritersQueueAndATransactionOnTheCallingThread() async throws {
        let (db, dir) = try CallingThreadTests.make()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await db.write("CREATE TABLE t (v INTEGER NOT NULL, w INTEGER NOT NULL)")
        let seen = Self.threads(db)
        let executor = OneThreadExecutor()
        let caller = executor.thread.withLock { $0 }
        let commits = db.group.commits
        try await withTaskExecutorPreference(executor) {
            _ = try await db.batch("INSERT INTO t (v, w) VALUES (?, caller_thread())", [[.int(1)], [.int(2)]])
            let batchThreads = seen.take()
            #expect(batchThreads.count == 2)
            #expect(!batchThreads.contains(caller), "a lone batch ran its statements on the calling thread")
            // The check can tell: a transaction's statements run on the calling thread.
            try await db.transaction { (t) throws(StoreError) in _ = try await t.query("INSERT INTO t (v, w) VALUES (3, caller_thread())") }
            #expect(seen.take() == [caller])
        }
        #expect(db.group.commits == commits + 2)
        let other = try Store.Database(sqlitePath: dir + "/t.sqlite")
        #expect(try await other.query("SELECT v FROM t ORDER BY v").map { try $0.int(0) } == [1, 2, 3])
    }

    @Test func aBatchJoinsAnOpenTransactionAndCommitsWithIt() async throws {
        let (db, dir) = try CallingThreadTests.make()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let other = try Store.Database(sqlitePath: dir + "/t.sqlite")
        try await db.write("CREATE TABLE t (v INTEGER NOT NULL UNIQUE)")
        let commits = db.group.commits
        let first = Task {
            try await db.transaction { (t) throws(StoreError) in
                try await t.query("INSERT INTO t (v) VALUES (1)")
                // Holds the transaction open until the batch waits for it.
                while !db.writersWaiting { try? await Task.sleep(for: .milliseconds(1)) }
            }
        }
        while db.group.members == 0 { try await Task.sleep(for: .milliseconds(1)) }
        let batch = Task { try await db.batch("INSERT INTO t (v) VALUES (?)", [[.int(2)], [.int(3)]]) }
        try await first.value
        _ = try await batch.value
        // One commit for both: the batch ran inside the first's transaction.
        #expect(db.group.commits == commits + 1)
        #expect(try await other.query("SELECT v FROM t ORDER BY v").map { try $0.int(0) } == [1, 2, 3])
    }
}
