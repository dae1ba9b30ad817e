import Foundation
import Logging
import Payments
import Store
import Tokenizer
import VaultCrypto

/// Opens a store (as `vault serve --store` names it) for an operator command: key rotation's
/// envelope tables, `vault payments settle`.
enum StoreTables {
    /// Runs `body` over the store's envelope tables (tokens, instruments), then closes the store.
    static func with<T: Sendable>(_ store: String, logger: Logger, _ body: @Sendable ([any EnvelopeTable]) async throws -> T) async throws -> T {
        try await withStore(store, logger: logger) { db in
            try await body([SQLTokenStore(database: db).envelopeTable, SQLCustomerStore(database: db).envelopeTable])
        }
    }

    /// Opens an operator command's store, migrated first as a sidecar starting on it would, runs
    /// `body` over it, then closes it. Only a store a vault made (`StoreLocation.checkVaultStore`).
    /// - Throws: `STORE_UNAVAILABLE` (a SQLite file that does not exist is not created) and the
    ///   store's other codes, as `VaultError`; whatever `body` throws.
    static func withStore<T: Sendable>(_ store: String, logger: Logger, _ body: (Database) async throws -> T) async throws -> T {
        let location = try StoreLocation(store)
        if case .sqlite(let path) = location, !FileManager.default.fileExists(atPath: path) {
            throw VaultError(.storeUnavailable, "no SQLite store at \(path)", field: "--store")
        }
        do {
            return try await location.withDatabase(logger: logger, existing: true, body)
        } catch let error as StoreError {
            throw VaultError(store: error)
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
