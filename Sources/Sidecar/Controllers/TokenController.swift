import CardRules
import Hummingbird
import SocketHTTP
import Tokenizer
import VaultCrypto

/// Tokens (`POST /v1/tokens`, `GET` and `DELETE /v1/tokens/{token}`) and `POST /v1/validate`.
struct TokenController: Sendable {
    let tokenizer: Tokenizer
    let validator: CardValidator
    let metrics: SidecarMetrics
    var velocity: VelocityLimiter?
    /// Lookups of tokens that do not exist, per caller (`sidecar.token_lookup_misses`).
    var lookups: VelocityLimiter?

    static let endpoints: [SidecarEndpoint<Self>] = [
        .init(SidecarRoute(.post, "/v1/tokens", action: "tokenize", access: [.tokenize, .pay, .admin])) { c, request, _ in try await c.create(request) },
        .init(SidecarRoute(.get, "/v1/tokens/{token}", action: "read", access: [.tokenize, .pay, .admin])) { c, _, context in
            JSONOut.response(.ok, Self.json(try await c.lookUp(context.parameters.get("token") ?? "")))
        },
        .init(SidecarRoute(.delete, "/v1/tokens/{token}", action: "delete", access: [.admin])) { c, _, context in
            try await c.tokenizer.delete(context.parameters.get("token") ?? "")
            return Response(status: .noContent)
        },
        .init(SidecarRoute(.post, "/v1/validate", access: [.tokenize, .admin])) { c, request, _ in try await c.validate(request) },
    ]

    func addRoutes<Context: RequestContext>(to group: RouterGroup<Context>) { group.add(Self.endpoints, controller: self) }

    /// `{"card":{…}}` or `{"envelope":{…}}` (and `metadata`, `token_format`, `single_use`,
    /// `dedupe`) → 201 with the token; 200 with an existing one for `dedupe` (docs/dedupe.md).
    func create(_ request: Request) async throws -> Response {
        let (input, metadata, format, singleUse, dedupe) = try await JSONBody.parse(request) {
            (r: inout JSONReader) throws(VaultError) -> (CardInput, Metadata, TokenFormat?, Bool?, Bool) in
            var found: CardInput?, metadata = Metadata(), format: TokenFormat?, singleUse: Bool?, dedupe = false
            try r.readObject { (r, key) throws(VaultError) in
                switch key {
                case "metadata": metadata = try RequestFields.metadata(&r)
                case "token_format": format = try Self.tokenFormat(&r)
                case "single_use": singleUse = try r.readBool()
                case "dedupe": dedupe = try r.readBool()
                default:
                    guard try CardInput.read(key, from: &r, into: &found, envelopeFieldPrefix: true) else {
                        throw VaultError(.requestFieldUnknown, "a token request has card or envelope, metadata, token_format, single_use and dedupe")
                    }
                }
            }
            // dedupe answers reusable tokens only, and only to a pay or admin caller: to a
            // tokenize-only caller (a checkout page) 200 or 201 would tell whether the vault
            // holds a card (docs/dedupe.md).
            if dedupe, Caller.current?.isTokenizeOnly != false {
                throw VaultError(.peerNotAllowed, "dedupe needs the pay or admin role", field: "dedupe")
            }
            if dedupe, singleUse == true {
                throw VaultError(.requestFieldInvalid, "dedupe answers a reusable token: leave out single_use or give false", field: "dedupe")
            }
            return (try CardInput.required(found), metadata, format, singleUse, dedupe)
        }
        let tokenizer = self.tokenizer, velocity = self.velocity
        // The fingerprint's limits once the gateway has answered it (before anything is stored).
        var fingerprinted: Fingerprinted?
        if let limiter = velocity {
            fingerprinted = { (fp: String) async throws(VaultError) -> Void in
                _ = try await limiter.admit(.tokenize, VelocityLimiter.Keys(fingerprint: fp, peer: nil))
            }
        }
        let made: Tokenized
        do throws(VaultError) {
            made = try await VelocityLimiter.guarded(velocity, .tokenize, .init(bin: input.bin)) { () throws(VaultError) in
                try await input.tokenize(
                    with: tokenizer, metadata: metadata, format: format, singleUse: singleUse, dedupe: dedupe, fingerprinted: fingerprinted)
            }
        } catch {
            throw await Self.ownToken(error, input, tokenizer, lookups: lookups)
        }
        let record = made.record
        if let note = AuditNote.current {
            note.token = record.token
            note.kid = record.envelope.kid.rawValue
            note.envelope = record.envelope.id
        }
        // An existing token answered for `dedupe` is 200, a new one 201 (docs/dedupe.md).
        if made.reused {
            if case .card = input { metrics.tokenReused(source: "card") } else { metrics.tokenReused(source: "envelope") }
            return JSONOut.response(.ok, Self.json(record))
        }
        switch input {
        case .card: metrics.tokenCreated(source: "card")
        case .envelope: metrics.tokenCreated(source: "envelope")
        }
        return JSONOut.response(.created, Self.json(record))
    }

