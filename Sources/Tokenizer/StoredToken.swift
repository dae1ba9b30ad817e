import Foundation
import GRDB
import VaultCrypto

/// A token row as both SQL backends store it: text and integers only.
struct StoredToken: Sendable {
    var token: String
    var envelope: String
    var brand: String
    var bin: String
    var last4: String
    var fingerprint: String?
    var createdAt: Int64
    var expiresAt: Int64
    var singleUse: Bool

    init(_ r: TokenRecord) {
        token = r.token
        // Never the CVC: it is held in memory only (HeldCVCs), so no WAL frame, free page or dead
        // row version can keep it (DESIGN §1).
        envelope = (r.envelope.fields[.cvc] == nil ? r.envelope : r.envelope.droppingCVC()).json
        brand = r.card.brand.rawValue
        bin = r.card.bin
        last4 = r.card.last4
        fingerprint = r.fingerprint
        createdAt = Self.millis(r.createdAt)
        expiresAt = Self.millis(r.expiresAt)
        singleUse = r.singleUse
    }

    init(token: String, envelope: String, fingerprint: String?, createdAt: Int64, expiresAt: Int64, singleUse: Bool) {
        self.token = token
        self.envelope = envelope
        brand = ""
        bin = ""
        last4 = ""
        self.fingerprint = fingerprint
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.singleUse = singleUse
    }

    init(row: Row) {
        token = row["token"]
        envelope = row["envelope"]
        brand = ""
        bin = ""
        last4 = ""
        fingerprint = row["fingerprint"]
        createdAt = row["created_at"]
        expiresAt = row["expires_at"]
        singleUse = row["single_use"]
    }

    /// The record, without a CVC (the tokenizer adds a held one).
    func record() throws(TokenStoreError) -> TokenRecord {
        let env: CardEnvelope
        do {
            env = try CardEnvelope(json: envelope)
        } catch {
            throw TokenStoreError(.corruptRow, "stored envelope of a token does not parse: \(error.code)")
        }
        return TokenRecord(
            token: token, envelope: env, cvcField: nil, createdAt: Self.date(createdAt), expiresAt: Self.date(expiresAt),
            cvcExpiresAt: nil, singleUse: singleUse, fingerprint: fingerprint)
    }

    static func millis(_ d: Date) -> Int64 { Int64((d.timeIntervalSince1970 * 1000).rounded(.down)) }
    static func date(_ ms: Int64) -> Date { Date(timeIntervalSince1970: Double(ms) / 1000) }
}
