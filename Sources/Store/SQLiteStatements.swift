import Foundation
import GRDB
import GRDBSQLite
import Synchronization

/// The read-only SQLite connections of a server's store (`Database.onCallingThread`): a read
/// takes an idle connection, runs its one statement from that connection's prepared statements,
/// and gives it back, all on the calling thread.
///
/// GRDB's `DatabasePool.read` does the same through its reader pool: a barrier queue, a
/// semaphore, a dispatch group, a lock, a queue's `sync`, a schema-version statement, a
/// transaction around the statement and GRDB's row objects. Issue 16 measured all that at about
/// 40 µs of CPU per read on the 2-core machine (a tokenize's one velocity read was a tenth of its
/// cost), against a few µs for the statement itself.
///
/// One statement in autocommit mode reads one snapshot of the WAL, which is all a read needs.
/// Connections open read-only (`SQLITE_OPEN_READONLY`: a statement that would write fails), wait
/// up to 10 s for a lock as the pool's connections do, and keep temporary sorts in memory
/// (`temp_store = MEMORY`, as every connection of the store). A connection is used by one thread
/// at a time (`SQLITE_OPEN_NOMUTEX`); one whose statement failed is closed, not reused. Bound
/// values are cleared after each run, so no connection keeps a read's arguments.
final class SQLiteReaders: Sendable {
    let path: String
    /// Idle connections kept for reuse; more may be open at once (one per thread reading), and
    /// those beyond this are closed when given back.
    let keep: Int
    private let idle = Mutex<[Connection]>([])

    init(path: String, keep: Int) {
        self.path = path
        self.keep = keep
    }

    /// Runs `sql` (one read-only statement) with `values` bound to its `?` in order: its rows.
    /// - Throws: `StoreError`, as `Database.map` makes them from a `DatabaseError` (the SQLite
    ///   result code only: neither the statement nor its values).
    func read(_ sql: String, _ values: [SQLValue]) throws(StoreError) -> [SQLRow] {
        let connection = try take()
        do {
            let rows = try connection.run(sql, values)
            give(connection)
            return rows
        } catch {
            // Closed (its deinit), not reused: whatever state the failure left it in goes with it.
            throw Database.map(error)
        }
    }

    private func take() throws(StoreError) -> Connection {
        if let c = idle.withLock({ $0.popLast() }) { return c }
        do { return try Connection(path: path) } catch { throw Database.map(error) }
    }

    private func give(_ connection: Connection) {
        let extra: Connection? = idle.withLock { list in
            guard list.count < keep else { return connection }
            list.append(connection)
            return nil
        }
        _ = extra  // closed here, outside the lock, when the last reference goes
    }

    /// Closes the idle connections (`Database`'s deinit: before the pool's writer, so that the
    /// last connection to close checkpoints the WAL and removes its files, as GRDB's pool does).
    func closeIdle() {
        let closing = idle.withLock { list in
            defer { list.removeAll() }
            return list
        }
        _ = closing
    }

    /// The connections idle now (tests).
    var idleCount: Int { idle.withLock { $0.count } }

    /// `sqlite3_expanded_sql` of `sql`'s prepared statement in each idle connection that has it:
    /// the text with its bound values as they stand (tests: none stays bound after a read).
    func expandedStatements(_ sql: String) -> [String] {
        idle.withLock { list in
            list.compactMap { c in
                guard let s = c.statements.prepared[sql], let text = sqlite3_expanded_sql(s) else { return nil }
                defer { sqlite3_free(text) }
                return String(cString: text)
            }
        }
    }

    /// One read-only connection and its prepared statements.
    final class Connection: @unchecked Sendable {
        // @unchecked: one thread at a time, handed over under `SQLiteReaders.idle`'s lock.
        let handle: OpaquePointer
        let statements: SQLiteStatements

        init(path: String) throws(DatabaseError) {
            let h = try openConnection(path, SQLITE_OPEN_READONLY, first: "PRAGMA temp_store = MEMORY")
            handle = h
            statements = SQLiteStatements(handle: h)
        }

        deinit {
            statements.finalizeAll()
            sqlite3_close_v2(handle)
        }

        func run(_ sql: String, _ values: [SQLValue]) throws(DatabaseError) -> [SQLRow] { try statements.run(sql, values) }
    }
}

/// The prepared statements of one SQLite connection, by SQL text, and running them: a server's
/// reads (`SQLiteReaders`) and the statements of its transactions on the writer connection
/// (`WriterStatements`). A statement's bound values are cleared once it has run, so a prepared
/// statement never keeps a call's arguments.
final class SQLiteStatements: @unchecked Sendable {
    // @unchecked: used by the one thread that holds its connection at the time.
    let handle: OpaquePointer
    private(set) var prepared: [String: OpaquePointer] = [:]
    /// Prepared statements kept (the vault's statements are a few dozen texts; one-off texts
    /// beyond this empty the cache rather than grow it).
    static let maxStatements = 256

