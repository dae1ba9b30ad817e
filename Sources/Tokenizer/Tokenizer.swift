import CardRules
import Foundation
import Store
import VaultCrypto

/// Turns cards into tokens: seals raw cards at the door (public key only), accepts envelopes the
/// caller sealed, stores ciphertext and metadata, hands back random tokens.
///
/// Tokens are `tok_` + 128 random bits, or card-shaped when asked (`CardShapedToken`): never
/// derived from the PAN. Fingerprints come from the
/// gateway (`Fingerprinter`): the sidecar never holds the fingerprint key (docs/key-files.md). CVCs
/// are held in memory (`HeldCVCs`), never written to the store (docs/threat-model.md).
public struct Tokenizer: Sendable {
    /// The store.
    public let store: any TokenStore
    /// The sealing keys (swapped whole when the key ring is reloaded).
    public let keys: SealingKeys
    /// The key new cards are sealed to now.
    public var primaryKey: PublicKey { keys.snapshot.primary }
    /// Who computes fingerprints (the gateway); nil: tokens are stored without one.
    public let fingerprinter: (any Fingerprinter)?
    /// The CVCs held until their first authorization attempt or TTL.
    public let cvcs: HeldCVCs
    /// Card rules.
    public let validator: CardValidator
    /// Lifetimes.
    public let policy: TokenPolicy
    /// The clock (tests move it).
    public let now: @Sendable () -> Date
    /// Where the middles of card-shaped tokens come from (the CSPRNG; tests script collisions).
    public var cardTokenDigits = CardShapedToken.DigitSource.system
    /// Tokens whose fingerprint the gateway withheld, and when the filler asks again.
    public let withheld = WithheldTokens()

    /// A tokenizer.
    public init(
        store: any TokenStore, primaryKey: PublicKey, otherKeys: [PublicKey] = [], fingerprinter: (any Fingerprinter)? = nil,
        validator: CardValidator = CardValidator(), policy: TokenPolicy = TokenPolicy(), cvcs: HeldCVCs = HeldCVCs(),
        now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.init(
            store: store, keys: SealingKeys(.init(primary: primaryKey, others: otherKeys)), fingerprinter: fingerprinter,
            validator: validator, policy: policy, cvcs: cvcs, now: now)
    }

    /// A tokenizer over reloadable keys.
    public init(
        store: any TokenStore, keys: SealingKeys, fingerprinter: (any Fingerprinter)? = nil,
        validator: CardValidator = CardValidator(), policy: TokenPolicy = TokenPolicy(), cvcs: HeldCVCs = HeldCVCs(),
        now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.store = store
        self.keys = keys
        self.fingerprinter = fingerprinter
        self.cvcs = cvcs
        self.validator = validator
        self.policy = policy
        self.now = now
    }

    /// Validates and seals a raw card, then stores it, under a token of `format` (nil: the
    /// policy's).
    /// - Throws: the card-rule and card-input codes of `CardEnvelope.seal`; `TOKEN_EXISTS`,
    ///   `STORE_UNAVAILABLE` from the store; for a card-shaped token `CARD_TOKEN_SPACE_TOO_SMALL`,
    ///   `TOKEN_SPACE_EXHAUSTED`.
    public func tokenize(_ card: CardData, metadata: Metadata = Metadata(), format: TokenFormat? = nil) async throws(VaultError) -> TokenRecord {
        try await tokenize(card, metadata: metadata, format: format, dedupe: false).record
    }

    /// `tokenize(_:metadata:format:)`, of a reusable token when `singleUse` is false (nil: the
    /// policy's). With `dedupe` (a reusable token), an existing reusable token of the same card
    /// (same fingerprint, same expiry, same format) is answered instead of a new one (docs/dedupe.md).
    /// `fingerprinted`: called with the gateway's fingerprint once it is known and before anything
    /// is stored (the velocity limits by fingerprint: a throw refuses the tokenize).
    public func tokenize(
        _ card: CardData, metadata: Metadata = Metadata(), format: TokenFormat? = nil, singleUse: Bool? = nil, dedupe: Bool,
        fingerprinted: Fingerprinted? = nil
    ) async throws(VaultError) -> Tokenized {
        let t = now()
        let month = CalendarMonth(date: t)
        let envelope = try CardEnvelope.seal(card, to: keys.snapshot.primary, validator: validator, now: month)
        let shape = try cardShape(format, envelope.card)
        return try await store(
            envelope, at: t, sealedHere: true, metadata: metadata, shape: shape, singleUse: singleUse, dedupe: dedupe, fingerprinted: fingerprinted)
    }

