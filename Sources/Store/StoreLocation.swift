import Foundation
import Logging
import GRDB
import PostgresNIO

import VaultCrypto

/// Where tokens are kept: `sqlite:PATH` (the embedded default) or a PostgreSQL URL
/// (`postgres://user[:password]@host[:port]/db`, or `postgres://user@/db?host=/run/postgresql`
/// for a Unix socket directory).
///
/// TLS to PostgreSQL follows libpq's `sslmode`: `disable`, `require` (encrypted, server not
/// verified; with `sslrootcert` it becomes `verify-ca`), `verify-ca` (chain checked against
/// `sslrootcert`, which it requires),
/// `verify-full` (chain and host name). The default is `verify-full` for a remote host and
/// `disable` for a Unix socket or a loopback address. `sslcert`/`sslkey` give a client
/// certificate. `prefer`/`allow` are refused: a vault does not fall back to clear text silently.
public enum StoreLocation: Sendable, Equatable {
    case sqlite(path: String)
    case postgres(PostgresLocation)

    /// A PostgreSQL server.
    public struct PostgresLocation: Sendable, Equatable {
        public var host: String?
        public var port: Int
        public var socketPath: String?
        public var username: String
        public var password: String?
        public var database: String
        public var tls = TLSSettings()
        /// Statements prepared once per connection (`prepared_statements=on`, the default); off
        /// behind a pooler that shares server sessions between transactions (PgBouncer's
        /// transaction mode).
        public var preparedStatements = true
    }

    /// TLS to a PostgreSQL server reached over TCP.
    public struct TLSSettings: Sendable, Equatable {
        public enum Mode: String, Sendable, CaseIterable { case disable, require, verifyCA = "verify-ca", verifyFull = "verify-full" }
        public var mode: Mode = .disable
        /// PEM file of the certificate authorities to trust (default: the system's).
        public var rootCertificatePath: String?
        /// PEM client certificate chain and its key, for servers that ask for one.
        public var certificatePath: String?
        public var keyPath: String?
        public init() {}
    }

