internal import CSodium
import CardRules

/// Card envelope v1 (docs/envelope-v1.md): one sealed box per card.
///
/// A fresh 32-byte data key is sealed with `crypto_box_seal` to the vault's public key (`key`);
/// each field is `base64(nonce(24) ‖ ciphertext ‖ tag(16))` under
/// `crypto_aead_xchacha20poly1305_ietf` with that data key and associated data
/// `vault:v1:<kid>:<id>:<field name>`, so a field cannot be moved to another slot or envelope.
/// The value itself holds ciphertext and metadata only: it is safe to store and pass around.
public struct CardEnvelope: Sendable, Hashable {
    /// The field slots, in their JSON order.
    public enum Field: String, Sendable, CaseIterable {
        /// ASCII digits.
        case pan
        /// `MM/YYYY`.
        case exp
        /// ASCII digits; optional, deleted after the first authorization attempt.
        case cvc
        /// UTF-8; optional.
        case name
    }

    /// Envelope format version: 1.
    public var version: Int
    /// `env_` + 32 hex characters (128 random bits).
    public var id: String
    /// The key the data key is sealed to.
    public var kid: KeyID
    /// Base64 of `crypto_box_seal(data key)` (80 bytes).
    public var sealedKey: String
    /// Base64 `nonce ‖ ciphertext ‖ tag` per field present.
    public var fields: [Field: String]
    /// Metadata made at sealing time.
    public var card: CardMetadata

    /// An envelope from its parts (decoding, tests).
    public init(version: Int = 1, id: String, kid: KeyID, sealedKey: String, fields: [Field: String], card: CardMetadata) {
        self.version = version
        self.id = id
        self.kid = kid
        self.sealedKey = sealedKey
        self.fields = fields
        self.card = card
    }

    /// The associated data binding a field to its envelope and slot.
    public static func associatedData(kid: KeyID, id: String, field: Field) -> [UInt8] {
        Array("vault:v1:\(kid.rawValue):\(id):\(field.rawValue)".utf8)
    }

    /// This envelope without its CVC field (docs/envelope-v1.md: dropping the CVC = deleting
    /// `fields.cvc`).
    public func droppingCVC() -> CardEnvelope {
        var copy = self
        copy.fields[.cvc] = nil
        return copy
    }
}

// MARK: - Sealing

extension CardEnvelope {
    /// Validates `card` and seals it to `publicKey`.
    ///
    /// The card must have a known brand, a valid length and Luhn digit, an expiry that has not
    /// passed, and a CVC of its brand's length when given. The envelope carries no fingerprint:
    /// only the gateway zone holds the fingerprint key (docs/key-files.md), and the gateway computes it.
    /// - Throws: the card-rules codes (`LUHN_CHECK_FAILED`, `UNKNOWN_CARD_BRAND`,
    ///   `INVALID_CARD_LENGTH`, `BRAND_NOT_ACCEPTED`, `CARD_EXPIRED`, `EXPIRY_TOO_FAR`,
    ///   `INVALID_CVC_LENGTH`, `CVC_MALFORMED`…) with the field they concern, `INPUT_TOO_LARGE`
    ///   for a name over `CardData.maxNameBytes`.
    public static func seal(
        _ card: CardData, to publicKey: PublicKey,
        validator: CardValidator = CardValidator(), now: CalendarMonth = .current
    ) throws(VaultError) -> CardEnvelope {
        let metadata = try validate(card, validator: validator, now: now)
        return seal(card, metadata: metadata, to: publicKey)
    }

    /// Checks a card against the rules and returns its metadata (no sealing).
    /// - Throws: as `seal`.
    public static func validate(
        _ card: CardData, validator: CardValidator = CardValidator(),
        now: CalendarMonth = .current
    ) throws(VaultError) -> CardMetadata {
        let info = card.number.withUnsafeBytes { validator.validate(digits: $0) }
        if let first = info.errors.first {
            throw VaultError(ErrorCode(cardRules: first), numberMessage(first), field: "card.number")
        }
        guard info.valid, info.brand != nil else {
            throw VaultError(.invalidCardNumber, "the card number is not valid", field: "card.number")
        }
        if let code = card.expiry.validate(now: now) {
            throw VaultError(ErrorCode(cardRules: code), code == .expired ? "the card has expired" : "the expiry date is too far in the future", field: "card.exp_year")
        }
        if let cvc = card.cvc, let code = cvc.withUnsafeBytes({ validator.validateCVC($0, brand: info.brand) }) {
            throw VaultError(ErrorCode(cardRules: code), "the CVC is not valid for this card brand", field: "card.cvc")
        }
        if let name = card.name {
            guard name.count <= CardData.maxNameBytes else {
                throw VaultError(.inputTooLarge, "the cardholder name is longer than \(CardData.maxNameBytes) bytes", field: "card.name")
            }
            let bad = name.withUnsafeBytes { $0.contains { $0 < 0x20 || $0 == 0x7f } || !JSONReader.isValidUTF8($0) }
            if bad { throw VaultError(.cardNameInvalid, "the cardholder name has control characters or is not UTF-8", field: "card.name") }
        }
        return CardMetadata(info: info, expiry: card.expiry, fingerprint: nil)
    }

