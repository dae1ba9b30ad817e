import CardRules
import Hummingbird
import Money
import Payments
import SocketHTTP
import Tokenizer
import VaultCrypto

/// Checkout sessions: created by pay/admin, read and paid (with one card) by a tokenize caller
/// that presents the id.
struct SessionController: Sendable {
    let sessions: SessionService?
    let tokenizer: Tokenizer
    let metrics: SidecarMetrics

    static let endpoints: [SidecarEndpoint<Self>] = [
        .init(SidecarRoute(.post, "/v1/sessions", action: "session_create", access: [.pay, .admin])) { c, request, _ in
            try await c.create(request)
        },
        .init(SidecarRoute(.get, "/v1/sessions/{session}", action: "session_read", access: [.tokenize, .pay, .admin])) { c, _, context in
            JSONOut.response(.ok, SessionService.json(try await c.service().session(context.parameters.get("session") ?? "")))
        },
        .init(SidecarRoute(.post, "/v1/sessions/{session}/pay", action: "pay", access: [.tokenize, .pay, .admin])) { c, request, context in
            try await c.pay(request, session: context.parameters.get("session") ?? "")
        },
    ]

    func addRoutes<Context: RequestContext>(to group: RouterGroup<Context>) { group.add(Self.endpoints, controller: self) }

    func service() throws(APIError) -> SessionService { try SidecarRoutes.needGateway(sessions) }

    struct NewSession {
        var amount: Int?, currency: Currency?, brands: [CardBrand] = [], customer: String?, ttl = 900.0, key: String?
    }

    /// `{"amount","currency","accepted_brands":["visa",…],"customer":"cus_…","ttl_seconds":900}`
    /// (and an optional `idempotency_key` or `Idempotency-Key` header) → 201; a replay → 200.
    func create(_ request: Request) async throws -> Response {
        let service = try service()
        let header = try RequestFields.idempotencyKeyHeader(request, reservedPrefix: MandateService.keyPrefix)
        let s = try await JSONBody.parse(request) { (r: inout JSONReader) throws(VaultError) -> NewSession in
            var s = NewSession()
            try r.readObject { (r, key) throws(VaultError) in try Self.read(key, from: &r, into: &s) }
            return s
        }
        let (session, replayed) = try await service.create(
            amount: try JSONBody.required(s.amount, "amount"), currency: try JSONBody.required(s.currency, "currency"),
            acceptedBrands: s.brands, customer: s.customer, ttl: s.ttl, key: try IdempotentCreate.key(header: header, body: s.key),
            scope: Caller.paymentScope)
        return IdempotentCreate.response(SessionService.json(session), replayed: replayed)
    }

    static func read(_ key: String, from r: inout JSONReader, into s: inout NewSession) throws(VaultError) {
        switch key {
        case "amount": s.amount = try RequestFields.amount(&r)
        case "currency": s.currency = try RequestFields.currency(&r)
        case "accepted_brands":
            try r.readArray { r throws(VaultError) in
                let b = CardBrand(rawValue: try r.readString(maxBytes: 32))
                guard CardBrand.all.contains(b) else {
                    throw VaultError(.requestFieldInvalid, "unknown brand \(JSONReader.printable(b.rawValue))", field: "accepted_brands")
                }
                s.brands.append(b)
            }
        case "customer": s.customer = try RequestFields.id(&r, prefix: "cus_", field: "customer")
        case "ttl_seconds":
            let t = try r.readInt()
            guard (1...Int(SessionService.maxTTL)).contains(t) else {
                throw VaultError(.requestFieldInvalid, "ttl_seconds is 1 to 3600", field: "ttl_seconds")
            }
            s.ttl = Double(t)
        case "idempotency_key": s.key = try RequestFields.idempotencyKey(&r, reservedPrefix: MandateService.keyPrefix)
        default: throw VaultError(.requestFieldUnknown, "a session has amount, currency, accepted_brands, customer, ttl_seconds (and idempotency_key)")
        }
    }

    /// `{"card":{…}}` or `{"envelope":{…}}`, and `idempotency_key` (or the `Idempotency-Key`
    /// header): tokenize and pay the session.
    func pay(_ request: Request, session id: String) async throws -> Response {
        let service = try service()
        let header = try RequestFields.idempotencyKeyHeader(request, reservedPrefix: MandateService.keyPrefix)
        let (input, key) = try await JSONBody.parse(request) { (r: inout JSONReader) throws(VaultError) -> (CardInput, String) in
            var found: CardInput?, key: String?
            try r.readObject { (r, field) throws(VaultError) in
                if try CardInput.read(field, from: &r, into: &found, envelopeFieldPrefix: false) { return }
                guard field == "idempotency_key" else {
                    throw VaultError(.requestFieldUnknown, "a session payment has card or envelope, and idempotency_key")
                }
                key = try RequestFields.idempotencyKey(&r, reservedPrefix: MandateService.keyPrefix)
            }
            return (try CardInput.required(found), try RequestFields.idempotencyKey(header: header, body: key))
        }
        let tokenizer = self.tokenizer
        let (payment, created) = try await service.pay(id, idempotencyKey: key, bin: input.bin) { (fingerprinted) throws(VaultError) in
            try await input.tokenize(with: tokenizer, metadata: Metadata(), format: nil, singleUse: nil, dedupe: false, fingerprinted: fingerprinted).record
        }
        // A tokenize-only caller (a checkout page's server) learns that the card was declined,
        // not why: the precise code stays on the payment, for pay/admin callers.
        var shown = payment
        if shown.status == .declined, Caller.current?.isTokenizeOnly == true { shown.code = PaymentService.genericDeclineCode }
        return PaymentAnswer.response(payment, shown: shown, created: created, metrics: metrics)
    }
}
