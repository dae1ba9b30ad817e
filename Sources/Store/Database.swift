import Foundation
import GRDB
import Logging
import PostgresNIO

/// The vault's database, one type for both backends: SQLite (one file, WAL, `synchronous = FULL`,
/// so a write returns only once it is on disk) and PostgreSQL (a client the caller runs, shared by
/// every sidecar and gateway of the store; commits are durable with `synchronous_commit` on).
///
/// Statements are written once with `?` placeholders in the SQL both backends accept (the schema's
/// few differences are in `Dialect`). Every store of the vault (tokens, payments, sessions,
/// customers, instruments, mandates, envelope tables, the processor ledger) goes through it:
/// `query` reads, `write` runs one statement as its own transaction, `transaction` runs several
/// atomically, `batch` runs one statement over many argument lists in one transaction (group commit).
///
/// SQLite has one writer connection: every write of this process takes the database's write lock
/// first, so a transaction's statements are never interleaved with another task's (a server's
/// transactions may share one SQLite transaction and its commit, each in a savepoint of its own:
/// `CommitGroup`). Other processes (`vault rewrap`, a gateway on the same file) wait on SQLite's
/// own lock (10 s).
public final class Database: Sendable {
    public enum Backend: String, Sendable { case sqlite, postgres }

    enum Engine: Sendable {
        case sqlite(DatabasePool, AsyncLock)
        case postgres(PostgresClient, Logger, PostgresStatements?)
    }

    let engine: Engine
    public let dialect: Dialect
    /// Group commit of a server's SQLite writes (`onCallingThread`; `CommitGroup`).
    let group = CommitGroup()
    public var backend: Backend { dialect.backend }
    /// SQLite: reads, and the statements of a transaction before its COMMIT, run on the calling
    /// thread instead of being handed to GRDB's queue and back (two thread switches each; issue
    /// 16 measured them as a large part of a tokenize's and a payment's cost). They do not suspend
    /// then, so a task that runs thousands of them in a row holds its thread all along: the
    /// servers, whose requests run a few each, ask for it; tools and tests do not. A read that may
    /// take long (a count over a whole table, a filtered page) goes through `scan`, off the
    /// calling thread. Such a store never uses GRDB's async reads, which hold a reader until their
    /// task resumes: with every reader so held and every thread waiting for one, nothing would move.
    /// Its writes (`transaction`, `write`, `batch`) are also committed in groups (`CommitGroup`).
    public let onCallingThread: Bool
    /// A server's store (`onCallingThread`): the read-only connections its reads run on
    /// (`SQLiteReaders`), instead of GRDB's reader pool.
    let readers: SQLiteReaders?
    /// A server's store: the prepared statements its transactions run on the writer connection
    /// (`WriterStatements`), instead of GRDB's statement and row objects.
    let writerStatements: WriterStatements?
    /// A server's store: its WAL checkpoints, off the commit path (`SQLiteCheckpointer`, in SQLiteStatements.swift).
    let checkpointer: SQLiteCheckpointer?

    /// How long a SQLite connection waits for another process's write lock (SQLITE_BUSY after).
    static let busyTimeout: TimeInterval = 10

