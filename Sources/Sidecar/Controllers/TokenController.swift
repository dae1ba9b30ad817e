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

    static let endpoints: [SidecarEndpoint<Self>] = [
        .init(SidecarRoute(.post, "/v1/tokens", action: "tokenize", access: [.tokenize, .admin])) { c, request, _ in try await c.create(request) },
        .init(SidecarRoute(.get, "/v1/tokens/{token}", action: "read", access: [.tokenize, .pay, .admin])) { c, _, context in
            JSONOut.response(.ok, Self.json(try await c.tokenizer.record(context.parameters.get("token") ?? "")))
        },
        .init(SidecarRoute(.delete, "/v1/tokens/{token}", action: "delete", access: [.admin])) { c, _, context in
            try await c.tokenizer.delete(context.parameters.get("token") ?? "")
            return Response(status: .noContent)
        },
        .init(SidecarRoute(.post, "/v1/validate", access: [.tokenize, .admin])) { c, request, _ in try await c.validate(request) },
    ]

    func addRoutes<Context: RequestContext>(to group: RouterGroup<Context>) { group.add(Self.endpoints, controller: self) }

    /// `{"card":{…}}` or `{"envelope":{…}}` → 201 with the token.
    func create(_ request: Request) async throws -> Response {
        let (input, metadata) = try await JSONBody.parse(request) { (r: inout JSONReader) throws(VaultError) -> (CardInput, Metadata) in
            var found: CardInput?, metadata = Metadata()
            try r.readObject { (r, key) throws(VaultError) in
                if key == "metadata" {
                    metadata = try RequestFields.metadata(&r)
                    return
                }
                guard try CardInput.read(key, from: &r, into: &found, envelopeFieldPrefix: true) else {
                    throw VaultError(.requestFieldUnknown, "a token request has card or envelope, and metadata")
                }
            }
            return (try CardInput.required(found), metadata)
        }
        let record = try await input.tokenize(with: tokenizer, metadata: metadata)
        if let note = AuditNote.current {
            note.token = record.token
            note.kid = record.envelope.kid.rawValue
            note.envelope = record.envelope.id
        }
        switch input {
        case .card: metrics.tokenCreated(source: "card")
        case .envelope: metrics.tokenCreated(source: "envelope")
        }
        return JSONOut.response(.created, Self.json(record))
    }

    /// `{"number":"…","partial":false}` → 200 with what the number is (never an error for a bad number).
    func validate(_ request: Request) async throws -> Response {
        let info = try await JSONBody.parse(request) { (r: inout JSONReader) throws(VaultError) -> CardNumberInfo in
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
            return validate(number, partial: partial)
        }
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

    /// The token for this card.
    func tokenize(with tokenizer: Tokenizer, metadata: Metadata = Metadata()) async throws(VaultError) -> TokenRecord {
        switch self {
        case .card(let card): try await tokenizer.tokenize(card, metadata: metadata)
        case .envelope(let envelope): try await tokenizer.tokenize(envelope: envelope, metadata: metadata)
        }
    }
}