    /// Stores an envelope sealed elsewhere (by a caller with the public key).
    ///
    /// The sidecar cannot open it, so it checks what it can: the kid is one it accepts, the JSON
    /// is strict v1, the metadata is plausible (known brand, BIN and last 4 are digits of the
    /// right lengths, the expiry has not passed). The gateway re-derives and checks the metadata
    /// when it opens the envelope.
    /// - Throws: `KEY_MISMATCH` for a kid the key ring does not list, `KEY_RETIRED` for a retired
    ///   one, `ENVELOPE_METADATA_INVALID`, card-rule codes, store codes; for a card-shaped token
    ///   (`format`, nil: the policy's) `CARD_TOKEN_SPACE_TOO_SMALL`, `TOKEN_SPACE_EXHAUSTED`,
    ///   and `CARD_TOKEN_NEEDS_CARD` when they pass the Luhn check (the sidecar cannot check that
    ///   the token is not the envelope's own card number).
    public func tokenize(envelope: CardEnvelope, metadata: Metadata = Metadata(), format: TokenFormat? = nil) async throws(VaultError) -> TokenRecord {
        try await tokenize(envelope: envelope, metadata: metadata, format: format, dedupe: false).record
    }

    /// `tokenize(envelope:metadata:format:)`, with `singleUse`, `dedupe` and `fingerprinted` as for a raw card.
    public func tokenize(
        envelope: CardEnvelope, metadata: Metadata = Metadata(), format: TokenFormat? = nil, singleUse: Bool? = nil, dedupe: Bool,
        fingerprinted: Fingerprinted? = nil
    ) async throws(VaultError) -> Tokenized {
        switch keys.snapshot.statuses[envelope.kid] {
        case nil:
            throw VaultError(.keyMismatch, "the envelope is sealed to key \(envelope.kid), which this vault's key ring does not list", field: "envelope.kid")
        case .retired?:
            throw VaultError(.keyRetired, "the envelope is sealed to key \(envelope.kid), which is retired: seal to the primary", field: "envelope.kid")
        default:
            break
        }
        let c = envelope.card
        guard let spec = validator.table.spec(for: c.brand) else {
            throw VaultError(.envelopeMetadataInvalid, "card.brand is not a known brand", field: "envelope.card.brand")
        }
        if let accepted = validator.acceptedBrands, !accepted.contains(c.brand) {
            throw VaultError(.brandNotAccepted, "this card brand is not accepted", field: "envelope.card.brand")
        }
        let digits: (String) -> Bool = { $0.utf8.allSatisfy { $0 >= 48 && $0 <= 57 } }
        // The visible prefix (DESIGN §1), or the longer BIN an earlier version sealed, which is
        // cut to the prefix before anything is stored (the card metadata is not authenticated
        // data of the fields: cutting it leaves the envelope openable, and the gateway checks it).
        let binLengths = [CardNumberInfo.binLength(forLength: c.length), CardNumberInfo.legacyBINLength(forLength: c.length)]
        guard spec.lengths.contains(c.length), binLengths.contains(c.bin.utf8.count), digits(c.bin),
              c.last4.count == 4, digits(c.last4)
        else {
            throw VaultError(.envelopeMetadataInvalid, "card metadata is not consistent (length, bin or last4)", field: "envelope.card")
        }
        var envelope = envelope
        envelope.card.bin = CardNumberInfo.visiblePrefix(c.bin, length: c.length)
        envelope.card.fingerprint = nil
        // Envelopes sealed today carry no fingerprint (docs/envelope-v1.md); an older one may, in
        // the documented form only. It is dropped: the token's fingerprint is the gateway's answer,
        // and a carried one checked against the card would answer whether a guess is the card.
        if let fp = c.fingerprint, !FingerprintAnswer.isWellFormed(fp) {
            throw VaultError(.envelopeMetadataInvalid, "card.fingerprint is fp1_<fkid>_<64 hex>, 64 lowercase hex characters, or absent", field: "envelope.card.fingerprint")
        }
        // A CVC is 3 or 4 digits: its field is 60 characters of base64. The sidecar holds it in
        // fixed-size records (HeldCVCs), so a longer one is refused, never held.
        if let cvc = envelope.fields[.cvc], cvc.utf8.count > HeldCVCs.fieldBytes {
            throw VaultError(.envelopeMalformed, "fields.cvc is longer than a sealed CVC of 4 digits", field: "envelope.fields.cvc")
        }
        let t = now()
        let expiry: CardExpiry
        do throws(CardRulesError) {
            expiry = try CardExpiry(month: c.expMonth, year: c.expYear)
        } catch {
            throw VaultError(cardRules: error, field: "envelope.card.exp_month")
        }
        if let code = expiry.validate(now: CalendarMonth(date: t)) {
            throw VaultError(ErrorCode(cardRules: code), "the card's expiry is not usable", field: "envelope.card.exp_year")
        }
        let shape = try cardShape(format, envelope.card)
        return try await store(
            envelope, at: t, sealedHere: false, metadata: metadata, shape: shape, singleUse: singleUse, dedupe: dedupe, fingerprinted: fingerprinted)
    }

