import Foundation
import VaultCrypto

/// What the vault keeps for a token: the sealed card and its metadata, never plaintext.
///
/// The CVC's sealed field is kept apart (`cvcField`): it is never written to the store, only held
/// in the tokenizing sidecar's memory (`HeldCVCs`) until its TTL or the first authorization attempt
/// (docs/threat-model.md: never where deleting it leaves a copy). The fingerprint is the gateway's
/// answer (docs/key-files.md), nil until the gateway has given it.
public struct TokenRecord: Sendable, Equatable {
    /// `tok_` + 26 base32 characters (128 random bits), or a card-shaped token (`CardShapedToken`).
    public var token: String
    /// The envelope without its CVC field.
    public var envelope: CardEnvelope
    /// The sealed CVC field (`fields.cvc` of the envelope), until dropped.
    public var cvcField: String?
    /// When the token was made.
    public var createdAt: Date
    /// When the token stops resolving and is purged.
    public var expiresAt: Date
    /// When the CVC is dropped (nil when there is none).
    public var cvcExpiresAt: Date?
    /// A single-use token is consumed by a successful payment.
    public var singleUse: Bool
    /// The card's fingerprint as the gateway computed it (nil: not yet known).
    public var fingerprint: String?
    /// The caller's metadata (README "Metadata").
    public var metadata: Metadata

    /// A record.
    public init(
        token: String, envelope: CardEnvelope, cvcField: String?, createdAt: Date, expiresAt: Date,
        cvcExpiresAt: Date?, singleUse: Bool, fingerprint: String? = nil, metadata: Metadata = Metadata()
    ) {
        self.metadata = metadata
        self.token = token
        self.envelope = envelope
        self.cvcField = cvcField
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.cvcExpiresAt = cvcExpiresAt
        self.singleUse = singleUse
        self.fingerprint = fingerprint
    }

    /// The card metadata (safe to return), with the gateway's fingerprint (never one a caller
    /// wrote into its envelope).
    public var card: CardMetadata {
        var c = envelope.card
        c.fingerprint = fingerprint
        return c
    }

    /// The whole envelope, with the CVC field when it is still held (for the gateway).
    public var fullEnvelope: CardEnvelope {
        var e = envelope
        if let cvcField { e.fields[.cvc] = cvcField }
        return e
    }

    /// Whether the CVC is still held.
    public var hasCVC: Bool { cvcField != nil }
}
