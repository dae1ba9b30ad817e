import Foundation
import Store
import VaultCrypto

/// A token row as the store keeps it (`vault_tokens`): text, integers and a boolean only.
struct StoredToken: Sendable {
    var token: String
    var envelope: String
    var brand: String
    var bin: String
    var last4: String
    var fingerprint: String?
    var createdAt: Date
    var expiresAt: Date
    var singleUse: Bool
    var metadata: Metadata

    /// The columns `values` binds, in order.
    static let insertColumns = "token, envelope, brand, bin, last4, fingerprint, created_at, expires_at, single_use, metadata"
    /// The columns `init(row:)` reads, in order.
    static let selectColumns = "token, envelope, fingerprint, created_at, expires_at, single_use, metadata"

    init(_ r: TokenRecord) {
        token = r.token
        // Never the CVC: it is held in memory only (HeldCVCs), so no WAL frame, free page or dead
        // row version can keep it (docs/threat-model.md, "CVC").
        envelope = (r.envelope.fields[.cvc] == nil ? r.envelope : r.envelope.droppingCVC()).json
        brand = r.card.brand.rawValue
        bin = r.card.bin
        last4 = r.card.last4
        fingerprint = r.fingerprint
        createdAt = r.createdAt
        expiresAt = r.expiresAt
        singleUse = r.singleUse
        metadata = r.metadata
    }

    /// A row read with `selectColumns` (the metadata columns are for lookups: the envelope has it).
    init(row: SQLRow) throws(StoreError) {
        token = try row.string(0)
        envelope = try row.string(1)
        brand = ""
        bin = ""
        last4 = ""
        fingerprint = row.optionalString(2)
        createdAt = try row.date(3)
        expiresAt = try row.date(4)
        singleUse = try row.bool(5)
        metadata = try Metadata(column: row.optionalString(6))
    }

    /// The values of `insertColumns`.
    var values: [SQLValue] {
        let columns: [any SQLBindable] = [token, envelope, brand, bin, last4, fingerprint, createdAt, expiresAt, singleUse, metadata.column]
        return columns.map(\.sqlValue)
    }

    /// The record, without a CVC (the tokenizer adds a held one).
    func record() throws(StoreError) -> TokenRecord {
        let env: CardEnvelope
        do {
            env = try CardEnvelope(json: envelope)
        } catch {
            throw StoreError(.corruptRow, "stored envelope of a token does not parse: \(error.code)")
        }
        return TokenRecord(
            token: token, envelope: env, cvcField: nil, createdAt: createdAt, expiresAt: expiresAt,
            cvcExpiresAt: nil, singleUse: singleUse, fingerprint: fingerprint, metadata: metadata)
    }
}