    init(handle: OpaquePointer) { self.handle = handle }

    deinit { finalizeAll() }

    func finalizeAll() {
        for s in prepared.values { sqlite3_finalize(s) }
        prepared.removeAll()
    }

    func statement(_ sql: String) throws(DatabaseError) -> OpaquePointer {
        if let s = prepared[sql] { return s }
        if prepared.count >= Self.maxStatements { finalizeAll() }
        var s: OpaquePointer?
        var tail: UnsafePointer<CChar>?
        let rc = sql.withCString { text in
            let rc = sqlite3_prepare_v3(handle, text, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &s, &tail)
            // One statement per text, as GRDB required: what follows it (but blanks and a
            // semicolon) would be skipped without a word.
            if rc == SQLITE_OK, let tail, !String(cString: tail).allSatisfy({ $0.isWhitespace || $0 == ";" }) { return SQLITE_MISUSE }
            return rc
        }
        guard rc == SQLITE_OK, let s else {
            if let s { sqlite3_finalize(s) }
            // An empty text prepares to no statement: a misuse, not "error 0".
            throw DatabaseError(resultCode: ResultCode(rawValue: rc == SQLITE_OK ? SQLITE_MISUSE : rc))
        }
        prepared[sql] = s
        return s
    }

    /// Runs `sql` (one statement) with `values` bound to its `?` in order: its rows, TEXT and
    /// BLOB as text (UTF-8), REAL truncated to an integer, as `Database.run` reads GRDB's rows.
    func run(_ sql: String, _ values: [SQLValue]) throws(DatabaseError) -> [SQLRow] {
        let s = try statement(sql)
        defer {
            sqlite3_reset(s)
            sqlite3_clear_bindings(s)
        }
        // As many values as placeholders, as GRDB required: a missing one would bind NULL.
        guard sqlite3_bind_parameter_count(s) == Int32(values.count) else { throw DatabaseError(resultCode: .SQLITE_MISUSE) }
        for (i, v) in values.enumerated() {
            let index = Int32(i + 1)
            let rc: Int32
            switch v {
            case .null: rc = sqlite3_bind_null(s, index)
            case .int(let n): rc = sqlite3_bind_int64(s, index, n)
            case .bool(let b): rc = sqlite3_bind_int64(s, index, b ? 1 : 0)
            case .text(var t):
                rc = t.withUTF8 { u in
                    // A NULL pointer would bind NULL: an empty text points at a byte of its own.
                    guard let base = u.baseAddress, u.count > 0 else { return sqlite3_bind_text(s, index, "", 0, Self.transient) }
                    return sqlite3_bind_text64(
                        s, index, UnsafeRawPointer(base).assumingMemoryBound(to: CChar.self), sqlite3_uint64(u.count), Self.transient, UInt8(SQLITE_UTF8))
                }
            }
            guard rc == SQLITE_OK else { throw DatabaseError(resultCode: ResultCode(rawValue: rc)) }
        }
        var rows: [SQLRow] = []
        while true {
            let rc = sqlite3_step(s)
            if rc == SQLITE_DONE { return rows }
            guard rc == SQLITE_ROW else { throw DatabaseError(resultCode: ResultCode(rawValue: sqlite3_extended_errcode(handle))) }
            // After the step: a statement SQLite prepared again (the schema changed) may have others.
            let columns = sqlite3_column_count(s)
            var row: [SQLValue] = []
            row.reserveCapacity(Int(columns))
            for c in 0..<columns {
                switch sqlite3_column_type(s, c) {
                case SQLITE_INTEGER: row.append(.int(sqlite3_column_int64(s, c)))
                case SQLITE_FLOAT: row.append(.int(Int64(sqlite3_column_double(s, c))))
                case SQLITE_NULL: row.append(.null)
                default:
                    // TEXT, and BLOB read as UTF-8. The pointer first, then its length (SQLite's order).
                    let p = sqlite3_column_blob(s, c)
                    let count = Int(sqlite3_column_bytes(s, c))
                    if let p, count > 0 {
                        row.append(.text(String(decoding: UnsafeRawBufferPointer(start: p, count: count), as: UTF8.self)))
                    } else {
                        row.append(.text(""))
                    }
                }
            }
            rows.append(SQLRow(row))
        }
    }

    /// SQLite's SQLITE_TRANSIENT: it copies the bound bytes before the call returns.
    static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
}

/// The prepared statements of a server's SQLite writer connection (`Database.onCallingThread`):
/// the statements of its transactions run from them instead of GRDB's statement and row objects.
/// Used only inside the pool's `writeWithoutTransaction`, whose queue orders every access.
final class WriterStatements: @unchecked Sendable {
    private var statements: SQLiteStatements?