    /// Parses a `--store` value.
    /// - Throws: `STORE_LOCATION_INVALID`.
    public init(_ text: String) throws(VaultError) {
        if text.hasPrefix("sqlite:") {
            let path = String(text.dropFirst(7))
            guard !path.isEmpty else { throw VaultError(.storeLocationInvalid, "sqlite: needs a path, e.g. sqlite:vault.sqlite") }
            self = .sqlite(path: path)
            return
        }
        guard text.hasPrefix("postgres://") || text.hasPrefix("postgresql://"), let url = URLComponents(string: text) else {
            throw VaultError(.storeLocationInvalid, "a store is sqlite:PATH or postgres://user@host/db")
        }
        let socketDir = url.queryItems?.first { $0.name == "host" }?.value
        let port = url.port ?? 5432
        let database = String(url.path.dropFirst())
        guard let user = url.user, !user.isEmpty, !database.isEmpty else {
            throw VaultError(.storeLocationInvalid, "a PostgreSQL store names a user and a database: postgres://user@host/db")
        }
        let query = url.queryItems ?? []
        let known: Set<String> = ["host", "sslmode", "sslrootcert", "sslcert", "sslkey", "prepared_statements"]
        if let unknown = query.first(where: { !known.contains($0.name) }) {
            throw VaultError(.storeLocationInvalid, "unknown PostgreSQL parameter \(JSONReader.printable(unknown.name)) (known: \(known.sorted().joined(separator: ", ")))")
        }
        func value(_ name: String) -> String? { query.first { $0.name == name }?.value.flatMap { $0.isEmpty ? nil : $0 } }
        var location = PostgresLocation(
            host: (url.host?.isEmpty ?? true) ? nil : url.host, port: port,
            socketPath: socketDir.map { $0.hasSuffix(".s.PGSQL.\(port)") ? $0 : "\($0)/.s.PGSQL.\(port)" },
            username: user, password: url.password, database: database)
        guard location.host != nil || location.socketPath != nil else {
            throw VaultError(.storeLocationInvalid, "a PostgreSQL store needs a host or ?host=/socket/dir")
        }
        switch value("prepared_statements") {
        case nil, "on": break
        case "off": location.preparedStatements = false
        default: throw VaultError(.storeLocationInvalid, "prepared_statements is on (the default) or off (behind PgBouncer in transaction mode)")
        }
        if let mode = value("sslmode") {
            guard let m = TLSSettings.Mode(rawValue: mode) else {
                throw VaultError(.storeLocationInvalid, "sslmode is disable, require, verify-ca or verify-full (prefer and allow could fall back to clear text)")
            }
            location.tls.mode = m
        } else {
            let loopback = ["localhost", "127.0.0.1", "::1", "[::1]"].contains(location.host ?? "localhost")
            location.tls.mode = location.socketPath != nil || loopback ? .disable : .verifyFull
        }
        if location.socketPath != nil, location.tls.mode != .disable {
            throw VaultError(.storeLocationInvalid, "TLS is for TCP: a Unix socket store takes no sslmode")
        }
        location.tls.rootCertificatePath = value("sslrootcert")
        // As libpq: require with a root file checks the chain (verify-ca); verify-ca needs that
        // file, since any publicly trusted certificate would pass a chain check on system roots.
        if location.tls.mode == .require, location.tls.rootCertificatePath != nil { location.tls.mode = .verifyCA }
        if location.tls.mode == .verifyCA, location.tls.rootCertificatePath == nil {
            throw VaultError(.storeLocationInvalid, "sslmode=verify-ca needs sslrootcert=FILE (or use verify-full with the system roots)")
        }
        location.tls.certificatePath = value("sslcert")
        location.tls.keyPath = value("sslkey")
        if (location.tls.certificatePath == nil) != (location.tls.keyPath == nil) {
            throw VaultError(.storeLocationInvalid, "sslcert and sslkey go together")
        }
        self = .postgres(location)
    }
}

extension StoreLocation {
    /// For a log line: `sqlite:PATH`, or `postgres://user@host:port/db` (or `…@/db?host=DIR`),
    /// never the password.
    public var summary: String {
        switch self {
        case .sqlite(let path): "sqlite:\(path)"
        case .postgres(let p):
            if let socket = p.socketPath { "postgres://\(p.username)@/\(p.database)?host=\(socket)" } else { "postgres://\(p.username)@\(p.host ?? "localhost"):\(p.port)/\(p.database)" }
        }
    }
}

extension StoreLocation.PostgresLocation {
    /// The client configuration.
    /// - Throws: `STORE_TLS_INVALID` when a certificate or key file cannot be loaded.
    public func configuration() throws(VaultError) -> PostgresClient.Configuration {
        var config: PostgresClient.Configuration = if let socketPath {
            .init(unixSocketPath: socketPath, username: username, password: password, database: database)
        } else {
            .init(host: host ?? "localhost", port: port, username: username, password: password, database: database, tls: try tls.clientTLS())
        }
        // Commits wait on the server's WAL flush, not on our CPU: a few connections keep the
        // server busy, and each one costs memory on both sides.
        config.options.maximumConnections = Self.maximumConnections
        // PostgresNIO's pool (1.33) starts a timer task each time a connection goes back to it:
        // a keep-alive timer, and an idle-timeout timer for a connection above the minimum. Each
        // such timer kept about 0.75 KiB that was not given back, so a sidecar's memory grew by
        // about 1.5 KiB per statement outside a transaction (3 MiB/s at 4,000 tokenizes/s;
        // docs/benchmarks.md, "Memory"). With every connection a minimum connection and no
        // keep-alive query the pool starts no timer. A connection the server closes is still
        // seen at once (the socket closes); one dropped silently on the way (a NAT or load
        // balancer's idle timeout over TCP) is not, so the server's TCP keepalives must keep the
        // path open (docs/configuration.md). The pool opens its connections at start.
        config.options.minimumConnections = Self.maximumConnections
        config.options.keepAliveBehavior = nil
        return config
    }