    /// Whether `text` can name a token: `tok_…`, or a card-shaped token that passes no brand's
    /// card rules (one that passes them only with `card_token_luhn_valid`, for tokens made by
    /// earlier versions). Anything else, a card number among them, is `TOKEN_NOT_FOUND` before it
    /// reaches the store.
    public func isTokenName(_ text: String) -> Bool {
        RandomID.isWellFormed(text, prefix: "tok_")
            || CardShapedToken.isAccepted(text, luhnValid: policy.cardTokenLuhnValid, table: validator.table)
    }

    /// Whether `digits`, refused by the card rules as a card number, is one of this store's live
    /// card-shaped tokens (the caller sent a token where a card belongs: `CARD_NUMBER_IS_TOKEN`).
    /// Only a number the card rules refuse is looked up: no card number reaches the store.
    public func isOwnToken(_ number: SecureBytes) async -> Bool {
        let name: String? = number.withUnsafeBytes { digits in
            let ok = (CardShapedToken.minimumLength...CardShapedToken.maximumLength).contains(digits.count)
                && digits.allSatisfy { $0 >= 48 && $0 <= 57 } && !validator.table.passesAnyBrand(digits)
            return ok ? String(decoding: digits, as: UTF8.self) : nil
        }
        guard let name else { return false }
        do throws(StoreError) { return try await store.get(name, now: now()) != nil } catch { return false }
    }

    /// The record of a live token.
    /// - Throws: `TOKEN_NOT_FOUND`, store codes.
    public func record(_ token: String) async throws(VaultError) -> TokenRecord {
        guard isTokenName(token) else { throw VaultError(.tokenNotFound, "no such token", field: "token") }
        let t = now()
        let found: TokenRecord?
        do throws(StoreError) { found = try await store.get(token, now: t) } catch { throw VaultError(store: error) }
        guard var found else { throw VaultError(.tokenNotFound, "no such token (or it expired)", field: "token") }
        if let held = cvcs.field(for: token, sealedKey: found.envelope.sealedKey, now: t) {
            found.cvcField = held.field
            found.cvcExpiresAt = held.expiresAt
        }
        return found
    }

