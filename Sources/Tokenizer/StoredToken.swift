import Foundation
import GRDB
import VaultCrypto

/// A token row as both SQL backends store it: text and integers only.
struct StoredToken: Sendable {
    var token: String
    var envelope: String
    var cvc: String?
    var brand: String
    var bin: String
    var last4: String
    var fingerprint: String?
    var createdAt: Int64
    var expiresAt: Int64
    var cvcExpiresAt: Int64?
    var singleUse: Bool

    init(_ r: TokenRecord) {
        token = r.token
        // TokenRecord.envelope is already without its CVC field (the Tokenizer drops it).
        envelope = (r.envelope.fields[.cvc] == nil ? r.envelope : r.envelope.droppingCVC()).json
        cvc = r.cvcField
        brand = r.card.brand.rawValue
        bin = r.card.bin
        last4 = r.card.last4
        fingerprint = r.card.fingerprint
        createdAt = Self.millis(r.createdAt)
        expiresAt = Self.millis(r.expiresAt)
        cvcExpiresAt = r.cvcField == nil ? nil : r.cvcExpiresAt.map(Self.millis)
        singleUse = r.singleUse
    }

    init(token: String, envelope: String, cvc: String?, createdAt: Int64, expiresAt: Int64, cvcExpiresAt: Int64?, singleUse: Bool) {
        self.token = token
        self.envelope = envelope
        self.cvc = cvc
        brand = ""
        bin = ""
        last4 = ""
        fingerprint = nil
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.cvcExpiresAt = cvcExpiresAt
        self.singleUse = singleUse
    }

    init(row: Row) {
        token = row["token"]
        envelope = row["envelope"]
        cvc = row["cvc"]
        brand = ""
        bin = ""
        last4 = ""
        fingerprint = nil
        createdAt = row["created_at"]
        expiresAt = row["expires_at"]
        cvcExpiresAt = row["cvc_expires_at"]
        singleUse = row["single_use"]
    }

    /// The record; a CVC whose TTL has passed at `now` is not returned even before the sweeper runs.
    func record(now: Date) throws(TokenStoreError) -> TokenRecord {
        let env: CardEnvelope
        do {
            env = try CardEnvelope(json: envelope)
        } catch {
            throw TokenStoreError(.corruptRow, "stored envelope of a token does not parse: \(error.code)")
        }
        let cvcLive = cvc != nil && (cvcExpiresAt.map { $0 > Self.millis(now) } ?? true)
        return TokenRecord(
            token: token, envelope: env, cvcField: cvcLive ? cvc : nil,
            createdAt: Self.date(createdAt), expiresAt: Self.date(expiresAt),
            cvcExpiresAt: cvcLive ? cvcExpiresAt.map(Self.date) : nil, singleUse: singleUse)
    }

    static func millis(_ d: Date) -> Int64 { Int64((d.timeIntervalSince1970 * 1000).rounded(.down)) }
    static func date(_ ms: Int64) -> Date { Date(timeIntervalSince1970: Double(ms) / 1000) }
}