    /// Runs `sql` on the writer connection `db`.
    func run(_ db: GRDB.Database, _ sql: String, _ values: [SQLValue]) throws -> [SQLRow] {
        guard let handle = db.sqliteConnection else { throw DatabaseError(resultCode: .SQLITE_MISUSE) }
        if statements?.handle != handle { statements = SQLiteStatements(handle: handle) }
        return try statements!.run(sql, values)
    }

    /// `BEGIN IMMEDIATE` on the writer connection `db` without waiting: false when another
    /// connection (another process) holds the write lock, SQLITE_BUSY, instead of sleeping in
    /// the busy handler; the connection's busy timeout (`timeout`) is put back either way.
    static func beginWithoutWaiting(_ db: GRDB.Database, timeout: Double) throws -> Bool {
        guard let handle = db.sqliteConnection else { throw DatabaseError(resultCode: .SQLITE_MISUSE) }
        sqlite3_busy_timeout(handle, 0)
        defer { sqlite3_busy_timeout(handle, Int32(timeout * 1000)) }
        do {
            try db.execute(sql: "BEGIN IMMEDIATE")
            return true
        } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY {
            return false
        }
    }

    /// `sqlite3_expanded_sql` of `sql`'s prepared statement, if prepared (tests; call on the writer).
    func expanded(_ sql: String) -> String? {
        guard let s = statements?.prepared[sql], let text = sqlite3_expanded_sql(s) else { return nil }
        defer { sqlite3_free(text) }
        return String(cString: text)
    }
}

/// The WAL checkpoints of a server's SQLite store (`Database.onCallingThread`), on a thread and
/// connection of their own instead of inside a COMMIT.
///
/// SQLite's default (`wal_autocheckpoint`, 1000 pages) has the connection that commits past 1000
/// WAL pages checkpoint right away, before its COMMIT returns: it copies the pages into the
/// database file and flushes that file, several milliseconds during which the store's one writer
/// commits nothing. Every request waiting on that commit (a group commit holds many) took it as
/// its latency: issue 16 measured tokenize's p99 at c=8 at 4.8–5.0 ms with it and 3.4–4.0 ms
/// with no checkpoint at all (which lets the WAL grow without end, and slows each commit).
///
/// Here the writer's WAL hook only signals: each time a commit leaves `pages` more in the WAL
/// than at the last signal, this thread runs a PASSIVE checkpoint, which waits for no reader and
/// no writer while commits go on. Under a steady load the writer never starts a transaction with
/// the WAL wholly copied, so the WAL would never start over and would only grow (a growing file
/// makes each commit's flush slower): once a PASSIVE checkpoint finds `restartPages` or more in
/// the WAL, the writer, right after its next COMMIT has answered its callers, runs a RESTART
/// checkpoint (`restartIfWanted`): the few frames committed since, the database file's flush, and
/// the next write starts the WAL from its beginning. It does not wait for a reader of an older
/// snapshot (a long scan): then the next PASSIVE asks again. Measured (issue 16, 2 cores, with a
/// gateway, side by side): p99 at c=8 4.8 → 3.9–4.1 ms, at c=64 tokens +8 %. Another
/// process on the same file (`vault rewrap`, tools) keeps SQLite's default, and the last
/// connection to close still checkpoints and removes the WAL.
final class SQLiteCheckpointer: @unchecked Sendable {
    /// SQLite's own default threshold (`SQLITE_DEFAULT_WAL_AUTOCHECKPOINT`).
    static let pages: Int32 = 1000
    /// The thread's name, as `top -H` shows it.
    static let threadName = "vault-checkpt"
    /// From this many WAL pages on (32 MiB of 4 KiB pages) the writer starts the WAL over.
    static let restartPages: Int32 = 8192

    // @unchecked: the state below is read and written under `condition`'s lock, but `mark`,
    // which only the writer's WAL hook uses (on GRDB's serialized writer).
    private let condition = NSCondition()
    private var wanted = false
    private var restart = false
    private var stopping = false
    private var running = false
    private var runs = 0, restarts = 0, startedOver = 0
    private var mark: Int32 = 0

    /// Checkpoints run so far, and the WAL's restarts (tests).
    var checkpoints: Int { condition.withLock { runs } }
    var restartsDone: Int { condition.withLock { restarts } }
    /// Times the WAL started over, seen by the hook: after the writer's RESTART, or when the
    /// writer found the WAL wholly copied by a PASSIVE checkpoint (a slow writer) (tests).
    var walStartedOver: Int { condition.withLock { startedOver } }