    /// A page of live tokens, newest first (README "Listing and search"), each as `record` shows
    /// it; of the card with the gateway's `fingerprint` when given.
    /// - Throws: store codes.
    public func list(_ q: ListQuery, fingerprint: String?, metadata: [(key: String, value: String)] = []) async throws(VaultError) -> ListPage<TokenRecord> {
        let t = now()
        let page: ListPage<TokenRecord>
        do throws(StoreError) { page = try await store.list(q, fingerprint: fingerprint, metadata: metadata, now: t) } catch { throw VaultError(store: error) }
        guard case .page(var items, let hasMore) = page else { return page }
        for i in items.indices {
            if let held = cvcs.field(for: items[i].token, sealedKey: items[i].envelope.sealedKey, now: t) {
                items[i].cvcField = held.field
                items[i].cvcExpiresAt = held.expiresAt
            }
        }
        return .page(items, hasMore: hasMore)
    }

    /// Takes the CVC of a token for its first authorization: the sealed field, forgotten here at
    /// once (nil when none is held, it expired, or the envelope was sealed again meanwhile).
    public func takeCVC(of record: TokenRecord) -> String? {
        cvcs.take(record.token, sealedKey: record.envelope.sealedKey, now: now())
    }

    /// Drops the CVC of a token (before its first authorization leaves). False when none was held.
    @discardableResult
    public func dropCVC(_ token: String) -> Bool { cvcs.drop(token) }

    /// Deletes expired tokens from the store and drops CVCs past their TTL.
    public func purgeExpired() async throws(StoreError) -> PurgeResult {
        let t = now()
        let dropped = cvcs.purge(now: t)
        var result = try await store.purgeExpired(now: t)
        result.cvcsDropped += dropped
        return result
    }

    /// One pass over live tokens stored without a fingerprint (the gateway was down when they were
    /// made): asks the gateway in batches and stores the answers. Stops at the first batch the
    /// gateway cannot answer (the next pass tries again).
    /// - Returns: fingerprints stored, envelopes the gateway refused, and whether the pass ended
    ///   because the gateway could not answer.
    public func fillFingerprints(batch: Int = 64) async throws(VaultError) -> (filled: Int, refused: Int, unavailable: Bool) {
        guard let fingerprinter else { return (0, 0, true) }
        var after = "", filled = 0, refused = 0
        while true {
            let page: [TokenRecord]
            do throws(StoreError) { page = try await store.withoutFingerprint(after: after, limit: batch, now: now()) } catch {
                throw VaultError(store: error)
            }
            guard let last = page.last else {
                withheld.purge(dueBefore: now().addingTimeInterval(-2 * WithheldTokens.maxWait))
                return (filled, refused, false)
            }
            after = last.token
            // A token withheld a moment ago waits its turn (the group's window has to slide first).
            let t = now()
            let rows = page.filter { withheld.isDue($0.token, now: t) }
            guard !rows.isEmpty else { continue }
            let answers: [FingerprintAnswer]
            do throws(FingerprintFailure) { answers = try await fingerprinter.fingerprints(of: rows.map(\.envelope)) } catch {
                return (filled, refused, true)
            }
            var found: [(token: String, fingerprint: String)] = [], links: [[String]] = []
            for (row, answer) in zip(rows, answers) {
                switch answer {
                case .fingerprint(let fp, let others):
                    found.append((row.token, fp))
                    if !others.isEmpty { links.append([fp] + others) }
                    withheld.forget(row.token)
                case .refused: refused += 1
                case .withheld: withheld.withheld(row.token, now: t)  // still past the group's limit: asked again later
                }
            }
            do throws(StoreError) {
                for group in links { try await store.linkFingerprints(group) }
                filled += try await store.setFingerprints(found)
            } catch { throw VaultError(store: error) }
        }
    }

    /// Deletes a token and its envelope.
    /// - Throws: `TOKEN_NOT_FOUND`, store codes.
    public func delete(_ token: String) async throws(VaultError) {
        guard isTokenName(token) else { throw VaultError(.tokenNotFound, "no such token", field: "token") }
        let deleted: Bool
        do throws(StoreError) { deleted = try await store.delete(token) } catch { throw VaultError(store: error) }
        guard deleted else { throw VaultError(.tokenNotFound, "no such token", field: "token") }
    }

