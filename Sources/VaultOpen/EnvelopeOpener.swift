import CardRules
@_spi(Opening) import VaultCrypto

/// Opens card envelopes v1: the only code that turns an envelope back into a card.
///
/// Opening checks, in order: the kid is in the ring (`KEY_MISMATCH`), the sealed data key opens
/// (`ENVELOPE_KEY_CORRUPT`), every field authenticates under its own slot and envelope id
/// (`ENVELOPE_FIELD_CORRUPT`), each plaintext has its slot's form (`ENVELOPE_FIELD_INVALID`), and
/// the metadata re-derived from the opened PAN and expiry equals the envelope's `card`
/// (`ENVELOPE_METADATA_MISMATCH`). The fingerprint key lives here, in the gateway zone, and nowhere
/// else (docs/key-files.md): `fingerprint(of:)` is how the sidecar gets a token's fingerprint, and
/// it (or `open(_:checkFingerprint:)`) also refuses an envelope whose carried fingerprint is not
/// the key's. A payment does not check the carried fingerprint: it does not say which card is
/// charged, and a stored instrument must stay chargeable if the fingerprint key is ever replaced.
public struct EnvelopeOpener: Sendable {
    /// The secret keys.
    public let ring: KeyRing
    /// The fingerprint keys (gateway zone only): the primary and, during a rotation, the others.
    /// When set, a fingerprint carried by an envelope is re-derived and checked, and
    /// `fingerprint(of:)` answers.
    public let fingerprintKeys: FingerprintKeys?
    /// The primary fingerprint key.
    public var fingerprintKey: FingerprintKey? { fingerprintKeys?.primary }
    /// The card rules used to re-derive metadata.
    public let validator: CardValidator

    /// An opener over a key ring.
    public init(ring: KeyRing, fingerprintKey: FingerprintKey? = nil, validator: CardValidator = CardValidator()) {
        self.init(ring: ring, fingerprintKeys: fingerprintKey.map { FingerprintKeys(primary: $0) }, validator: validator)
    }

    /// An opener over a key ring with every fingerprint key held (primary and others).
    public init(ring: KeyRing, fingerprintKeys: FingerprintKeys?, validator: CardValidator = CardValidator()) {
        self.ring = ring
        self.fingerprintKeys = fingerprintKeys
        self.validator = validator
    }

