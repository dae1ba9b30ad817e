import Foundation
import VaultCrypto

/// Creation under an idempotency key (README "Conventions"): a POST that creates something
/// (a customer, a checkout session, a mandate) and carries an `Idempotency-Key` claims the key in
/// `vault_creates` in the same transaction as the object's insert, so the object and its claim
/// are written together or not at all (a crash leaves neither). A retry of the same request with
/// the same key finds the claim and gets the object made the first time; the same key with
/// another request is refused. Keys are scoped like payments' (per caller uid) and per kind.
public struct CreateClaim: Sendable, Equatable {
    /// Whose key it is (the caller's scope, as for payments).
    public let scope: String
    /// What it creates: `customer`, `session`, `mandate`.
    public let kind: String
    public let key: String
    /// A digest of the request's fields (the same request ⇔ the same digest).
    public let requestHash: String

    public init(scope: String, kind: String, key: String, requestHash: String) {
        self.scope = scope
        self.kind = kind
        self.key = key
        self.requestHash = requestHash
    }

    /// The digest that says whether two creation requests are the same: BLAKE2b-256 of the
    /// request's fields (names sorted; a missing value differs from an empty one), hex.
    public static func requestHash(_ fields: [String: String?]) -> String {
        var text = ""
        for key in fields.keys.sorted() {
            text += key + "=" + (fields[key]!.map { "s" + $0 } ?? "n") + "\u{0}"
        }
        let digest = Array(text.utf8).withUnsafeBytes { Hash.blake2b256($0) }
        return digest.map { String(format: "%02x", $0) }.joined()
    }

    /// What claiming found.
    public enum Outcome: Sendable, Equatable {
        /// The key is new: it now names `objectID` (make the object in the same transaction).
        case claimed
        /// The same request was made with this key: this is the object it made.
        case replay(objectID: String)
        /// The key was used for another request.
        case reused
    }
}

extension Transaction {
    /// Claims `claim`'s key for `objectID` (see `CreateClaim`).
    public func claim(_ claim: CreateClaim, objectID: String, at now: Date) async throws(StoreError) -> CreateClaim.Outcome {
        let inserted = try await query("""
            INSERT INTO vault_creates (scope, kind, idempotency_key, request_hash, object_id, created_at) VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT (scope, kind, idempotency_key) DO NOTHING RETURNING object_id
            """, [claim.scope, claim.kind, claim.key, claim.requestHash, objectID, now])
        if !inserted.isEmpty { return .claimed }
        guard let row = try await query(
            "SELECT request_hash, object_id FROM vault_creates WHERE scope = ? AND kind = ? AND idempotency_key = ?",
            [claim.scope, claim.kind, claim.key]).first
        else { throw StoreError(.unavailable, "an idempotency key's claim vanished while it was read") }
        return try row.string(0) == claim.requestHash ? .replay(objectID: try row.string(1)) : .reused
    }
}