    /// `sealedHere`: the sidecar sealed it from a raw card. A refusal by the gateway is then not
    /// the caller's doing (a gateway that does not open the primary yet): the token is stored and
    /// its fingerprint filled in later; a caller's envelope that the gateway refuses is refused.
    /// `shape`: a card-shaped token (`cardShape`), nil for `tok_`.
    /// `singleUse`: nil for the policy's. `dedupe`: a reusable token, an existing one of the card
    /// when there is one (`reuse`).
    private func store(
        _ envelope: CardEnvelope, at t: Date, sealedHere: Bool, metadata: Metadata, shape: CardShape?, singleUse: Bool?, dedupe: Bool,
        fingerprinted: Fingerprinted?
    ) async throws(VaultError) -> Tokenized {
        if dedupe, fingerprinter == nil {
            throw VaultError(.requestFieldInvalid, "dedupe matches cards by the gateway's fingerprint, and this sidecar has no gateway", field: "dedupe")
        }
        let cvc = envelope.fields[.cvc]
        let stored = envelope.droppingCVC()
        let (fingerprint, others, wasWithheld) = try await fingerprint(of: stored, refusalIsFinal: !sealedHere)
        if let fingerprint, let fingerprinted { try await fingerprinted(fingerprint) }
        if dedupe, let fingerprint, let found = try await reuse([fingerprint] + others, stored, cvc: cvc, cardShaped: shape != nil, at: t) {
            return Tokenized(record: found, reused: true)
        }
        var record = TokenRecord(
            token: try shape?.draw() ?? RandomID.make(prefix: "tok_"), envelope: stored, cvcField: cvc, createdAt: t,
            expiresAt: t.addingTimeInterval(policy.tokenTTL), cvcExpiresAt: cvc == nil ? nil : t.addingTimeInterval(policy.cvcTTL),
            singleUse: dedupe ? false : singleUse ?? policy.singleUse, fingerprint: fingerprint, metadata: metadata.droppingEmptyValues)
        // The store gets the record without its CVC; the CVC is held in memory only. A card-shaped
        // token that is taken (`TOKEN_EXISTS`) is drawn again, `CardShapedToken.attempts` in all.
        var attempt = 1
        while true {
            do throws(StoreError) {
                try await store.insert(record)
                break
            } catch {
                guard let shape, error.code == .tokenExists else { throw VaultError(store: error) }
                guard attempt < CardShapedToken.attempts else {
                    throw VaultError(
                        .tokenSpaceExhausted,
                        "\(attempt) card-shaped tokens drawn for this card's first 6, last 4 and length were all taken; retry later or ask for a tok_ token",
                        field: "token_format")
                }
                attempt += 1
                record.token = try shape.draw()
            }
        }
        // During a fingerprint-key rotation: the card's fingerprints under the other keys are
        // linked to this one once the token is stored (a refused tokenize writes nothing), so
        // lookups by any of them find it.
        if let fingerprint, !others.isEmpty {
            do throws(StoreError) { try await store.linkFingerprints([fingerprint] + others) } catch { throw VaultError(store: error) }
        }
        if let cvc, let expires = record.cvcExpiresAt {
            cvcs.hold(cvc, token: record.token, sealedKey: stored.sealedKey, expiresAt: expires)
        }
        // The gateway withheld the fingerprint (its guessing limit): the token stands, and the
        // event says so (after the token's commit: a notice, not a change of the token).
        if wasWithheld {
            self.withheld.withheld(record.token, now: t)
            do throws(StoreError) { try await store.noteFingerprintWithheld(record.token) } catch {
                // The token is made and acknowledged; the gateway's metric and audit line still tell.
            }
        }
        return Tokenized(record: record, reused: false)
    }