    /// `GET /v1/tokens/{token}`: a card-shaped name is counted per caller when it names no token
    /// (DESIGN §9: a card-shaped token's visible digits are its card's, so its middle is a small
    /// space to guess); past `sidecar.token_lookup_misses`, 429 `VELOCITY_LIMIT` with `Retry-After`
    /// before the store is asked. A `tok_` name is not counted: 128 random bits are no space to
    /// guess, and lookups of consumed or expired `tok_` tokens are everyday traffic.
    func lookUp(_ token: String) async throws(VaultError) -> TokenRecord {
        guard let lookups, CardShapedToken.isWellFormed(token) else { return try await tokenizer.record(token) }
        let ticket = try await lookups.admit(.lookup, .init())
        do throws(VaultError) { return try await tokenizer.record(token) } catch {
            if error.code == .tokenNotFound { await lookups.declined(ticket) }
            throw error
        }
    }

    /// A card number refused for its Luhn check alone that is one of this vault's card-shaped
    /// tokens: `CARD_NUMBER_IS_TOKEN` (the caller sent a token where a card belongs) instead of the
    /// rule's code. Only such a number is looked up (a known brand, a length it issues: every
    /// token passes no brand's rules, and a card of a Luhn brand never fails the check), never a
    /// card of a brand the table lacks; and the lookup is one of the caller's token lookups, its
    /// miss counted by `sidecar.token_lookup_misses` (else it would tell, uncounted, whether a token exists).
    static func ownToken(_ error: VaultError, _ input: CardInput, _ tokenizer: Tokenizer, lookups: VelocityLimiter?) async -> VaultError {
        guard case .card(let card) = input, error.code == .luhnCheckFailed else { return error }
        var ticket = VelocityLimiter.Ticket.none
        if let lookups {
            do throws(VaultError) { ticket = try await lookups.admit(.lookup, .init()) } catch { return error }
        }
        guard await tokenizer.isOwnToken(card.number) else {
            await lookups?.declined(ticket)
            return error
        }
        return VaultError(.cardNumberIsToken, "card.number is one of this vault's card-shaped tokens: name it as token, not as a card", field: "card.number")
    }

    /// `token_format`: `"tok"` or `"card"` (docs/card-tokens.md).
    static func tokenFormat(_ r: inout JSONReader) throws(VaultError) -> TokenFormat {
        guard let f = TokenFormat(rawValue: try r.readString(maxBytes: 16)) else {
            throw VaultError(.requestFieldInvalid, "token_format is \"tok\" (tok_ + 128 random bits) or \"card\" (card-shaped)", field: "token_format")
        }
        return f
    }

    /// `{"number":"…","partial":false}` → 200 with what the number is (never an error for a bad number).
    func validate(_ request: Request) async throws -> Response {
        let parsed = try await JSONBody.parse(request) { (r: inout JSONReader) throws(VaultError) -> (SecureBytes, Bool) in
            var number: SecureBytes?
            var partial = false
            try r.readObject { (r, key) throws(VaultError) in
                switch key {
                case "number": number = try r.readSecureString(maxBytes: 64)
                case "partial": partial = try r.readBool()
                default: throw VaultError(.requestFieldUnknown, "validate has only number and partial")
                }
            }
            guard let number else { throw VaultError(.cardFieldMissing, "number is missing", field: "number") }
            return (number, partial)
        }
        let (number, partial) = parsed
        // Validation as the number is typed (`partial`) is not counted; a whole number is (docs/velocity.md).
        let ticket = partial ? nil : try await velocity?.admit(.validate, .init(bin: number.withUnsafeBytes { VelocityLimiter.bin(of: $0) }))
        let info = validate(number, partial: partial)
        if let ticket, !partial, !info.valid { await velocity?.declined(ticket) }
        return JSONOut.response(.ok, info.json)
    }

    func validate(_ number: SecureBytes, partial: Bool) -> CardNumberInfo {
        number.withUnsafeBytes { raw in
            do {
                let digits = try SecureBytes(capacity: max(raw.count, 19)) { (out) throws(CardRulesError) -> Int in
                    try PANNormalizer.normalize(raw, into: out)
                }
                return digits.withUnsafeBytes { validator.validate(digits: $0, partial: partial) }
            } catch {
                var failed = CardNumberInfo.empty
                failed.errors = [(error as? CardRulesError)?.code ?? .nonDigit]
                return failed
            }
        }
    }

