import Foundation

/// Where tokens live. Two real backends implement it (SQLite, PostgreSQL) and one test suite runs
/// against both. Rows hold envelopes (ciphertext) and metadata, never plaintext.
///
/// Every method that changes something returns only after the change is durable.
public protocol TokenStore: Sendable {
    /// Stores a new token.
    /// - Throws: `TokenStoreError` (`TOKEN_EXISTS` for a duplicate, `STORE_UNAVAILABLE`).
    func insert(_ record: TokenRecord) async throws(TokenStoreError)

    /// The record of a token that has not expired at `now`, or nil.
    func get(_ token: String, now: Date) async throws(TokenStoreError) -> TokenRecord?

    /// Deletes a token and its envelope. False when there was none.
    func delete(_ token: String) async throws(TokenStoreError) -> Bool

    /// Deletes tokens expired at `now` (CVCs are never in the store: `HeldCVCs`).
    func purgeExpired(now: Date) async throws(TokenStoreError) -> PurgeResult

    /// Sets the fingerprint of tokens that have none yet; returns how many changed.
    func setFingerprints(_ fingerprints: [(token: String, fingerprint: String)]) async throws(TokenStoreError) -> Int

    /// Live tokens without a fingerprint, in token order after `after`, at most `limit`.
    func withoutFingerprint(after: String, limit: Int, now: Date) async throws(TokenStoreError) -> [TokenRecord]

    /// Number of tokens held (expired or not), for metrics and tests.
    func count() async throws(TokenStoreError) -> Int
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

/// The token store's error: a stable code and a message without card data.
public struct TokenStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A stable identifier.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }
        /// A token with that id already exists.
        public static let tokenExists = Code(rawValue: "TOKEN_EXISTS")
        /// The store cannot be reached or refused the operation.
        public static let unavailable = Code(rawValue: "STORE_UNAVAILABLE")
        /// A stored row could not be read back (not an envelope v1).
        public static let corruptRow = Code(rawValue: "STORE_ROW_CORRUPT")
    }

    /// What went wrong.
    public let code: Code
    /// For people; never card data.
    public let message: String

    /// An error.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