    /// The newest reusable token of the card with `fingerprints` (the gateway's answer: under the
    /// primary fingerprint key, and the others during a rotation) whose expiry is the card's, whose
    /// format is the one asked (`cardShaped`), with at least half a token's TTL left to live and
    /// no CVC held for it (held, it is in another caller's first-payment window: answered, its
    /// CVC would go with this caller's payment), or nil. With a CVC, the token's envelope becomes
    /// `stored` (the same card and expiry, sealed now, whose data key the CVC's field is sealed
    /// under) and the CVC is held for it; nil when its envelope changed meanwhile (a new token is
    /// made then).
    private func reuse(_ fingerprints: [String], _ stored: CardEnvelope, cvc: String?, cardShaped: Bool, at t: Date) async throws(VaultError) -> TokenRecord? {
        let found: [TokenRecord]
        do throws(StoreError) {
            found = try await store.reusable(
                fingerprints: fingerprints, expiry: (stored.card.expMonth, stored.card.expYear), cardShaped: cardShaped,
                liveAfter: t.addingTimeInterval(policy.tokenTTL / 2), limit: 20)
        } catch { throw VaultError(store: error) }
        guard var token = found.first(where: { cvcs.field(for: $0.token, sealedKey: $0.envelope.sealedKey, now: t) == nil }) else { return nil }
        guard let cvc else { return token }
        let replaced: Bool
        do throws(StoreError) {
            replaced = try await store.replaceEnvelope(of: token.token, oldKey: token.envelope.sealedKey, with: stored, now: t)
        } catch { throw VaultError(store: error) }
        guard replaced else { return nil }
        token.envelope = stored
        token.cvcField = cvc
        token.cvcExpiresAt = t.addingTimeInterval(policy.cvcTTL)
        cvcs.hold(cvc, token: token.token, sealedKey: stored.sealedKey, expiresAt: t.addingTimeInterval(policy.cvcTTL))
        return token
    }

    /// What a card-shaped token is drawn from, checked before anything else is done; nil for `tok_`.
    private func cardShape(_ format: TokenFormat?, _ card: CardMetadata) throws(VaultError) -> CardShape? {
        guard (format ?? policy.format) == .card else { return nil }
        try CardShapedToken.check(card, table: validator.table)
        return CardShape(card: card, table: validator.table, source: cardTokenDigits)
    }

    /// The gateway's fingerprint of `envelope` (named, under its primary fingerprint key) and, during
    /// a fingerprint-key rotation, the card's fingerprints under the other keys; nil when it
    /// cannot answer now (filled in later).
    /// - Throws: the gateway's code when it refuses the envelope (tampered, metadata that does
    ///   not match the card, a kid it does not open): nothing is stored.
    private func fingerprint(of envelope: CardEnvelope, refusalIsFinal: Bool) async throws(VaultError) -> (String?, others: [String], withheld: Bool) {
        guard let fingerprinter else { return (nil, [], false) }
        let answers: [FingerprintAnswer]
        do throws(FingerprintFailure) { answers = try await fingerprinter.fingerprints(of: [envelope]) } catch { return (nil, [], false) }
        switch answers.first {
        case .fingerprint(let fp, let others)?: return (fp, others, false)
        case .refused(let code, let message)?:
            guard refusalIsFinal else { return (nil, [], false) }
            throw VaultError(code, message, field: "envelope")
        case .withheld?: return (nil, [], true)
        case nil: return (nil, [], false)
        }
    }

}

/// Told a card's fingerprint during a tokenize, before anything is stored; a throw refuses it.
public typealias Fingerprinted = @Sendable (String) async throws(VaultError) -> Void

/// What a tokenize answered: the token, and whether it is one that existed already (`dedupe`).
public struct Tokenized: Sendable, Equatable {
    public var record: TokenRecord
    /// An existing reusable token of the same card, answered instead of a new one.
    public var reused: Bool
}

/// A card-shaped token's draw: the card's shape and the brand rules it must pass none of.
struct CardShape {
    let card: CardMetadata, table: BrandTable, source: CardShapedToken.DigitSource

    /// A fresh token.
    func draw() throws(VaultError) -> String { try CardShapedToken.make(for: card, table: table, source: source) }
}

extension CalendarMonth {
    /// The UTC month of a date.
    public init(date: Date) {
        var t = time_t(date.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&t, &parts)
        self.init(year: Int(parts.tm_year) + 1900, month: Int(parts.tm_mon) + 1)
    }
}
