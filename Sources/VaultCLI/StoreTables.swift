import Store
import Foundation
import Logging
import Payments
import PostgresNIO
import Sidecar
import Tokenizer
import VaultCrypto

/// Opens a store (as `vault serve --store` names it) for key rotation: its envelope tables.
enum StoreTables {
    /// Runs `body` over the store's envelope tables (tokens, instruments), then closes the store.
    /// - Throws: `STORE_UNAVAILABLE` (a SQLite file that does not exist is not created).
    static func with<T: Sendable>(_ store: String, logger: Logger, _ body: @Sendable ([any EnvelopeTable]) async throws -> T) async throws -> T {
        switch try StoreLocation(store) {
        case .sqlite(let path):
            guard FileManager.default.fileExists(atPath: path) else {
                throw VaultError(.init(rawValue: "STORE_UNAVAILABLE"), "no SQLite store at \(path)", field: "--store")
            }
            let tokens = try SQLiteTokenStore(path: path)
            _ = try SQLiteCustomerStore(pool: tokens.database)
            return try await body([tokens.envelopeTable, SQLiteCustomerStore.envelopeTable(pool: tokens.database)])
        case .postgres(let location):
            try await location.probe(logger: logger)
            let client = PostgresClient(configuration: try location.configuration(), backgroundLogger: logger)
            return try await withThrowingTaskGroup(of: T?.self) { group in
                group.addTask {
                    await client.run()
                    return nil
                }
                defer { group.cancelAll() }
                try await PostgresTokenStore(client: client, logger: logger).migrate()
                try await PostgresCustomerStore(client: client, logger: logger).migrate()
                return try await body([
                    PostgresTokenStore.envelopeTable(client: client, logger: logger),
                    PostgresCustomerStore.envelopeTable(client: client, logger: logger),
                ])
            }
        }
    }

    /// Envelopes per kid across the store's tables.
    static func kidCounts(_ store: String) async throws -> [String: Int] {
        try await with(store, logger: Logger(label: "vault.keys")) { tables in
            var total: [String: Int] = [:]
            for t in tables { total.merge(try await t.kidCounts(), uniquingKeysWith: +) }
            return total
        }
    }
}