    /// Connections per sidecar, gateway or command (opened at start and kept).
    public static let maximumConnections = 8
}

extension StoreLocation.PostgresLocation {
    /// Opens one connection and closes it: a wrong address, password or certificate fails at
    /// start with its reason instead of stalling the pool's retries.
    /// - Throws: `STORE_UNAVAILABLE` with the reason (never a query or its data).
    public func probe(logger: Logger) async throws(VaultError) {
        let config: PostgresConnection.Configuration
        if let socketPath {
            config = .init(unixSocketPath: socketPath, username: username, password: password, database: database)
        } else {
            let connectionTLS: PostgresConnection.Configuration.TLS
            if tls.mode == .disable {
                connectionTLS = .disable
            } else {
                do {
                    connectionTLS = .require(try NIOSSLContext(configuration: try tls.tlsConfiguration()))
                } catch let error as VaultError {
                    throw error
                } catch {
                    throw VaultError(.storeTLSInvalid, "TLS settings cannot be used: \(error)")
                }
            }
            config = .init(host: host ?? "localhost", port: port, username: username, password: password, database: database, tls: connectionTLS)
        }
        do {
            let connection = try await PostgresConnection.connect(configuration: config, id: 0, logger: logger)
            try await connection.close()
        } catch {
            let target = socketPath ?? "\(host ?? "localhost"):\(port)"
            throw VaultError(.storeUnavailable, "cannot connect to PostgreSQL at \(target) (sslmode=\(tls.mode.rawValue)): \(Self.reason(error))")
        }
    }
}

extension StoreLocation.PostgresLocation {
    /// Why a connection failed, for people: the server's message, or the system error of the
    /// connection (`connection refused`, `no such file or directory`) with a next step, never
    /// the client library's type names.
    static func reason(_ error: any Error) -> String {
        if let e = error as? PSQLError, let message = e.serverInfo?[.message] { return message }
        let text = String(describing: (error as? PSQLError)?.underlying ?? error)
        if let match = text.firstMatch(of: /errno: ([0-9]+)/), let number = Int32(match.output.1) {
            switch number {
            case ECONNREFUSED: return "connection refused (is PostgreSQL running and listening there?)"
            case ENOENT: return "no such socket (is PostgreSQL running, and is the socket directory right?)"
            case EACCES, EPERM: return "permission denied (may this user open the socket?)"
            case ETIMEDOUT: return "timed out (is the host reachable?)"
            case EHOSTUNREACH, ENETUNREACH: return "the host is unreachable"
            default: return String(cString: strerror(number))
            }
        }
        if text.contains("SSL") || text.localizedCaseInsensitiveContains("certificate") || text.contains("handshake") {
            // BoringSSL's reason, e.g. CERTIFICATE_VERIFY_FAILED → "certificate verify failed".
            let reason = text.matches(of: /[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+/).last.map { $0.output.lowercased().replacingOccurrences(of: "_", with: " ") }
            return "the TLS handshake failed\(reason.map { ": \($0)" } ?? "") (is the server's certificate signed by sslrootcert, and for verify-full issued to this host name?)"
        }
        if text.contains("NIOConnectionError") || text.contains("SingleConnectionFailure") || text.contains("connectTimeout") {
            return "the connection failed (is PostgreSQL running and listening there?)"
        }
        if let e = error as? PSQLError { return e.underlying.map { String(describing: $0) } ?? e.code.description }
        return String(describing: type(of: error))
    }
}

extension StoreLocation.TLSSettings {
    func clientTLS() throws(VaultError) -> PostgresClient.Configuration.TLS {
        guard mode != .disable else { return .disable }
        return .require(try tlsConfiguration())
    }

