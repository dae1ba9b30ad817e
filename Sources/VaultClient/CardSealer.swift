import CardRules
import VaultCrypto

/// What a non-PCI Swift caller uses to check and seal cards with the vault's public key only.
///
/// ```swift
/// let sealer = try CardSealer(publicKeyFile: "Keys/0123456789abcdef.pub")
/// let envelope = try sealer.seal(cardJSON: body)   // JSON bytes → CardEnvelope, nothing in clear kept
/// ```
public struct CardSealer: Sendable {
    /// The key cards are sealed to.
    public let publicKey: PublicKey
    /// The card rules applied before sealing.
    public let validator: CardValidator

    /// A sealer for `publicKey`. Callers never hold the fingerprint key: the gateway computes
    /// fingerprints (docs/key-files.md), so envelopes sealed here carry none.
    public init(publicKey: PublicKey, validator: CardValidator = CardValidator()) {
        self.publicKey = publicKey
        self.validator = validator
    }

    /// A sealer for the public key in `publicKeyFile`.
    /// - Throws: the key-file codes of `KeyFiles.loadPublicKey`.
    public init(publicKeyFile: String, validator: CardValidator = CardValidator()) throws(VaultError) {
        self.init(publicKey: try KeyFiles.loadPublicKey(path: publicKeyFile), validator: validator)
    }

    /// Validates a card number given as ASCII (spaces and dashes allowed); stores nothing.
    public func validate(number: UnsafeRawBufferPointer, partial: Bool = false) -> CardNumberInfo {
        do throws(CardRulesError) {
            let digits = try SecureBytes(capacity: max(number.count, 19)) { (out) throws(CardRulesError) -> Int in
                try PANNormalizer.normalize(number, into: out)
            }
            return digits.withUnsafeBytes { validator.validate(digits: $0, partial: partial) }
        } catch {
            return CardNumberInfo(brand: nil, candidates: [], length: 0, luhn: false, valid: false, bin: nil, last4: nil, cvcLength: nil, binInfo: nil, errors: [error.code])
        }
    }

    /// Validates and seals a card.
    /// - Throws: the codes of `CardEnvelope.seal`.
    public func seal(_ card: CardData) throws(VaultError) -> CardEnvelope {
        try CardEnvelope.seal(card, to: publicKey, validator: validator)
    }

    /// Reads a card from JSON bytes (`{"number","exp_month","exp_year","cvc","name"}`) and seals it.
    /// - Throws: the codes of `CardData.parseJSON` and `CardEnvelope.seal`.
    public func seal(cardJSON: UnsafeRawBufferPointer) throws(VaultError) -> CardEnvelope {
        try seal(CardData.parseJSON(cardJSON))
    }
}
