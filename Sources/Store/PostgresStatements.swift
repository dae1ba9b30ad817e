import Logging
import PostgresNIO
import Synchronization

/// Named prepared statements on PostgreSQL, one set per connection.
///
/// PostgresNIO sends a query as an unnamed statement, which the server parses and plans again on
/// each run. Issue 16 measured planning at about 37 % of the server's statement time during the
/// payment load (pg_stat_statements, `track_planning`). So a statement of the vault that reads or
/// writes rows is prepared once per connection under a name of its own (`vault_1_7`), with its
/// parameters' types as PostgresNIO gives the same binds unnamed (a NULL's type is left to the
/// server, as unnamed), and then run by name: the server plans it from its plan cache (a generic
/// plan after its first few runs). The key is the text and the parameter types, so a statement
/// runs exactly as it would unnamed. A prepared statement belongs to the server session: a
/// transaction rolled back keeps it, and a new connection starts with none.
///
/// The preparing is PostgresNIO's (`PostgresConnection.execute` of a `PostgresPreparedStatement`:
/// Parse on a connection's first run of a name, then Bind and Execute). PostgresNIO keeps a failed
/// Parse as the name's answer on that connection for good, so a statement whose first run on a
/// connection fails (a Parse in a transaction already failed, a cancel) is tried under a fresh
/// name next time, at most `maxAttempts` names per statement and connection, then left unnamed
/// there.
///
/// Left unnamed: statements that are not `SELECT`, `INSERT`, `UPDATE`, `DELETE` or `WITH` (the
/// migrations' DDL cannot be prepared); statements of more than `maxParameters` binds (the
/// multi-row inserts of large token batches, which share their cost over the batch); and any new
/// statement once `maxStatements` are known (what each connection may keep is bounded).
///
/// Off with `prepared_statements=off` in the store URL, for a pooler that hands one server
/// session to several clients' transactions (PgBouncer in transaction mode).
final class PostgresStatements: Sendable {
    static let maxStatements = 256
    static let maxParameters = 128
    static let maxAttempts = 3

    private struct Slots {
        /// Statement key (types, then text) → its number (`vault_I_N`).
        var numbers: [String: Int] = [:]
        /// Per open connection: the statements that ran under their name, and the failed first
        /// runs of the others.
        var connections: [PostgresConnection.ID: (ran: Set<Int>, failed: [Int: Int])] = [:]
    }

    private let slots = Mutex(Slots())
    /// This store's prefix of its names (`vault_3_`): two stores over one client never share a
    /// name, which PostgresNIO would run as the statement it first prepared under it.
    private let prefix: String
    private static let instances = Atomic<Int>(0)

    init() {
        prefix = "vault_\(Self.instances.add(1, ordering: .relaxed).newValue)_"
    }

    /// Runs `text` (with `$n` placeholders) with `values` on `connection`: by name when it can be
    /// prepared, else unnamed; its rows.
    func run(_ connection: PostgresConnection, _ logger: Logger, _ text: String, _ values: [SQLValue]) async throws -> [SQLRow] {
        let bindings = Database.postgresBindings(values)
        guard let (number, name) = slot(text, values, on: connection) else {
            return try await Database.rows(connection.query(PostgresQuery(unsafeSQL: text, binds: bindings), logger: logger))
        }
        do {
            let rows = try await NamedStatement.$current.withValue(.init(name: name, sql: text, types: Self.dataTypes(values))) {
                try await Database.rows(connection.execute(NamedStatement(bindings: bindings), logger: logger))
            }
            ran(number, on: connection)
            return rows
        } catch {
            failed(number, on: connection)
            throw error
        }
    }

    /// The statement's number and name on `connection`; nil when it runs unnamed there.
    func slot(_ text: String, _ values: [SQLValue], on connection: PostgresConnection) -> (Int, String)? {
        guard values.count <= Self.maxParameters, Self.preparable(text) else { return nil }
        let key = Self.types(values) + "\n" + text
        let id = connection.id
        let (found, isNew) = slots.withLock { s -> ((Int, String)?, Bool) in
            let number: Int
            if let n = s.numbers[key] {
                number = n
            } else {
                guard s.numbers.count < Self.maxStatements else { return (nil, false) }
                number = s.numbers.count + 1
                s.numbers[key] = number
            }
            let isNew = s.connections[id] == nil
            if isNew { s.connections[id] = ([], [:]) }
            let failures = s.connections[id]?.failed[number] ?? 0
            guard failures < Self.maxAttempts else { return (nil, isNew) }
            return ((number, failures == 0 ? "\(prefix)\(number)" : "\(prefix)\(number)_r\(failures)"), isNew)
        }
        if isNew {
            connection.closeFuture.whenComplete { [weak self] _ in
                _ = self?.slots.withLock { $0.connections.removeValue(forKey: id) }
            }
        }
        return found
    }

    private func ran(_ number: Int, on connection: PostgresConnection) {
        slots.withLock { s in _ = s.connections[connection.id]?.ran.insert(number) }
    }

    /// A failure before the statement ever ran under its name on this connection may be its
    /// Parse's, which PostgresNIO keeps: the next run takes a fresh name.
    private func failed(_ number: Int, on connection: PostgresConnection) {
        slots.withLock { s in
            guard let c = s.connections[connection.id], !c.ran.contains(number) else { return }
            s.connections[connection.id]?.failed[number, default: 0] += 1
        }
    }

    /// How many connections this store has run named statements on (for tests).
    var connectionCount: Int { slots.withLock { $0.connections.count } }

    /// The parameter types of a key: those PostgresNIO gives the same binds unnamed.
    static func types(_ values: [SQLValue]) -> String {
        var s = ""
        for v in values {
            switch v {
            case .null: s += "n"
            case .int: s += "i"
            case .text: s += "t"
            case .bool: s += "b"
            }
        }
        return s
    }

    /// The types PostgresNIO gives the binds of `values` (`Database.postgresBindings`); a NULL's
    /// (`.null`, 0) is left to the server.
    static func dataTypes(_ values: [SQLValue]) -> [PostgresDataType] {
        values.map { v in
            switch v {
            case .null: .null
            case .int: .int8
            case .text: .text
            case .bool: .bool
            }
        }
    }

    /// Whether PostgreSQL can prepare the statement (by its first word).
    static func preparable(_ text: String) -> Bool {
        var word: [UInt8] = []
        for b in text.utf8 {
            if b == 32 || b == 10 || b == 9 || b == 13 || b == UInt8(ascii: "(") {
                if word.isEmpty { continue }
                break
            }
            word.append(b | 0x20)
            if word.count > 6 { return false }
        }
        switch String(decoding: word, as: UTF8.self) {
        case "select", "insert", "update", "delete", "with": return true
        default: return false
        }
    }
}

/// The statement `PostgresStatements` runs: PostgresNIO asks a prepared statement's type for its
/// name, text and parameter types, which differ per run here, so they are the task's
/// (`current`, set around the one `execute` call that reads them).
struct NamedStatement: PostgresPreparedStatement {
    struct Current: Sendable {
        var name: String, sql: String, types: [PostgresDataType]
    }
    @TaskLocal static var current = Current(name: "", sql: "", types: [])
    static var name: String { current.name }
    static var sql: String { current.sql }
    static var bindingDataTypes: [PostgresDataType] { current.types }

    typealias Row = PostgresRow
    let bindings: PostgresBindings
    func makeBindings() throws -> PostgresBindings { bindings }
    func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
}