    static func json(_ r: TokenRecord) -> String { AnswerJSON.encode(Answer.Token(r)) }
}

/// A card to tokenize: in clear (sealed at the door) or already sealed by the caller.
enum CardInput {
    case card(CardData)
    case envelope(CardEnvelope)

    /// The card's first 6 digits (velocity limits by BIN), when it has 6 digits there.
    var bin: String? {
        switch self {
        case .card(let c): c.number.withUnsafeBytes { VelocityLimiter.bin(of: $0) }
        case .envelope(let e): e.card.bin.count >= CardNumberInfo.binLength(forLength: e.card.length) ? CardNumberInfo.visiblePrefix(e.card.bin, length: e.card.length) : nil
        }
    }

    /// Reads `card` or `envelope` into `found` (refusing a second one); false for another key.
    /// With `envelopeFieldPrefix`, an envelope's refusal names its field as `envelope.…`.
    static func read(_ key: String, from r: inout JSONReader, into found: inout CardInput?, envelopeFieldPrefix: Bool) throws(VaultError) -> Bool {
        guard key == "card" || key == "envelope" else { return false }
        guard found == nil else { throw VaultError(.requestAmbiguous, "give either card or envelope, not both", field: key) }
        if key == "card" {
            found = .card(try CardData.parse(from: &r, fieldPrefix: "card."))
            return true
        }
        do throws(VaultError) { found = .envelope(try CardEnvelope.parse(from: &r)) } catch {
            guard envelopeFieldPrefix else { throw error }
            throw VaultError(error.code, error.message, field: error.field.map { "envelope." + $0 } ?? "envelope")
        }
        return true
    }

    static func required(_ found: CardInput?) throws(VaultError) -> CardInput {
        guard let found else { throw VaultError(.requestFieldMissing, "give card or envelope", field: "card") }
        return found
    }

    /// The token for this card, of `format` (nil: the sidecar's `token_format`).
    func tokenize(with tokenizer: Tokenizer, metadata: Metadata = Metadata(), format: TokenFormat? = nil) async throws(VaultError) -> TokenRecord {
        try await tokenize(with: tokenizer, metadata: metadata, format: format, singleUse: nil, dedupe: false, fingerprinted: nil).record
    }

    /// The token for this card, reusable when `singleUse` is false (nil: the sidecar's policy);
    /// with `dedupe`, an existing reusable token of the card when there is one.
    /// `fingerprinted`: told the gateway's fingerprint before anything is stored (velocity limits).
    func tokenize(
        with tokenizer: Tokenizer, metadata: Metadata, format: TokenFormat?, singleUse: Bool?, dedupe: Bool, fingerprinted: Fingerprinted?
    ) async throws(VaultError) -> Tokenized {
        switch self {
        case .card(let card):
            try await tokenizer.tokenize(card, metadata: metadata, format: format, singleUse: singleUse, dedupe: dedupe, fingerprinted: fingerprinted)
        case .envelope(let envelope):
            try await tokenizer.tokenize(
                envelope: envelope, metadata: metadata, format: format, singleUse: singleUse, dedupe: dedupe, fingerprinted: fingerprinted)
        }
    }
}

/// A token named in a request (`token` of a payment or an attach, `starting_after` of the token
/// list, `object` of the event list): `tok_…`, or a card-shaped token (docs/card-tokens.md).
enum TokenID {
    /// A card-shaped token the card-number rule of free text lets through: one that fails the Luhn
    /// check always (the rule looks for Luhn-valid runs); one that passes it only on a sidecar that makes them
    /// (`card_token_luhn_valid`), as it looks like a card number. Such a value is resolved before
    /// anything is stored, and one that names no token is `TOKEN_NOT_FOUND`.
    static func isCardShaped(_ v: String, luhnValid: Bool) -> Bool {
        CardShapedToken.isAccepted(v, luhnValid: luhnValid)
    }

    /// The `token` field of a body: a card-shaped token (`isCardShaped`), else free text (never a
    /// card number: `REQUEST_FIELD_CARD_NUMBER`) that `prefixed` requires to be `tok_` and
    /// lower-case letters or digits.
    static func read(_ r: inout JSONReader, luhnValid: Bool, prefixed: Bool) throws(VaultError) -> String {
        let v = try r.readString(maxBytes: 64)
        if isCardShaped(v, luhnValid: luhnValid) { return v }
        let checked = try RequestFields.freeText(v, field: "token")
        guard !prefixed || (v.hasPrefix("tok_") && v.utf8.allSatisfy({ (48...57).contains($0) || (97...122).contains($0) || $0 == 95 })) else {
            throw VaultError(.requestFieldInvalid, "token is tok_ and lower-case letters or digits, or a card-shaped token", field: "token")
        }
        return checked
    }
}
