import Foundation
import GRDB

/// Group commit of a server's SQLite writes (`Database.onCallingThread`): a transaction that
/// finds others waiting for the write lock when its body is done does not commit. It hands the
/// lock to the next one, which runs in the same SQLite transaction, and the last of the group
/// commits for all of them: one COMMIT, one fsync, one WAL append of each page the group changed.
/// Each caller still returns only once the commit that holds its writes is durable.
///
/// Each member after the first runs inside a savepoint: a body that throws is rolled back alone
/// (the members before and after it commit), and its caller is answered at once. A failed COMMIT fails every
/// member of the group, none of which was answered yet. Issue 16 measured a payment's two
/// commits (its intent, its outcome) as a sixth of the sidecar's CPU: the fsync and the WAL
/// writes, paid per payment where the tokens' own group commit paid them per batch.
///
/// The state is read and changed only by the holder of the database's write lock (`AsyncLock`),
/// whose hand-over orders every access.
final class CommitGroup: @unchecked Sendable {
    /// At most this many transactions share one commit: the first of a group waits for the
    /// bodies of the others, so this bounds what the group adds to its latency.
    static let maxMembers = 32

    /// A transaction is open (BEGIN IMMEDIATE ran; no COMMIT yet).
    var open = false
    /// Transactions run in the open one so far.
    var members = 0
    /// Members whose bodies are done, waiting for the group's COMMIT: nil, or why it failed.
    var pending: [CheckedContinuation<StoreError?, Never>] = []
    /// COMMITs made (tests).
    var commits = 0
}

extension Database {
    /// `transaction` on a server's SQLite store: see `CommitGroup`.
    func grouped<T: Sendable>(
        _ pool: DatabasePool, _ lock: AsyncLock, _ body: (Transaction) async throws(StoreError) -> T
    ) async throws(StoreError) -> T {
        await lock.acquire()
        return try await groupedHoldingLock(pool, lock, body)
    }

    /// `sql` once per argument list in one transaction (`batch` of a server's store). When no
    /// transaction is open, BEGIN, the statements and the COMMIT go to the writer's queue in one
    /// trip: the statements (the rows, their indexes and triggers) run there, not on the calling
    /// thread (an event loop), and the disk wait was already there. Otherwise the batch joins the
    /// open transaction as a member (`grouped`).
    func batchOnWriter(_ pool: DatabasePool, _ lock: AsyncLock, _ sql: String, _ lists: [[SQLValue]]) async throws(StoreError) -> [[SQLRow]] {
        await lock.acquire()
        guard !group.open, let writer = writerStatements else {
            return try await groupedHoldingLock(pool, lock) { (t) throws(StoreError) in
                var out: [[SQLRow]] = []
                for values in lists { out.append(try await t.query(sql, values)) }
                return out
            }
        }
        // Not `self` in the writer's closure: the store's last reference must not go on the writer's queue.
        let checkpointer = self.checkpointer
        let result = await withCheckedContinuation { (c: CheckedContinuation<Result<[[SQLRow]], StoreError>, Never>) in
            pool.asyncWriteWithoutTransaction { db in
                do {
                    try db.execute(sql: "BEGIN IMMEDIATE")
                    let out = try lists.map { try writer.run(db, sql, $0) }
                    try db.execute(sql: "COMMIT")
                    c.resume(returning: .success(out))
                    checkpointer?.restartIfWanted(db)
                } catch {
                    if db.isInsideTransaction { try? db.execute(sql: "ROLLBACK") }
                    c.resume(returning: .failure(Self.map(error)))
                }
            }
        }
        if case .success = result { group.commits += 1 }
        lock.release()
        return try result.get()
    }