    func tlsConfiguration() throws(VaultError) -> TLSConfiguration {
        var config = TLSConfiguration.makeClientConfiguration()
        config.minimumTLSVersion = .tlsv12
        switch mode {
        case .disable: break
        case .require: config.certificateVerification = .none
        case .verifyCA: config.certificateVerification = .noHostnameVerification
        case .verifyFull: config.certificateVerification = .fullVerification
        }
        if let rootCertificatePath {
            guard FileManager.default.isReadableFile(atPath: rootCertificatePath) else {
                throw VaultError(.storeTLSInvalid, "sslrootcert \(rootCertificatePath) cannot be read")
            }
            config.trustRoots = .file(rootCertificatePath)
        }
        if let certificatePath, let keyPath {
            do {
                config.certificateChain = try NIOSSLCertificate.fromPEMFile(certificatePath).map { .certificate($0) }
                config.privateKey = .privateKey(try NIOSSLPrivateKey(file: keyPath, format: .pem))
            } catch {
                throw VaultError(.storeTLSInvalid, "sslcert/sslkey cannot be loaded (PEM expected)")
            }
        }
        return config
    }
}

extension StoreLocation {
    /// Opens the store, migrates it as the sidecar's zone (`Database.migrate(as:)`: on SQLite
    /// every table of the vault; on PostgreSQL the sidecar zone's, the gateway making its own),
    /// and runs `body` over it; on PostgreSQL the client runs while `body` does, and is stopped
    /// when it returns. A sidecar serves inside `body`; `vault rewrap` and `vault keys retire` walk
    /// the envelope tables in it.
    /// - Throws: `STORE_UNAVAILABLE` (the connection or TLS failure at start, with its reason),
    ///   `STORE_TOO_NEW`, `STORE_TLS_INVALID`, and whatever `body` throws.
    /// `server`: a server's store (SQLite statements on the calling thread, `Database.onCallingThread`).
    public func withDatabase<T: Sendable>(
        logger: Logger, server: Bool = false, existing: Bool = false, _ body: (Database) async throws -> T
    ) async throws -> T {
        switch self {
        case .sqlite(let path):
            if existing { try Self.checkVaultStore(sqlitePath: path) }
            let db = try Database(sqlitePath: path, onCallingThread: server)
            try await db.migrate(as: .sidecar)
            return try await body(db)
        case .postgres(let location):
            let configuration = try location.configuration()
            try await location.probe(logger: logger)
            let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
            return try await withThrowingTaskGroup(of: Void.self, returning: T.self) { group in
                group.addTask { await client.run() }
                defer { group.cancelAll() }
                let db = Database(postgres: client, logger: logger, preparedStatements: location.preparedStatements)
                if existing {
                    do { _ = try await db.query("SELECT count(*) FROM vault_migrations", []) } catch {
                        // Named as found: a database without the table, or one that could not be read.
                        throw StoreError(.unavailable, "the PostgreSQL database is not a vault store, or cannot be read (vault_migrations: \((error as? StoreError)?.message ?? Database.describe(error)))")
                    }
                }
                try await db.migrate(as: .sidecar)
                return try await body(db)
            }
        }
    }
}

extension StoreLocation {
    /// `existing`: an operator command's store must be one a vault made (its `vault_migrations`
    /// table) or an empty file, checked read-only before it is opened for writing: pointed at another SQLite file,
    /// a command wrote the whole vault schema into it (and switched it to WAL), and
    /// `vault keys retire` then found no envelope there to refuse the retirement (outside audit).
    static func checkVaultStore(sqlitePath path: String) throws(StoreError) {
        // An empty file holds nothing to damage: SQLite takes it as a new database.
        if let size = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int, size == 0 { return }
        do {
            var configuration = Configuration()
            configuration.readonly = true
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            guard try queue.read({ try $0.tableExists("vault_migrations") }) else {
                throw StoreError(.unavailable, "\(path) is not a vault store (no vault_migrations table)")
            }
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(.unavailable, "\(path) is not a vault store (\(Database.describe(error)))")
        }
    }
}
