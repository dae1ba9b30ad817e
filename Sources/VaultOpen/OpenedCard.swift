import CardRules
import VaultCrypto

/// A card opened from an envelope, checked against its metadata. Exists only in the gateway zone.
public struct OpenedCard: Sendable {
    /// The card in clear (`SecureBytes` for number, CVC and name).
    public let card: CardData
    /// The envelope's metadata, verified against the opened card.
    public let metadata: CardMetadata
    /// The envelope id.
    public let envelopeID: String
    /// The key it was sealed to.
    public let kid: KeyID
}
