import CardRules
import Foundation
import VaultCrypto

/// Turns cards into tokens: seals raw cards at the door (public key only), accepts envelopes the
/// caller sealed, stores ciphertext and metadata, hands back random tokens.
///
/// Tokens are `tok_` + 128 random bits: never derived from the PAN. The fingerprint is keyed.
public struct Tokenizer: Sendable {
    /// The store.
    public let store: any TokenStore
    /// The sealing keys (swapped whole when the key ring is reloaded).
    public let keys: SealingKeys
    /// The key new cards are sealed to now.
    public var primaryKey: PublicKey { keys.snapshot.primary }
    /// The fingerprint key.
    public let fingerprintKey: FingerprintKey
    /// Card rules.
    public let validator: CardValidator
    /// Lifetimes.
    public let policy: TokenPolicy
    /// The clock (tests move it).
    public let now: @Sendable () -> Date

    /// A tokenizer.
    public init(
        store: any TokenStore, primaryKey: PublicKey, otherKeys: [PublicKey] = [], fingerprintKey: FingerprintKey,
        validator: CardValidator = CardValidator(), policy: TokenPolicy = TokenPolicy(), now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.init(
            store: store, keys: SealingKeys(.init(primary: primaryKey, others: otherKeys)), fingerprintKey: fingerprintKey,
            validator: validator, policy: policy, now: now)
    }

    /// A tokenizer over reloadable keys.
    public init(
        store: any TokenStore, keys: SealingKeys, fingerprintKey: FingerprintKey,
        validator: CardValidator = CardValidator(), policy: TokenPolicy = TokenPolicy(), now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.store = store
        self.keys = keys
        self.fingerprintKey = fingerprintKey
        self.validator = validator
        self.policy = policy
        self.now = now
    }

    /// Validates and seals a raw card, then stores it.
    /// - Throws: the card-rule and card-input codes of `CardEnvelope.seal`; `TOKEN_EXISTS`,
    ///   `STORE_UNAVAILABLE` from the store.
    public func tokenize(_ card: CardData) async throws(VaultError) -> TokenRecord {
        let t = now()
        let month = CalendarMonth(date: t)
        let envelope = try CardEnvelope.seal(card, to: keys.snapshot.primary, fingerprintKey: fingerprintKey, validator: validator, now: month)
        return try await store(envelope, at: t)
    }

    /// Stores an envelope sealed elsewhere (by a caller with the public key).
    ///
    /// The sidecar cannot open it, so it checks what it can: the kid is one it accepts, the JSON
    /// is strict v1, the metadata is plausible (known brand, BIN and last 4 are digits of the
    /// right lengths, the expiry has not passed). The gateway re-derives and checks the metadata
    /// when it opens the envelope.
    /// - Throws: `KEY_MISMATCH` for a kid the key ring does not list, `KEY_RETIRED` for a retired
    ///   one, `ENVELOPE_METADATA_INVALID`, card-rule codes, store codes.
    public func tokenize(envelope: CardEnvelope) async throws(VaultError) -> TokenRecord {
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
            throw VaultError(.init(rawValue: "BRAND_NOT_ACCEPTED"), "this card brand is not accepted", field: "envelope.card.brand")
        }
        let digits: (String) -> Bool = { $0.utf8.allSatisfy { $0 >= 48 && $0 <= 57 } }
        guard spec.lengths.contains(c.length), c.bin.count == CardNumberInfo.binLength(forLength: c.length), digits(c.bin),
              c.last4.count == 4, digits(c.last4), c.fingerprint.map({ $0.count == 64 }) ?? true
        else {
            throw VaultError(.envelopeMetadataInvalid, "card metadata is not consistent (length, bin, last4 or fingerprint)", field: "envelope.card")
        }
        let t = now()
        let expiry: CardExpiry
        do throws(CardRulesError) {
            expiry = try CardExpiry(month: c.expMonth, year: c.expYear)
        } catch {
            throw VaultError(cardRules: error, field: "envelope.card.exp_month")
        }
        if let code = expiry.validate(now: CalendarMonth(date: t)) {
            throw VaultError(.init(rawValue: code.rawValue), "the card's expiry is not usable", field: "envelope.card.exp_year")
        }
        return try await store(envelope, at: t)
    }

    /// The record of a live token.
    /// - Throws: `TOKEN_NOT_FOUND`, store codes.
    public func record(_ token: String) async throws(VaultError) -> TokenRecord {
        guard RandomID.isWellFormed(token, prefix: "tok_") else {
            throw VaultError(.tokenNotFound, "no such token", field: "token")
        }
        let found: TokenRecord?
        do throws(TokenStoreError) { found = try await store.get(token, now: now()) } catch { throw VaultError(store: error) }
        guard let found else { throw VaultError(.tokenNotFound, "no such token (or it expired)", field: "token") }
        return found
    }

    /// Deletes a token and its envelope.
    /// - Throws: `TOKEN_NOT_FOUND`, store codes.
    public func delete(_ token: String) async throws(VaultError) {
        let deleted: Bool
        do throws(TokenStoreError) { deleted = try await store.delete(token) } catch { throw VaultError(store: error) }
        guard deleted else { throw VaultError(.tokenNotFound, "no such token", field: "token") }
    }

    private func store(_ envelope: CardEnvelope, at t: Date) async throws(VaultError) -> TokenRecord {
        let cvc = envelope.fields[.cvc]
        let record = TokenRecord(
            token: RandomID.make(prefix: "tok_"), envelope: envelope.droppingCVC(), cvcField: cvc, createdAt: t,
            expiresAt: t.addingTimeInterval(policy.tokenTTL), cvcExpiresAt: cvc == nil ? nil : t.addingTimeInterval(policy.cvcTTL),
            singleUse: policy.singleUse)
        do throws(TokenStoreError) { try await store.insert(record) } catch { throw VaultError(store: error) }
        return record
    }
}

extension VaultError {
    /// A store error carried over with its code.
    public init(store error: TokenStoreError) {
        self.init(Code(rawValue: error.code.rawValue), error.message)
    }
}

extension VaultError.Code {
    /// No live token with that id.
    public static let tokenNotFound = VaultError.Code(rawValue: "TOKEN_NOT_FOUND")
    /// Envelope metadata that cannot be right (unknown brand, BIN or last 4 of the wrong form).
    public static let envelopeMetadataInvalid = VaultError.Code(rawValue: "ENVELOPE_METADATA_INVALID")
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
