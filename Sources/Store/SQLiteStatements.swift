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
            var h: OpaquePointer?
            let rc = sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nil)
            guard rc == SQLITE_OK, let h else {
                if let h { sqlite3_close_v2(h) }
                throw DatabaseError(resultCode: ResultCode(rawValue: rc))
            }
            sqlite3_extended_result_codes(h, 1)
            sqlite3_busy_timeout(h, Int32(Database.busyTimeout * 1000))
            let pragma = sqlite3_exec(h, "PRAGMA temp_store = MEMORY", nil, nil, nil)
            guard pragma == SQLITE_OK else {
                sqlite3_close_v2(h)
                throw DatabaseError(resultCode: ResultCode(rawValue: pragma))
            }
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
