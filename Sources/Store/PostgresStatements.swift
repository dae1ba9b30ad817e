import Logging
import PostgresNIO
import Synchronization
import VaultCrypto

/// Named prepared statements on PostgreSQL, one set per connection.
///
/// PostgresNIO sends a query as an unnamed statement, which the server parses and plans again on
/// each run. Issue 16 measured planning at about 37 % of the server's statement time during the
/// payment load (pg_stat_statements, `track_planning`). So a statement of the vault that reads or
/// writes rows, once seen twice, is prepared once per connection under a name of its own, with its
/// parameters' types as PostgresNIO gives the same binds unnamed (a NULL's type is left to the
/// server, as unnamed), and then run by name: the server plans it from its plan cache (a generic
/// plan after its first few runs; `GenericPlanTests`). A prepared statement belongs to the server
/// session: a transaction rolled back keeps it, and a new connection starts with none.
///
/// The name is the statement's content: `vault_` and 128 bits of the BLAKE2b-256 of its
/// parameter types and text. Two processes (a sidecar and a gateway, or replicas) that share server sessions
/// through a pooler can then meet only under the same statement, never run another's SQL with
/// their values; the server's refusal of a name it does not know there (26000) or knows already
/// (42P05) turns this store's naming off for good, with a warning (`prepared_statements=off` is
/// the setting for such a pooler: PgBouncer in transaction mode before 1.21, or without
/// `max_prepared_statements`).
///
/// The preparing is PostgresNIO's (`PostgresConnection.execute` of a `PostgresPreparedStatement`:
/// Parse on a connection's first run of a name, then Bind and Execute). PostgresNIO keeps a failed
/// Parse as the name's answer on that connection for good, so a statement whose first run on a
/// connection fails as a Parse can (a transaction already failed, a cancel, a lost connection) is
/// tried under a fresh name next time (`_r1`, `_r2`), at most `maxAttempts` names per statement and
/// connection, then left unnamed there. A first run that failed after its Parse (a unique key
/// taken, a serialization failure) keeps its name.
///
/// Left unnamed: statements that are not `SELECT`, `INSERT`, `UPDATE`, `DELETE` or `WITH` (the
/// migrations' DDL cannot be prepared); statements of more than `maxParameters` binds (the
/// multi-row inserts of large token batches, which share their cost over the batch); statements
/// with a list of parameters (`IN (?, …)`: one statement per list length, and a generic plan is
/// the least sure for them); a statement seen once so far; and any new statement once
/// `maxStatements` are named (what each connection may keep is bounded).
///
/// Off with `prepared_statements=off` in the store URL.
final class PostgresStatements: Sendable {
    static let maxStatements = 256
    static let maxParameters = 128
    static let maxAttempts = 3
    /// Statements seen once, kept to name them on their second sighting (forgotten when full).
    static let maxSeen = 1024

    private struct Slots {
        /// Statement key (types, then text) → its name.
        var names: [String: String] = [:]
        /// Keys seen once.
        var seen: Set<String> = []
        /// Per open connection: the names that ran there, and the failed first runs of the others.
        var connections: [PostgresConnection.ID: (ran: Set<String>, failed: [String: Int])] = [:]
        /// A pooler shares server sessions (26000 or 42P05): every statement unnamed from then on.
        var off = false
    }

    private let slots = Mutex(Slots())

    init() {}

    /// Runs `text` (with `$n` placeholders) with `values` on `connection`: by name when it can be
    /// prepared, else unnamed; its rows.
    func run(_ connection: PostgresConnection, _ logger: Logger, _ text: String, _ values: [SQLValue]) async throws -> [SQLRow] {
        let bindings = Database.postgresBindings(values)
        guard let (base, name) = slot(text, values, on: connection) else {
            return try await Database.rows(connection.query(PostgresQuery(unsafeSQL: text, binds: bindings), logger: logger))
        }
        do {
            let rows = try await NamedStatement.$current.withValue(.init(name: name, sql: text, types: Self.dataTypes(values))) {
                try await Database.rows(connection.execute(NamedStatement(bindings: bindings), logger: logger))
            }
            ran(name, on: connection)
            return rows
        } catch {
            failed(base, name, error, on: connection, logger)
            throw error
        }
    }