    /// Seals an already validated card with the given metadata. `id` keeps an envelope's id when
    /// it is sealed again to another key (rewrap); nil makes a new random one.
    public static func seal(_ card: CardData, metadata: CardMetadata, to publicKey: PublicKey, id keptID: String? = nil) -> CardEnvelope {
        Sodium.ensureInitialised()
        let nonceBytes = Sodium.aeadNonceBytes, keyBytes = Sodium.aeadKeyBytes
        let slots: [(Field, SecureBytes?)] = [(.pan, card.number), (.exp, nil), (.cvc, card.cvc), (.name, card.name)]
        // One CSPRNG call for the id, the data key and every nonce.
        let randomCount = 16 + keyBytes + nonceBytes * slots.count
        return withWipedTemporary(byteCount: randomCount + 16) { random in
            randombytes_buf(random.baseAddress!, randomCount)
            let id = keptID ?? "env_" + Hex.encode(UnsafeRawBufferPointer(rebasing: random[0..<16]))
            let dataKey = UnsafeRawBufferPointer(rebasing: random[16..<(16 + keyBytes)])
            var box = [UInt8](repeating: 0, count: keyBytes + Sodium.sealBytes)
            publicKey.sealBox(dataKey, into: &box)
            var fields: [Field: String] = [:]
            fields.reserveCapacity(4)
            // Associated data `vault:v1:<kid>:<id>:<field>`: the shared head is built once.
            var ad = Array("vault:v1:\(publicKey.kid.rawValue):\(id):".utf8)
            let headCount = ad.count
            ad.reserveCapacity(headCount + 8)
            for (i, (slot, value)) in slots.enumerated() {
                let nonceStart = 16 + keyBytes + nonceBytes * i
                let nonce = UnsafeRawBufferPointer(rebasing: random[nonceStart..<(nonceStart + nonceBytes)])
                ad.removeSubrange(headCount...)
                ad.append(contentsOf: slot.rawValue.utf8)
                if slot == .exp {
                    var exp = card.expiry.asciiBytes
                    fields[slot] = withUnsafeBytes(of: &exp) { encrypt($0, key: dataKey, nonce: nonce, ad: ad) }
                    withUnsafeMutableBytes(of: &exp) { wipe($0) }
                } else if let value {
                    fields[slot] = value.withUnsafeBytes { encrypt($0, key: dataKey, nonce: nonce, ad: ad) }
                }
            }
            let sealedKey = box.withUnsafeBytes { Base64.encode($0) }
            return CardEnvelope(id: id, kid: publicKey.kid, sealedKey: sealedKey, fields: fields, card: metadata)
        }
    }

    private static func encrypt(_ plain: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer, ad: [UInt8]) -> String {
        let total = Sodium.aeadNonceBytes + plain.count + Sodium.aeadTagBytes
        return withUnsafeTemporaryAllocation(byteCount: total, alignment: 16) { out in
            out.copyMemory(from: nonce)
            let c = out.baseAddress!.assumingMemoryBound(to: UInt8.self)
            var clen: UInt64 = 0
            _ = crypto_aead_xchacha20poly1305_ietf_encrypt(
                c + Sodium.aeadNonceBytes, &clen,
                plain.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(plain.count),
                ad, UInt64(ad.count), nil,
                nonce.baseAddress!.assumingMemoryBound(to: UInt8.self), key.baseAddress!.assumingMemoryBound(to: UInt8.self))
            return Base64.encode(UnsafeRawBufferPointer(out))
        }
    }

    private typealias Code = VaultError.Code

    private static func numberMessage(_ code: CardRulesError.Code) -> String {
        switch code {
        case .luhnFailed: "the card number fails the Luhn check"
        case .unknownBrand: "the card number matches no known card brand"
        case .invalidLength: "the card number has the wrong number of digits for its brand"
        case .tooShort: "the card number is too short"
        case .tooLong: "the card number is too long"
        case .brandNotAccepted: "this card brand is not accepted"
        case .nonDigit: "the card number has characters other than digits, spaces and dashes"
        default: "the card number is not valid"
        }
    }
}

extension CardExpiry {
    /// `MM/YYYY` as seven ASCII bytes, without a `String`.
    var asciiBytes: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) {
        func d(_ v: Int) -> UInt8 { UInt8(48 + v % 10) }
        return (d(month / 10), d(month), UInt8(ascii: "/"), d(year / 1000), d(year / 100), d(year / 10), d(year))
    }
}