    /// Starts the thread on `path` and hands the writer connection `db` its WAL hook. The hook's
    /// context holds this object for the connection's lifetime (one per server store).
    static func start(path: String, writer db: GRDB.Database) throws(DatabaseError) -> SQLiteCheckpointer {
        guard let writer = db.sqliteConnection else { throw DatabaseError(resultCode: .SQLITE_MISUSE) }
        // A connection opens the WAL on its first read; until then a checkpoint does nothing. The
        // read waits for another process's lock as the store's connections do; the checkpoints
        // wait for none.
        let h = try openConnection(path, SQLITE_OPEN_READWRITE, first: "SELECT count(*) FROM sqlite_master")
        sqlite3_busy_timeout(h, 0)
        let checkpointer = SQLiteCheckpointer()
        checkpointer.running = true
        let connection = UnsafeSendable(h)
        let thread = Thread {
            // Named from the thread itself: `Thread.name` does not reach the kernel on Linux
            // (`top -H`, `perf` and /proc show this name; 15 bytes at most).
            try? Self.threadName.write(toFile: "/proc/thread-self/comm", atomically: false, encoding: .utf8)
            checkpointer.work(connection.value)
        }
        thread.name = Self.threadName
        thread.start()
        sqlite3_wal_hook(writer, { context, _, _, pages in
            if let context { Unmanaged<SQLiteCheckpointer>.fromOpaque(context).takeUnretainedValue().committed(pages: pages) }
            return SQLITE_OK
        }, Unmanaged.passRetained(checkpointer).toOpaque())
        return checkpointer
    }

    /// The WAL hook, on the writer after each commit: `pages` is the WAL's size.
    func committed(pages: Int32) {
        // `mark`: the WAL's size at the last signal (0 once the WAL started over).
        if pages < mark {
            mark = 0
            condition.withLock { startedOver += 1 }
        }
        guard pages - mark >= Self.pages else { return }
        mark = pages
        condition.withLock {
            guard !wanted else { return }
            wanted = true
            condition.signal()
        }
    }

    /// On the writer connection `db`, after a COMMIT (outside any transaction), once a PASSIVE
    /// checkpoint asked for it: a RESTART checkpoint that waits for no reader.
    func restartIfWanted(_ db: GRDB.Database) {
        guard condition.withLock({ () -> Bool in
            defer { restart = false }
            return restart
        }), let handle = db.sqliteConnection, !db.isInsideTransaction else { return }
        sqlite3_busy_timeout(handle, 0)
        defer { sqlite3_busy_timeout(handle, Int32(Database.busyTimeout * 1000)) }
        var logged: Int32 = 0, copied: Int32 = 0
        if sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_RESTART, &logged, &copied) == SQLITE_OK {
            condition.withLock { restarts += 1 }
        }
    }

    /// Stops the thread and closes its connection (the store's deinit, before the writer closes,
    /// so that the writer is the last connection and checkpoints the WAL away). Waits for a
    /// checkpoint under way.
    func stop() {
        condition.withLock {
            stopping = true
            condition.broadcast()
            while running { condition.wait() }
        }
    }

    private func work(_ connection: OpaquePointer) {
        defer {
            sqlite3_close_v2(connection)
            condition.withLock {
                running = false
                condition.broadcast()
            }
        }
        while true {
            condition.lock()
            while !wanted, !stopping { condition.wait() }
            if stopping {
                condition.unlock()
                return
            }
            wanted = false
            condition.unlock()
            var logged: Int32 = 0, copied: Int32 = 0
            // PASSIVE: copies what no reader still needs, without waiting for readers or the
            // writer, while commits go on (a busy database is no error here: the next signal
            // tries again).
            _ = sqlite3_wal_checkpoint_v2(connection, nil, SQLITE_CHECKPOINT_PASSIVE, &logged, &copied)
            condition.withLock {
                runs += 1
                if logged >= Self.restartPages { restart = true }
            }
        }
    }
}

/// A connection of our own to the store at `path` (`flags`: read-only or read-write), with
/// extended result codes and the store's busy timeout, after running `first` on it; closed again
/// if that fails.
private func openConnection(_ path: String, _ flags: Int32, first: String) throws(DatabaseError) -> OpaquePointer {
    var h: OpaquePointer?
    let rc = sqlite3_open_v2(path, &h, flags | SQLITE_OPEN_NOMUTEX, nil)
    guard rc == SQLITE_OK, let h else {
        if let h { sqlite3_close_v2(h) }
        throw DatabaseError(resultCode: ResultCode(rawValue: rc))
    }
    sqlite3_extended_result_codes(h, 1)
    sqlite3_busy_timeout(h, Int32(Database.busyTimeout * 1000))
    let done = sqlite3_exec(h, first, nil, nil, nil)
    guard done == SQLITE_OK else {
        sqlite3_close_v2(h)
        throw DatabaseError(resultCode: ResultCode(rawValue: done))
    }
    return h
}

/// A value handed to another thread that uses it alone from then on.
private struct UnsafeSendable<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