    /// The statement's base name and the name it runs under on `connection`; nil when it runs
    /// unnamed there.
    func slot(_ text: String, _ values: [SQLValue], on connection: PostgresConnection) -> (String, String)? {
        guard values.count <= Self.maxParameters, Self.preparable(text) else { return nil }
        let key = Self.types(values) + "\n" + text
        let id = connection.id
        let (found, isNew) = slots.withLock { s -> ((String, String)?, Bool) in
            guard !s.off else { return (nil, false) }
            let base: String
            if let known = s.names[key] {
                base = known
            } else {
                guard s.seen.contains(key) else {
                    if s.seen.count >= Self.maxSeen { s.seen.removeAll(keepingCapacity: true) }
                    s.seen.insert(key)
                    return (nil, false)
                }
                guard s.names.count < Self.maxStatements else { return (nil, false) }
                s.seen.remove(key)
                base = Self.name(key)
                s.names[key] = base
            }
            let isNew = s.connections[id] == nil
            if isNew { s.connections[id] = ([], [:]) }
            let failures = s.connections[id]?.failed[base] ?? 0
            guard failures < Self.maxAttempts else { return (nil, isNew) }
            return ((base, failures == 0 ? base : "\(base)_r\(failures)"), isNew)
        }
        if isNew {
            connection.closeFuture.whenComplete { [weak self] _ in
                _ = self?.slots.withLock { $0.connections.removeValue(forKey: id) }
            }
        }
        return found
    }

    private func ran(_ name: String, on connection: PostgresConnection) {
        slots.withLock { s in _ = s.connections[connection.id]?.ran.insert(name) }
    }

    /// A failure before the statement ever ran under its name on this connection, of a kind a
    /// Parse can have, is kept by PostgresNIO as the name's answer there: the next run takes a
    /// fresh name. The server's word that a pooler shares its sessions turns naming off.
    private func failed(_ base: String, _ name: String, _ error: any Error, on connection: PostgresConnection, _ logger: Logger) {
        let state = (error as? PSQLError)?.serverInfo?[.sqlState]
        let shared = state == "26000" || state == "42P05"
        let turnedOff = slots.withLock { s -> Bool in
            if shared {
                defer { s.off = true }
                return !s.off
            }
            guard Self.parseCanFail(state), let c = s.connections[connection.id], !c.ran.contains(name) else { return false }
            s.connections[connection.id]?.failed[base, default: 0] += 1
            return false
        }
        if turnedOff {
            logger.warning("PostgreSQL prepared statements turned off: the server does not hold this connection's statements (a pooler sharing server sessions?); set prepared_statements=off in the store URL", metadata: ["sqlstate": "\(state ?? "")"])
        }
    }

    /// Whether a failure with this SQLSTATE (nil: no answer from the server) may have been the
    /// Parse's: an aborted transaction, a cancel, a statement the server cannot parse or plan, a
    /// lost connection. Not a value's, a key's or a serialization failure (classes 22, 23, 40),
    /// which come after the statement was prepared.
    static func parseCanFail(_ state: String?) -> Bool {
        guard let state else { return true }
        return !(state.hasPrefix("22") || state.hasPrefix("23") || state.hasPrefix("40"))
    }

    /// Whether this store names statements (false once a pooler was detected; for tests).
    var naming: Bool { slots.withLock { !$0.off } }

    /// How many connections this store has run named statements on (for tests).
    var connectionCount: Int { slots.withLock { $0.connections.count } }

    /// The name of a statement key: `vault_` and the first 128 bits of its BLAKE2b-256
    /// (`Hash.blake2b256`), in hex: the same in every process and version that sends the same
    /// text with the same types, and no two statements share one.
    static func name(_ key: String) -> String {
        let digest = Array(key.utf8).withUnsafeBytes { Hash.blake2b256($0) }
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
        var out = Array("vault_".utf8)
        for byte in digest.prefix(16) { out += [digits[Int(byte >> 4)], digits[Int(byte & 15)]] }
        return String(decoding: out, as: UTF8.self)
    }

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

    /// Whether `text` holds `IN ($`: byte by byte (Foundation's `contains`, which a plain
    /// `String.contains` resolves to here, went through `NSString` on every statement: 2 % of
    /// the sidecar's CPU per payment on PostgreSQL, issue 16).
    static func hasParameterList(_ text: String) -> Bool {
        func search(_ b: UnsafeBufferPointer<UInt8>) -> Bool {
            let needle = parameterList
            guard b.count >= needle.count else { return false }
            for i in 0...(b.count - needle.count) where b[i] == needle[0] {
                if (1..<needle.count).allSatisfy({ b[i + $0] == needle[$0] }) { return true }
            }
            return false
        }
        return text.utf8.withContiguousStorageIfAvailable(search) ?? Array(text.utf8).withUnsafeBufferPointer(search)
    }

    private static let parameterList: [UInt8] = Array("IN ($".utf8)

    /// Whether the statement is one to prepare: by its first word, and no list of parameters
    /// (`IN ($1, $2)`).
    static func preparable(_ text: String) -> Bool {
        guard !hasParameterList(text) else { return false }
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