    /// Opens (creating if needed) the SQLite file at `path`. Migrate with `migrate()`.
    /// `onCallingThread`: see the property.
    /// - Throws: `STORE_UNAVAILABLE`.
    public init(sqlitePath path: String, onCallingThread: Bool = false) throws(StoreError) {
        self.onCallingThread = onCallingThread
        readers = onCallingThread
            ? SQLiteReaders(path: path, keep: max(Configuration().maximumReaderCount, ProcessInfo.processInfo.activeProcessorCount + 2)) : nil
        writerStatements = onCallingThread ? WriterStatements() : nil
        var config = Configuration()
        // Another process may write the same file (`vault rewrap` during key rotation, a gateway
        // whose ledger is here): wait for its short transactions instead of failing with SQLITE_BUSY.
        config.busyMode = .timeout(Self.busyTimeout)
        // Transactions span several statements, each run on the writer connection in turn
        // (under `AsyncLock`): GRDB must not treat an open transaction between them as an error.
        config.allowsUnsafeTransactions = true
        // Reads on the calling thread (`onCallingThread`) wait for a free reader: at least one per
        // core, so that the event loops never queue behind each other for one.
        config.maximumReaderCount = max(config.maximumReaderCount, ProcessInfo.processInfo.activeProcessorCount + 2)
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            // Zero what a delete or update frees: a deleted row's ciphertext does not linger.
            try db.execute(sql: "PRAGMA secure_delete = ON")
            // Statement and savepoint journals (the prior images of the pages a statement of a
            // transaction changes) and temporary sorts in memory, not in files under /var/tmp:
            // issue 16 found them as most of the bytes a tokenize wrote (about 9 KB per token),
            // and copies of the store's pages belong nowhere but in the store's own files.
            try db.execute(sql: "PRAGMA temp_store = MEMORY")
        }
        do {
            let pool = try DatabasePool(path: path, configuration: config)
            // GRDB's WAL set-up lowers the writer to synchronous=NORMAL after prepareDatabase:
            // put FULL back on the writer connection, so a commit is on disk when it returns.
            try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
            checkpointer = onCallingThread ? try pool.writeWithoutTransaction { db in try SQLiteCheckpointer.start(path: path, writer: db) } : nil
            engine = .sqlite(pool, AsyncLock())
        } catch {
            throw StoreError(.unavailable, "cannot open the SQLite store at \(path): \(Self.describe(error))")
        }
        dialect = Dialect(backend: .sqlite)
    }

    /// A store over a PostgreSQL client that the caller runs (`client.run()`).
    /// `preparedStatements`: statements prepared once per connection (`PostgresStatements`).
    public init(postgres client: PostgresClient, logger: Logger, preparedStatements: Bool = true) {
        onCallingThread = false
        readers = nil
        writerStatements = nil
        checkpointer = nil
        engine = .postgres(client, logger, preparedStatements ? PostgresStatements() : nil)
        dialect = Dialect(backend: .postgres)
    }

    deinit {
        // Our own connections close before GRDB's writer: the last to close checkpoints the WAL.
        checkpointer?.stop()
        readers?.closeIdle()
    }

    /// The SQLite pool, for the few SQLite-only maintenance steps (`VACUUM`) and tests.
    public var sqlitePool: DatabasePool? {
        if case .sqlite(let pool, _) = engine { return pool }
        return nil
    }

    // MARK: Statements

    /// Runs a read-only statement.
    public func query(_ sql: String, _ arguments: [any SQLBindable] = []) async throws(StoreError) -> [SQLRow] {
        let values = arguments.map(\.sqlValue)
        switch engine {
        case .sqlite(let pool, _):
            // A WAL read never waits for the writer, and the vault's reads are short (point
            // lookups, pages of at most a few hundred rows): on the calling thread when asked.
            // One statement, so no transaction around it: in autocommit mode SQLite reads a
            // statement's rows from one snapshot of the WAL, which is all `pool.read`'s
            // BEGIN DEFERRED … COMMIT would add, at two more statements per read (issue 16).
            if let readers { return try readers.read(sql, values) }
            return try await Self.sqlite { try await pool.unsafeRead { db in try Self.run(db, sql, values) } }
        case .postgres(let client, let logger, let statements):
            return try await Self.postgres { try await Self.run(client, logger, statements, sql, values) }
        }
    }

    /// `query` for a read that may take long (a count over a whole table, a page whose filters
    /// walk many rows): on a server's store (`onCallingThread`) it runs on a dispatch thread, so
    /// that an event loop does not wait for it.
    public func scan(_ sql: String, _ arguments: [any SQLBindable] = []) async throws(StoreError) -> [SQLRow] {
        guard let readers else { return try await query(sql, arguments) }
        let values = arguments.map(\.sqlValue)
        let result = await withCheckedContinuation { (c: CheckedContinuation<Result<[SQLRow], StoreError>, Never>) in
            DispatchQueue.global().async {
                do throws(StoreError) { c.resume(returning: .success(try readers.read(sql, values))) } catch {
                    c.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }

    /// Runs one statement as its own durable transaction; its rows (use `RETURNING` to learn what
    /// it changed, on both backends).
    @discardableResult
    public func write(_ sql: String, _ arguments: [any SQLBindable] = []) async throws(StoreError) -> [SQLRow] {
        let values = arguments.map(\.sqlValue)
        switch engine {
        case .sqlite(let pool, let lock):
            if onCallingThread { return try await grouped(pool, lock) { (t) throws(StoreError) in try await t.query(sql, values) } }
            await lock.acquire()
            defer { lock.release() }
            return try await Self.sqlite { try await pool.writeWithoutTransaction { db in try Self.run(db, sql, values) } }
        case .postgres(let client, let logger, let statements):
            return try await Self.postgres { try await Self.run(client, logger, statements, sql, values) }
        }
    }

    /// Runs `sql` once per argument list, all in one durable transaction (one commit, one fsync);
    /// the rows of each run, in order.
    public func batch(_ sql: String, _ argumentLists: [[SQLValue]]) async throws(StoreError) -> [[SQLRow]] {
        switch engine {
        case .sqlite(let pool, let lock):
            if onCallingThread { return try await batchOnWriter(pool, lock, sql, argumentLists) }
            await lock.acquire()
            defer { lock.release() }
            return try await Self.sqlite {
                try await pool.writeWithoutTransaction { db in
                    try db.execute(sql: "BEGIN IMMEDIATE")
                    do {
                        let out = try argumentLists.map { try Self.run(db, sql, $0) }
                        try db.execute(sql: "COMMIT")
                        return out
                    } catch {
                        try? db.execute(sql: "ROLLBACK")
                        throw error
                    }
                }
            }
        case .postgres(let client, let logger, let statements):
            return try await Self.postgres {
                try await client.withTransaction(logger: logger) { c in
                    var out: [[SQLRow]] = []
                    for values in argumentLists { out.append(try await Self.run(c, logger, statements, sql, values)) }
                    return out
                }
            }
        }
    }

    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws.
    public func transaction<T: Sendable>(_ body: (Transaction) async throws(StoreError) -> T) async throws(StoreError) -> T {
        switch engine {
        case .sqlite(let pool, let lock):
            if onCallingThread { return try await grouped(pool, lock, body) }
            await lock.acquire()
            defer { lock.release() }
            try await Self.sqlite { try await pool.writeWithoutTransaction { db in try db.execute(sql: "BEGIN IMMEDIATE") } }
            do {
                let value = try await body(Transaction(connection: .sqlite(pool, writer: writerStatements), dialect: dialect))
                try await Self.sqlite { try await pool.writeWithoutTransaction { db in try db.execute(sql: "COMMIT") } }
                return value
            } catch {
                // Not GRDB's async call: in a cancelled task it would not run, and the writer would
                // be left inside this transaction.
                Self.rollback(pool)
                throw error
            }
        case .postgres(let client, let logger, let statements):
            // The body's typed error is carried out of PostgresNIO's untyped closure and rethrown.
            let dialect = self.dialect
            return try await Self.postgres {
                try await client.withTransaction(logger: logger) { c in
                    try await body(Transaction(connection: .postgres(c, logger, statements), dialect: dialect))
                }
            }
        }
    }

    /// Rolls back the writer's open transaction, if any, on this thread (GRDB's synchronous call,
    /// which a task's cancellation does not skip).
    static func rollback(_ pool: DatabasePool) {
        try? pool.writeWithoutTransaction { db in if db.isInsideTransaction { try db.execute(sql: "ROLLBACK") } }
    }

    // MARK: Backends

    static func run(_ db: GRDB.Database, _ sql: String, _ values: [SQLValue]) throws -> [SQLRow] {
        let statement = try db.cachedStatement(sql: sql)
        let arguments = StatementArguments(values.map { v -> (any DatabaseValueConvertible)? in
            switch v {
            case .null: nil
            case .int(let n): n
            case .text(let s): s
            case .bool(let b): b
            }
        })
        return try Row.fetchAll(statement, arguments: arguments).map { row in
            SQLRow(row.databaseValues.map { value in
                switch value.storage {
                case .null: .null
                case .int64(let n): .int(n)
                case .double(let d): .int(Int64(d))
                case .string(let s): .text(s)
                case .blob(let data): .text(String(decoding: data, as: UTF8.self))
                }
            })
        }
    }

    static func run(
        _ client: PostgresClient, _ logger: Logger, _ statements: PostgresStatements?, _ sql: String, _ values: [SQLValue]
    ) async throws -> [SQLRow] {
        guard let statements else { return try await rows(client.query(postgresQuery(sql, values), logger: logger)) }
        return try await client.withConnection { c in try await run(c, logger, statements, sql, values) }
    }

    /// Runs a statement on `connection`: by name when `statements` prepares it
    /// (`PostgresStatements`), else unnamed.
    static func run(
        _ connection: PostgresConnection, _ logger: Logger, _ statements: PostgresStatements?, _ sql: String, _ values: [SQLValue]
    ) async throws -> [SQLRow] {
        guard let statements else { return try await rows(connection.query(postgresQuery(sql, values), logger: logger)) }
        return try await statements.run(connection, logger, postgresText(sql), values)
    }

    static func postgresQuery(_ sql: String, _ values: [SQLValue]) -> PostgresQuery {
        PostgresQuery(unsafeSQL: postgresText(sql), binds: postgresBindings(values))
    }

    /// `?` placeholders (outside quoted literals) become `$1`, `$2`, …
    static func postgresText(_ sql: String) -> String {
        // Byte by byte: issue 16's profile of a payment on PostgreSQL found the Character walk
        // (grapheme breaking, a String append per character) among its larger costs.
        var bytes: [UInt8] = []
        bytes.reserveCapacity(sql.utf8.count + 16)
        var n = 0, quoted = false
        for b in sql.utf8 {
            if b == UInt8(ascii: "'") { quoted.toggle() }
            if b == UInt8(ascii: "?"), !quoted {
                n += 1
                bytes.append(UInt8(ascii: "$"))
                bytes.append(contentsOf: String(n).utf8)
            } else {
                bytes.append(b)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func postgresBindings(_ values: [SQLValue]) -> PostgresBindings {
        var bindings = PostgresBindings(capacity: values.count)
        for v in values {
            switch v {
            case .null: bindings.appendNull()
            case .int(let i): bindings.append(i)
            case .text(let s): bindings.append(s)
            case .bool(let b): bindings.append(b)
            }
        }
        return bindings
    }

    static func rows<Rows: AsyncSequence>(_ sequence: Rows) async throws -> [SQLRow] where Rows.Element == PostgresRow {
        var out: [SQLRow] = []
        for try await row in sequence {
            var values: [SQLValue] = []
            for cell in row {
                guard cell.bytes != nil else {
                    values.append(.null)
                    continue
                }
                switch cell.dataType {
                case .int8: values.append(.int(try cell.decode(Int64.self)))
                case .int4: values.append(.int(Int64(try cell.decode(Int32.self))))
                case .int2: values.append(.int(Int64(try cell.decode(Int16.self))))
                case .bool: values.append(.bool(try cell.decode(Bool.self)))
                default: values.append(.text(try cell.decode(String.self)))
                }
            }
            out.append(SQLRow(values))
        }
        return out
    }

    // MARK: Errors

    /// SQLite errors as `StoreError`: a unique or primary-key violation is `STORE_DUPLICATE`,
    /// anything else `STORE_UNAVAILABLE` with the result code only.
    static func sqlite<T>(_ body: () async throws -> T) async throws(StoreError) -> T {
        do { return try await body() } catch {
            throw map(error)
        }
    }

    /// PostgreSQL errors as `StoreError`: SQLSTATE 23505 is `STORE_DUPLICATE`, anything else
    /// `STORE_UNAVAILABLE` with the SQLSTATE only.
    static func postgres<T>(_ body: () async throws -> T) async throws(StoreError) -> T {
        do {
            do {
                return try await body()
            } catch let wrapped as PostgresTransactionError {
                throw wrapped.closureError ?? wrapped.beginError ?? wrapped.commitError ?? wrapped
            }
        } catch {
            throw map(error)
        }
    }

    /// Any error of either backend as a `StoreError` (one that already is one stays as it is).
    public static func map(_ error: any Error) -> StoreError {
        if let e = error as? StoreError { return e }
        if let e = error as? DatabaseError {
            if e.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE || e.extendedResultCode == .SQLITE_CONSTRAINT_PRIMARYKEY {
                return StoreError(.duplicate, "a row with that key exists")
            }
            return StoreError(.unavailable, describe(e))
        }
        if let e = error as? PSQLError {
            let state = e.serverInfo?[.sqlState]
            if state == "23505" { return StoreError(.duplicate, "a row with that key exists") }
            return StoreError(.unavailable, "PostgreSQL failed (\(state.map { "SQLSTATE \($0)" } ?? "\(e.code)"))")
        }
        return StoreError(.unavailable, "the store failed (\(type(of: error)))")
    }

    /// The SQLite result code only: statement text and arguments stay out of messages.
    static func describe(_ error: any Error) -> String {
        guard let e = error as? DatabaseError else { return String(describing: type(of: error)) }
        let number = e.resultCode.rawValue
        let meaning: String
        switch number {
        case 3, 23: meaning = "permission denied"
        case 5, 6: meaning = "another process holds the database locked"
        case 8: meaning = "the file or its directory is read-only for this user"
        case 10: meaning = "a disk I/O error"
        case 11: meaning = "the database file is corrupt"
        case 13: meaning = "the disk is full"
        case 14: meaning = "the file cannot be opened or created: its directory must exist and this user must be able to write it"
        case 26: meaning = "the file is not a SQLite database"
        default: meaning = "the operation failed"
        }
        return "\(meaning) (SQLite error \(number))"
    }
}

/// A transaction in progress (`Database.transaction`): its statements run in order, atomically.
public struct Transaction: Sendable {
    enum Connection: @unchecked Sendable {
        /// `writer`: a server's store (`Database.onCallingThread`); nil for tools and tests.
        case sqlite(DatabasePool, writer: WriterStatements?)
        case postgres(PostgresConnection, Logger, PostgresStatements?)
    }

    let connection: Connection
    public let dialect: Dialect

    /// Runs one statement of the transaction; its rows.
    @discardableResult
    public func query(_ sql: String, _ arguments: [any SQLBindable] = []) async throws(StoreError) -> [SQLRow] {
        let values = arguments.map(\.sqlValue)
        switch connection {
        case .sqlite(let pool, let writer):
            // The transaction holds the write lock already (BEGIN IMMEDIATE), so a statement waits
            // for nothing: a server's store (`Database.onCallingThread`, which has `writer`) runs it
            // on the calling thread from the writer's prepared statements. Its COMMIT, which waits
            // for the disk, is always handed to the writer's queue.
            if let writer { return try await Database.sqlite { try pool.writeWithoutTransaction { db in try writer.run(db, sql, values) } } }
            return try await Database.sqlite { try await pool.writeWithoutTransaction { db in try Database.run(db, sql, values) } }
        case .postgres(let c, let logger, let statements):
            return try await Database.postgres { try await Database.run(c, logger, statements, sql, values) }
        }
    }

    /// Whether a table exists (for migrations that adopt what an earlier version made). On
    /// PostgreSQL from the catalog, whoever owns it (`information_schema` shows a role only the
    /// tables it holds a privilege on: another zone's role's table would seem missing).
    public func tableExists(_ name: String) async throws(StoreError) -> Bool {
        let sql = dialect.backend == .sqlite
            ? "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
            : """
              SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE n.nspname = current_schema() AND c.relname = ? AND c.relkind IN ('r', 'p')
              """
        return try await !query(sql, [name]).isEmpty
    }

    /// Whether a table has a column.
    public func columnExists(_ table: String, _ column: String) async throws(StoreError) -> Bool {
        let sql = dialect.backend == .sqlite
            ? "SELECT 1 FROM pragma_table_info(?) WHERE name = ?"
            : "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ? AND column_name = ?"
        return try await !query(sql, [table, column]).isEmpty
    }
}

/// What differs between the backends' SQL: column types and a JSON path.
public struct Dialect: Sendable {
    public let backend: Database.Backend

    /// A 64-bit integer column.
    public var int: String { backend == .sqlite ? "INTEGER" : "BIGINT" }
    /// A boolean column (`TRUE`/`FALSE` and bound `Bool`s work on both).
    public var bool: String { backend == .sqlite ? "INTEGER" : "BOOLEAN" }
    /// A text column.
    public var text: String { "TEXT" }

    /// The text at top-level key `key` of a JSON text column.
    public func jsonText(_ column: String, _ key: String) -> String {
        backend == .sqlite ? "json_extract(\(column), '$.\(key)')" : "((\(column))::jsonb)->>'\(key)'"
    }

    /// The value at `card.<key>` of an envelope JSON column (`card.exp_month`…): text on
    /// PostgreSQL, the JSON value on SQLite (`CAST … AS INTEGER` compares both as numbers).
    public func envelopeCardField(_ column: String, _ key: String) -> String {
        backend == .sqlite ? "json_extract(\(column), '$.card.\(key)')" : "((\(column))::jsonb #>> '{card,\(key)}')"
    }
}

/// A lock that async tasks wait for without blocking a thread; handed over in arrival order.
final class AsyncLock: @unchecked Sendable {
    private let lock = NSLock()
    private var held = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func acquire() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            lock.lock()
            if !held {
                held = true
                lock.unlock()
                c.resume()
            } else {
                waiters.append(c)
                lock.unlock()
            }
        }
    }

    /// Whether a task waits for the lock (asked by its holder).
    var hasWaiters: Bool { lock.withLock { !waiters.isEmpty } }

    func release() {
        lock.lock()
        if waiters.isEmpty {
            held = false
            lock.unlock()
        } else {
            let next = waiters.removeFirst()
            lock.unlock()
            next.resume()
        }
    }
}