    private func groupedHoldingLock<T: Sendable>(
        _ pool: DatabasePool, _ lock: AsyncLock, _ body: (Transaction) async throws(StoreError) -> T
    ) async throws(StoreError) -> T {
        let group = self.group
        if !group.open {
            do throws(StoreError) {
                // On this thread when the write lock is free (no hop to GRDB's writer queue and
                // back); when another process holds it, on the writer's queue, which waits for it
                // up to the busy timeout without holding up this thread.
                let begun = try await Self.sqlite { try pool.writeWithoutTransaction { db in try WriterStatements.beginWithoutWaiting(db, timeout: Self.busyTimeout) } }
                if !begun {
                    try await Self.sqlite { try await pool.writeWithoutTransaction { db in try db.execute(sql: "BEGIN IMMEDIATE") } }
                }
            } catch {
                lock.release()
                throw error
            }
            group.open = true
        }
        group.members += 1
        // The first member needs no savepoint: should it fail, the whole transaction is rolled
        // back (nothing else is in it yet). Only those that join pay for one (SQLite copies each
        // page a savepoint changes first): a lone transaction mostly runs first (and the tokens'
        // batches, `GroupCommit`, join only a transaction already open: `batchOnWriter`).
        let first = group.members == 1
        var result: Result<T, StoreError>
        do throws(StoreError) {
            if !first { try Self.onWriter(pool, "SAVEPOINT vault_member") }
            let value = try await body(Transaction(connection: .sqlite(pool, writer: writerStatements), dialect: dialect))
            if !first { try Self.onWriter(pool, "RELEASE vault_member") }
            result = .success(value)
        } catch {
            undoMember(pool, group, first: first)
            result = .failure(error)
        }
        // A body that went on after SQLite rolled the transaction back (an error it swallowed)
        // would have written outside it: nothing of the group may be taken as committed then.
        if group.open, !Self.insideTransaction(pool) {
            abandon(pool, group)
            if case .success = result { result = .failure(Self.lost) }
        }
        if group.open, group.members < CommitGroup.maxMembers, lock.hasWaiters {
            // Others wait: the next one runs in this transaction, and the last one commits. A
            // member that failed waits too: what failed it may be another member's row, which a
            // read after its answer must find committed (or the group's failure is its answer).
            let failure = await withCheckedContinuation { (c: CheckedContinuation<StoreError?, Never>) in
                group.pending.append(c)
                lock.release()
            }
            if let failure { throw failure }
            return try result.get()
        }
        var failure: StoreError?
        if group.open {
            failure = await Self.commit(pool, checkpointer)
            group.commits += 1
        }
        let pending = group.pending
        group.pending = []
        group.open = false
        group.members = 0
        lock.release()
        for waiter in pending { waiter.resume(returning: failure) }
        if let failure { throw failure }
        return try result.get()
    }

    static let lost = StoreError(.unavailable, "the store rolled back the transaction this write shared with others; nothing of it was kept")

    static func insideTransaction(_ pool: DatabasePool) -> Bool {
        pool.writeWithoutTransaction { $0.isInsideTransaction }
    }

    /// Gives the group up: rolled back if still open, its waiting members failed.
    private func abandon(_ pool: DatabasePool, _ group: CommitGroup) {
        Self.rollback(pool)
        for waiter in group.pending { waiter.resume(returning: Self.lost) }
        group.pending = []
        group.open = false
        group.members = 0
    }

    /// Undoes a member whose body threw: the whole transaction when it was the first, else back
    /// to its savepoint. Should SQLite have rolled back the whole transaction itself (an I/O
    /// error, a full disk), or the undo fail, the group is given up: the members waiting for its
    /// commit are failed now and the next caller begins a new one.
    private func undoMember(_ pool: DatabasePool, _ group: CommitGroup, first: Bool) {
        if first {
            // Alone in the transaction: all of it goes, and the next caller begins a new one.
            Self.rollback(pool)
            group.open = false
            group.members = 0
            return
        }
        // Should the undo itself fail, the member's writes could end up in the group's commit:
        // the whole group is rolled back instead.
        let undone = (try? pool.writeWithoutTransaction { db -> Bool in
            guard db.isInsideTransaction else { return false }
            try db.execute(sql: "ROLLBACK TO vault_member")
            try db.execute(sql: "RELEASE vault_member")
            return db.isInsideTransaction
        }) ?? false
        if !undone { abandon(pool, group) }
    }

    /// Whether a task waits for the write lock (tests).
    var writersWaiting: Bool {
        if case .sqlite(_, let lock) = engine { return lock.hasWaiters }
        return false
    }

    /// One statement on the writer connection, on this thread.
    static func onWriter(_ pool: DatabasePool, _ sql: String) throws(StoreError) {
        do { try pool.writeWithoutTransaction { db in try db.execute(sql: sql) } } catch {
            throw map(error)
        }
    }

    /// COMMIT (rolled back if it fails) on the writer's own queue, not an event loop: it waits
    /// for the disk. Not GRDB's async call, which a cancelled task skips: the caller that commits
    /// may be a request whose client went away, and the group's other members would be left waiting.
    static func commit(_ pool: DatabasePool, _ checkpointer: SQLiteCheckpointer?) async -> StoreError? {
        await withCheckedContinuation { (c: CheckedContinuation<StoreError?, Never>) in
            pool.asyncWriteWithoutTransaction { db in
                do {
                    try db.execute(sql: "COMMIT")
                    c.resume(returning: nil)
                    // The WAL starts over here when asked (`SQLiteCheckpointer`), its callers answered.
                    checkpointer?.restartIfWanted(db)
                } catch {
                    if db.isInsideTransaction { try? db.execute(sql: "ROLLBACK") }
                    c.resume(returning: map(error))
                }
            }
        }
    }
}
