import Foundation
import Logging
import PostgresNIO
import Tokenizer
import VaultCrypto

/// Where tokens are kept: `sqlite:PATH` (the embedded default) or a PostgreSQL URL
/// (`postgres://user[:password]@host[:port]/db`, or `postgres://user@/db?host=/run/postgresql`
/// for a Unix socket directory).
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
        self = .postgres(PostgresLocation(
            host: (url.host?.isEmpty ?? true) ? nil : url.host, port: port,
            socketPath: socketDir.map { $0.hasSuffix(".s.PGSQL.\(port)") ? $0 : "\($0)/.s.PGSQL.\(port)" },
            username: user, password: url.password, database: database))
        if case .postgres(let p) = self, p.host == nil, p.socketPath == nil {
            throw VaultError(.storeLocationInvalid, "a PostgreSQL store needs a host or ?host=/socket/dir")
        }
    }
}

extension StoreLocation.PostgresLocation {
    /// The client configuration (TLS off: Unix socket or a trusted network only for now).
    var configuration: PostgresClient.Configuration {
        if let socketPath {
            return .init(unixSocketPath: socketPath, username: username, password: password, database: database)
        }
        return .init(host: host ?? "localhost", port: port, username: username, password: password, database: database, tls: .disable)
    }
}

extension VaultError.Code {
    /// A `--store` value that is neither `sqlite:PATH` nor a PostgreSQL URL.
    public static let storeLocationInvalid = VaultError.Code(rawValue: "STORE_LOCATION_INVALID")
}