    /// Opens and checks `envelope`.
    /// - Throws: `ENVELOPE_UNSUPPORTED_VERSION`, `KEY_MISMATCH`, `ENVELOPE_KEY_CORRUPT`,
    ///   `ENVELOPE_FIELD_CORRUPT`, `ENVELOPE_FIELD_INVALID`, `ENVELOPE_METADATA_MISMATCH`.
    /// With `checkFingerprint` (and a fingerprint key), a fingerprint the envelope carries must be
    /// the key's fingerprint of the opened PAN.
    public func open(_ envelope: CardEnvelope, checkFingerprint: Bool = false) throws(VaultError) -> OpenedCard {
        guard envelope.version == 1 else {
            throw VaultError(.envelopeUnsupportedVersion, "envelope version \(envelope.version) is not supported")
        }
        let key = try ring.key(for: envelope.kid)
        guard let boxed = Base64Decoding.bytes(envelope.sealedKey),
              let dataKey = boxed.withUnsafeBytes({ key.openSealedBox($0) }), dataKey.count == 32
        else {
            throw VaultError(.envelopeKeyCorrupt, "the envelope's data key does not open with key \(envelope.kid)", field: "key")
        }
        func field(_ slot: CardEnvelope.Field) throws(VaultError) -> SecureBytes? {
            guard let text = envelope.fields[slot] else { return nil }
            let ad = CardEnvelope.associatedData(kid: envelope.kid, id: envelope.id, field: slot)
            guard let sealed = Base64Decoding.bytes(text),
                  let plain = sealed.withUnsafeBytes({ s in ad.withUnsafeBytes { FieldCipher.open(s, key: dataKey, ad: $0) } })
            else {
                throw VaultError(
                    .envelopeFieldCorrupt,
                    "field \(slot.rawValue) fails authentication: altered, or moved from another slot or envelope",
                    field: "fields.\(slot.rawValue)")
            }
            return plain
        }
        guard let pan = try field(.pan), let exp = try field(.exp) else {
            throw VaultError(.envelopeMalformed, "an envelope needs pan and exp")
        }
        let cvc = try field(.cvc)
        let name = try field(.name)

        guard pan.count >= 1, pan.count <= 19, pan.withUnsafeBytes({ $0.allSatisfy { $0 >= 48 && $0 <= 57 } }) else {
            throw VaultError(.envelopeFieldInvalid, "the opened pan is not 1 to 19 ASCII digits", field: "fields.pan")
        }
        if let cvc, cvc.count > 4 || cvc.count < 3 || !cvc.withUnsafeBytes({ $0.allSatisfy { $0 >= 48 && $0 <= 57 } }) {
            throw VaultError(.envelopeFieldInvalid, "the opened cvc is not 3 or 4 ASCII digits", field: "fields.cvc")
        }
        if let name {
            let ok = name.withUnsafeBytes { n in
                n.count <= CardData.maxNameBytes && !n.contains { $0 < 0x20 || $0 == 0x7f } && JSONReader.isValidUTF8(n)
            }
            guard ok else {
                throw VaultError(.envelopeFieldInvalid, "the opened name is over \(CardData.maxNameBytes) bytes, has control characters or is not UTF-8", field: "fields.name")
            }
        }
        let expOK = exp.withUnsafeBytes { e in
            e.count == 7 && e[2] == UInt8(ascii: "/") && e.enumerated().allSatisfy { $0.offset == 2 || ($0.element >= 48 && $0.element <= 57) }
        }
        guard expOK else { throw VaultError(.envelopeFieldInvalid, "the opened exp is not MM/YYYY", field: "fields.exp") }
        let expText = exp.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        guard expText.utf8.count == 7, let expiry = try? CardExpiry.parse(expText) else {
            throw VaultError(.envelopeFieldInvalid, "the opened exp is not MM/YYYY", field: "fields.exp")
        }
        let card: CardData
        do {
            card = try CardData(number: pan, expiry: expiry, cvc: cvc, name: name)
        } catch {
            throw VaultError(.envelopeFieldInvalid, "the opened pan is not a card number", field: "fields.pan")
        }
        let info = card.number.withUnsafeBytes { validator.validate(digits: $0) }
        // An envelope carries a fingerprint only if an earlier version sealed it with the key; the
        // key is needed to check it, and without it the field is not trusted for anything.
        var derived = CardMetadata(info: info, expiry: expiry, fingerprint: envelope.card.fingerprint)
        // An envelope sealed by an earlier version carries the longer BIN (8 digits from 16, else
        // 6): its visible prefix is checked, never the digits past it (docs/envelope-v1.md). An
        // answer that depended on them would tell whoever seals an envelope whether its guess of
        // hidden digits is right, uncounted by the guessing limit.
        let legacy = CardNumberInfo.legacyBINLength(forLength: info.length)
        if envelope.card.bin.utf8.count == legacy, legacy > derived.bin.utf8.count, envelope.card.bin.hasPrefix(derived.bin),
           envelope.card.bin.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) {
            derived.bin = envelope.card.bin
        }
        if checkFingerprint, let carried = envelope.card.fingerprint, let keys = fingerprintKeys {
            // Named: the key it names must be held and give the same; bare (legacy): any key held.
            let parsed = FingerprintName.parse(carried)
            let candidates = parsed?.kid.map { kid in keys.key(kid: kid).map { [$0] } ?? [] } ?? keys.all
            let matches = card.number.withUnsafeBytes { digits in
                candidates.contains { parsed?.hex == $0.fingerprint(ofDigits: digits) }
            }
            if !matches { derived.fingerprint = nil }
        }
        if let cvc, let code = cvc.withUnsafeBytes({ validator.validateCVC($0, brand: info.brand) }) {
            throw VaultError(.envelopeFieldInvalid, "the opened cvc is not valid for the card's brand (\(code))", field: "fields.cvc")
        }
        guard info.valid, derived == envelope.card else {
            throw VaultError(
                .envelopeMetadataMismatch,
                "the envelope's card metadata does not match the opened card (\(mismatch(derived, envelope.card)))",
                field: "card")
        }
        return OpenedCard(card: card, metadata: envelope.card, envelopeID: envelope.id, kid: envelope.kid)
    }

    /// Opens and checks `envelope` as `open` does and answers only its fingerprint under the
    /// primary fingerprint key, named: `fp1_<fkid>_<64 hex>`. The opened card is wiped on return.
    /// - Throws: `FINGERPRINT_KEY_MISSING` when this opener has no fingerprint key; the codes of `open`.
    public func fingerprint(of envelope: CardEnvelope) throws(VaultError) -> String {
        try fingerprints(of: envelope)[0]
    }

    /// As `fingerprint(of:)`, with the card's fingerprint under every fingerprint key held: the
    /// primary's first, then the others' (during a rotation), all named.
    public func fingerprints(of envelope: CardEnvelope) throws(VaultError) -> [String] {
        guard let fingerprintKeys else {
            throw VaultError(.fingerprintKeyMissing, "the gateway has no fingerprint key (fingerprint.fk in its keys directory)")
        }
        // A fingerprint the envelope carries is not checked here: refusing one that is not the
        // card's would answer whether a guess is the card (the guessing limit never sees a refusal).
        let opened = try open(envelope, checkFingerprint: false)
        return opened.card.number.withUnsafeBytes { fingerprintKeys.namedFingerprints(ofDigits: $0) }
    }

    /// A card as the gateway's guessing limit sees it (DESIGN §9): its fingerprints (as
    /// `fingerprints(of:)`), its truncation group (visible prefix, last 4 and length) and itself,
    /// both named by keyed hashes under the primary fingerprint key.
    public struct GuessingCard: Sendable {
        public let fingerprints: [String]
        public let group: String
        public let member: String
    }

    /// `fingerprints(of:)`, with the card's truncation group and its name in it.
    /// - Throws: as `fingerprints(of:)`.
    public func guessingCard(of envelope: CardEnvelope) throws(VaultError) -> GuessingCard {
        guard let fingerprintKeys else {
            throw VaultError(.fingerprintKeyMissing, "the gateway has no fingerprint key (fingerprint.fk in its keys directory)")
        }
        let opened = try open(envelope, checkFingerprint: false)
        let all = opened.card.number.withUnsafeBytes { fingerprintKeys.namedFingerprints(ofDigits: $0) }
        let m = opened.metadata
        let key = fingerprintKeys.primary
        let group = key.keyedName("vault:guess-group:v1:\(CardNumberInfo.visiblePrefix(m.bin, length: m.length)):\(m.last4):\(m.length)")
        return GuessingCard(fingerprints: all, group: group, member: key.keyedName("vault:guess-member:v1:\(all[0])"))
    }

    /// Names the metadata keys that differ (never their values, which could be PAN digits).
    private func mismatch(_ a: CardMetadata, _ b: CardMetadata) -> String {
        var names: [String] = []
        if a.brand != b.brand { names.append("brand") }
        if a.bin != b.bin { names.append("bin") }
        if a.last4 != b.last4 { names.append("last4") }
        if a.length != b.length { names.append("length") }
        if a.expMonth != b.expMonth { names.append("exp_month") }
        if a.expYear != b.expYear { names.append("exp_year") }
        if a.fingerprint != b.fingerprint { names.append("fingerprint") }
        return names.isEmpty ? "card number not valid" : names.joined(separator: ", ")
    }
}
