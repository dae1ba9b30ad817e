import Foundation
import Store
import VaultCrypto

/// Where tokens live. `SQLTokenStore` implements it over either backend of `Store.Database`
/// (SQLite, PostgreSQL), and one test suite runs it on both. Rows hold envelopes (ciphertext) and
/// metadata, never plaintext.
///
/// Every method that changes something returns only after the change is durable.
public protocol TokenStore: Sendable {
    /// Stores a new token.
    /// - Throws: `StoreError` (`TOKEN_EXISTS` for a duplicate, `STORE_UNAVAILABLE`).
    func insert(_ record: TokenRecord) async throws(StoreError)

    /// The record of a token that has not expired at `now`, or nil.
    func get(_ token: String, now: Date) async throws(StoreError) -> TokenRecord?

    /// Deletes a token and its envelope. False when there was none.
    func delete(_ token: String) async throws(StoreError) -> Bool

    /// Deletes tokens expired at `now` (CVCs are never in the store: `HeldCVCs`).
    func purgeExpired(now: Date) async throws(StoreError) -> PurgeResult

    /// Sets the fingerprint of tokens that have none yet; returns how many changed.
    func setFingerprints(_ fingerprints: [(token: String, fingerprint: String)]) async throws(StoreError) -> Int

    /// Records that the fingerprints of `group` name one card (the gateway's answer during a
    /// fingerprint-key rotation), so that a lookup by any of them matches the others.
    func linkFingerprints(_ group: [String]) async throws(StoreError)

    /// Writes the `fingerprint.withheld` event of a token just stored without its fingerprint
    /// (the gateway's guessing limit, docs/threat-model.md).
    func noteFingerprintWithheld(_ token: String) async throws(StoreError)

    /// Live tokens without a fingerprint, in token order after `after`, at most `limit`.
    func withoutFingerprint(after: String, limit: Int, now: Date) async throws(StoreError) -> [TokenRecord]

    /// Number of tokens held (expired or not), for metrics and tests.
    func count() async throws(StoreError) -> Int

    /// Answers a cheap real query (readiness: `GET /v1/health/ready`).
    /// - Throws: `STORE_UNAVAILABLE`.
    func ping() async throws(StoreError)

    /// A page of the tokens live at `now`, newest first, of the card with `fingerprint` (the
    /// gateway's fingerprint column) when given, whose metadata holds every pair of `metadata`.
    func list(_ q: ListQuery, fingerprint: String?, metadata: [(key: String, value: String)], now: Date) async throws(StoreError) -> ListPage<TokenRecord>

    /// The reusable (not single-use) tokens of the card with one of `fingerprints` (or a
    /// fingerprint linked to one) whose card expires in `expiry` (month, year), `tok_…` or
    /// card-shaped (`cardShaped`), that live past `liveAfter`; newest first, at most `limit`
    /// (tokenize's `dedupe`).
    func reusable(
        fingerprints: [String], expiry: (month: Int, year: Int), cardShaped: Bool, liveAfter: Date, limit: Int
    ) async throws(StoreError) -> [TokenRecord]

    /// Replaces the envelope of a live token with `envelope` (the same card sealed again) if its
    /// stored envelope still has the sealed data key `oldKey` (a rewrap in between seals a new
    /// one); false when it changed meanwhile or the token is gone.
    func replaceEnvelope(of token: String, oldKey: String, with envelope: CardEnvelope, now: Date) async throws(StoreError) -> Bool
}

/// What a purge removed.
public struct PurgeResult: Sendable, Equatable {
    /// Tokens deleted because they expired.
    public var tokensDeleted: Int
    /// CVCs dropped because their TTL passed.
    public var cvcsDropped: Int

    /// A result.
    public init(tokensDeleted: Int, cvcsDropped: Int) {
        self.tokensDeleted = tokensDeleted
        self.cvcsDropped = cvcsDropped
    }
}

extension TokenStore {
    /// A page without a metadata search.
    public func list(_ q: ListQuery, fingerprint: String?, now: Date) async throws(StoreError) -> ListPage<TokenRecord> {
        try await list(q, fingerprint: fingerprint, metadata: [], now: now)
    }
}
