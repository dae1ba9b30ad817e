import CardRules
import Foundation
import HTTPTypes
import Hummingbird
import Money
import Payments
import SocketHTTP
import Tokenizer
import VaultCrypto

/// The sidecar's HTTP API (README "The sidecar", openapi.json), every route of `documentedRoutes`:
/// tokens, validate, payments and the sandbox's 3-D Secure page, health, metrics and the spec here;
/// customers, sessions and mandates in SidecarRoutes+Accounts.swift.
public struct SidecarRoutes: Sendable {
    /// Largest request body accepted (a card or an envelope fits many times over).
    public static let maxBodyBytes = 16 * 1024

    let tokenizer: Tokenizer
    let validator: CardValidator
    let metrics: SidecarMetrics
    let payments: PaymentService?
    let customers: CustomerService?
    let sessions: SessionService?
    let mandates: MandateService?

    /// Routes over a tokenizer; `metrics` is what `GET /metrics` serves; without `payments` (no
    /// gateway configured) the payment routes answer 503 `GATEWAY_UNAVAILABLE`.
    public init(
        tokenizer: Tokenizer, validator: CardValidator = CardValidator(), metrics: SidecarMetrics = SidecarMetrics(),
        payments: PaymentService? = nil, customers: CustomerService? = nil, sessions: SessionService? = nil,
        mandates: MandateService? = nil
    ) {
        self.sessions = sessions
        self.mandates = mandates
        self.tokenizer = tokenizer
        self.validator = validator
        self.metrics = metrics
        self.payments = payments
        self.customers = customers
    }

    /// Every route served, as `METHOD /path` in OpenAPI notation; a test checks it against
    /// `openapi.json` and the router.
    public static let documentedRoutes = [
        "POST /v1/tokens", "GET /v1/tokens/{token}", "DELETE /v1/tokens/{token}", "POST /v1/validate",
        "POST /v1/payments", "GET /v1/payments/{payment}", "POST /v1/payments/{payment}/confirm", "POST /v1/sandbox/3ds/{transaction}",
        "POST /v1/customers", "GET /v1/customers/{customer}", "POST /v1/customers/{customer}/instruments",
        "POST /v1/customers/{customer}/default_instrument", "DELETE /v1/customers/{customer}/instruments/{instrument}",
        "POST /v1/sessions", "GET /v1/sessions/{session}", "POST /v1/sessions/{session}/pay",
        "POST /v1/customers/{customer}/mandates", "GET /v1/mandates/{mandate}", "DELETE /v1/mandates/{mandate}", "POST /v1/mandates/{mandate}/charges",
        "GET /v1/health", "GET /metrics", "GET /openapi.json",
    ]

    /// The audit log's action for each route that touches cards, tokens, payments or customers
    /// (docs/audit-log.md); health, metrics, the spec and validate are not audited.
    public static let auditedActions: [String: String] = [
        "POST /v1/tokens": "tokenize", "GET /v1/tokens/{token}": "read", "DELETE /v1/tokens/{token}": "delete",
        "POST /v1/payments": "pay", "GET /v1/payments/{payment}": "payment_read", "POST /v1/payments/{payment}/confirm": "confirm",
        "POST /v1/customers": "customer_create", "GET /v1/customers/{customer}": "customer_read",
        "POST /v1/customers/{customer}/instruments": "attach", "POST /v1/customers/{customer}/default_instrument": "set_default",
        "DELETE /v1/customers/{customer}/instruments/{instrument}": "detach",
        "POST /v1/sessions": "session_create", "GET /v1/sessions/{session}": "session_read", "POST /v1/sessions/{session}/pay": "pay",
        "POST /v1/customers/{customer}/mandates": "mandate_create", "GET /v1/mandates/{mandate}": "mandate_read",
        "DELETE /v1/mandates/{mandate}": "mandate_cancel", "POST /v1/mandates/{mandate}/charges": "pay",
    ]

    /// The OpenAPI 3.1 document (Sources/Sidecar/Resources/openapi.json).
    public static let openAPIDocument: String = {
        guard let url = Bundle.module.url(forResource: "openapi", withExtension: "json"),
              let text = try? String(contentsOf: url, encoding: .utf8)
        else { return "{}" }
        return text
    }()

    /// Adds the routes to `router`.
    public func register<Context: RequestContext>(on router: Router<Context>) {
        router.get("/v1/health") { _, _ in JSONOut.response(.ok, "{\"status\":\"ok\"}") }
        router.get("/openapi.json") { _, _ in JSONOut.response(.ok, Self.openAPIDocument) }
        router.get("/metrics") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: self.metrics.exposition())))
        }
        router.post("/v1/tokens") { request, _ in try await self.createToken(request) }
        router.get("/v1/tokens/:token") { _, context in
            let record = try await self.call { () throws(VaultError) in try await self.tokenizer.record(context.parameters.get("token") ?? "") }
            return JSONOut.response(.ok, Self.tokenJSON(record))
        }
        router.delete("/v1/tokens/:token") { _, context in
            try await self.call { () throws(VaultError) in try await self.tokenizer.delete(context.parameters.get("token") ?? "") }
            return Response(status: .noContent)
        }
        router.post("/v1/validate") { request, _ in try await self.validate(request) }
        router.post("/v1/payments") { request, _ in try await self.createPayment(request) }
        registerCustomers(on: router)
        registerSessions(on: router)
        registerMandates(on: router)
        router.get("/v1/payments/:payment") { _, context in
            let p = try await self.paymentService().payment(context.parameters.get("payment") ?? "")
            return JSONOut.response(.ok, Self.noted(p))
        }
        router.post("/v1/payments/:payment/confirm") { request, context in
            let service = try self.paymentService()
            let jwt = try await Self.stringField("three_ds_result", of: request, maxBytes: 8192)
            let p = try await service.confirm(context.parameters.get("payment") ?? "", threeDSResult: jwt)
            metrics.payment(status: p.status.rawValue, replayed: false)
            return JSONOut.response(.ok, Self.noted(p))
        }
        // The sandbox processor's 3DS challenge page (challenge_url), for tests and demos:
        // `{"action":"SUCCESS|NOACTION|FAILURE|ERROR|CANCEL|TIMEOUT"}` → `{"three_ds_result":"<JWT>"}`.
        router.post("/v1/sandbox/3ds/:transaction") { request, context in
            let service = try self.paymentService()
            let action = try await Self.stringField("action", of: request, maxBytes: 16)
            let jwt = try await service.completeSandboxChallenge(context.parameters.get("transaction") ?? "", action: action)
            var out = "{\"three_ds_result\":"
            JSONOut.string(jwt, into: &out)
            return JSONOut.response(.ok, out + "}")
        }
    }

    /// A body `{"<name>":"<string>"}` with nothing else.
    static func stringField(_ name: String, of request: Request, maxBytes: Int) async throws -> String {
        let body = try await readJSONBody(request)
        return try body.withUnsafeBytes { raw in
            try parse(raw) { (r: inout JSONReader) throws(VaultError) -> String in
                var value: String?
                try r.readObject { (r, key) throws(VaultError) in
                    guard key == name else { throw VaultError(.requestFieldUnknown, "the body has only \(name)") }
                    value = try r.readString(maxBytes: maxBytes)
                }
                guard let value else { throw VaultError(.requestFieldMissing, "\(name) is missing", field: name) }
                return value
            }
        }
    }

    func paymentService() throws(APIError) -> PaymentService {
        guard let payments else {
            throw APIError(.gatewayUnavailable, "this sidecar has no gateway (vault serve --gateway PATH)")
        }
        return payments
    }

    /// `POST /v1/payments` `{"token","amount","currency","idempotency_key"}`: 201 with the payment,
    /// or 200 with the first payment for a replay of the same key and request.
    func createPayment(_ request: Request) async throws -> Response {
        let service = try paymentService()
        let body = try await Self.readJSONBody(request)
        let parsed: PaymentService.Request = try body.withUnsafeBytes { raw in
            try Self.parse(raw) { (r: inout JSONReader) throws(VaultError) -> PaymentService.Request in
                var token: String?, customer: String?, amount: Int?, currency: Currency?, key: String?
                try r.readObject { (r, field) throws(VaultError) in
                    switch field {
                    case "token": token = try RequestFields.id(&r, prefix: "tok_", field: "token")
                    case "amount": amount = try RequestFields.amount(&r)
                    case "currency": currency = try RequestFields.currency(&r)
                    case "idempotency_key": key = try RequestFields.idempotencyKey(&r)
                    case "customer": customer = try RequestFields.id(&r, prefix: "cus_", field: "customer")
                    default:
                        throw VaultError(.requestFieldUnknown, "a payment has token or customer, amount, currency and idempotency_key")
                    }
                }
                if token != nil, customer != nil {
                    throw VaultError(.requestAmbiguous, "pay with a token or a customer, not both", field: "customer")
                }
                guard let source = token.map(PaymentService.Request.Source.token) ?? customer.map(PaymentService.Request.Source.customer) else {
                    throw VaultError(.requestFieldMissing, "token (or customer) is missing", field: "token")
                }
                guard let amount else { throw VaultError(.requestFieldMissing, "amount is missing", field: "amount") }
                guard let currency else { throw VaultError(.requestFieldMissing, "currency is missing", field: "currency") }
                guard let key else { throw VaultError(.requestFieldMissing, "idempotency_key is missing", field: "idempotency_key") }
                return PaymentService.Request(source: source, amount: amount, currency: currency, idempotencyKey: key, scope: Caller.paymentScope)
            }
        }
        let (payment, created) = try await service.pay(parsed)
        var response = JSONOut.response(Self.httpStatus(of: payment, created: created), Self.noted(payment))
        if !created { response.headers[.idempotentReplayed] = "true" }
        metrics.payment(status: payment.status.rawValue, replayed: !created)
        return response
    }

    /// A payment's HTTP status: 201 made, 200 a replay, 202 when its outcome is not known yet
    /// (`processing`: sent, the answer lost; it is settled automatically, and `GET
    /// /v1/payments/{id}` or a replay of the key shows the outcome once known).
    static func httpStatus(of payment: PaymentRecord, created: Bool) -> HTTPResponse.Status {
        if payment.status == .processing { return .accepted }
        return created ? .created : .ok
    }

    /// A payment's JSON, its ids noted for the request's audit line.
    static func noted(_ p: PaymentRecord) -> String {
        if let note = AuditNote.current {
            note.payment = p.id
            if p.token.hasPrefix("tok_") { note.token = p.token }
        }
        return PaymentService.json(p)
    }

    func createToken(_ request: Request) async throws -> Response {
        let body = try await Self.readJSONBody(request)
        enum Input { case card(CardData), envelope(CardEnvelope) }
        let input: Input = try body.withUnsafeBytes { raw in
            try Self.parse(raw) { (r: inout JSONReader) throws(VaultError) -> Input in
                var found: Input?
                try r.readObject { (r, key) throws(VaultError) in
                    if found != nil, key == "card" || key == "envelope" {
                        throw VaultError(.requestAmbiguous, "give either card or envelope, not both", field: key)
                    }
                    switch key {
                    case "card": found = .card(try CardData.parse(from: &r, fieldPrefix: "card."))
                    case "envelope":
                        do throws(VaultError) { found = .envelope(try CardEnvelope.parse(from: &r)) } catch {
                            throw VaultError(error.code, error.message, field: error.field.map { "envelope." + $0 } ?? "envelope")
                        }
                    default:
                        throw VaultError(.requestFieldUnknown, "a token request has only card or envelope")
                    }
                }
                guard let found else { throw VaultError(.requestFieldMissing, "give card or envelope", field: "card") }
                return found
            }
        }
        let record = try await call { () throws(VaultError) in
            switch input {
            case .card(let card): try await tokenizer.tokenize(card)
            case .envelope(let envelope): try await tokenizer.tokenize(envelope: envelope)
            }
        }
        if let note = AuditNote.current {
            note.token = record.token
            note.kid = record.envelope.kid.rawValue
            note.envelope = record.envelope.id
        }
        switch input {
        case .card: metrics.tokenCreated(source: "card")
        case .envelope: metrics.tokenCreated(source: "envelope")
        }
        return JSONOut.response(.created, Self.tokenJSON(record))
    }

    func validate(_ request: Request) async throws -> Response {
        let body = try await Self.readJSONBody(request)
        let info: CardNumberInfo = try body.withUnsafeBytes { raw in
            try Self.parse(raw) { (r: inout JSONReader) throws(VaultError) -> CardNumberInfo in
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
                return number.withUnsafeBytes { raw in
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
        }
        return JSONOut.response(.ok, info.json)
    }

    // MARK: - Helpers

    /// The request body, in wiped memory (`SecureBytes`).
    ///
    /// Bodies carry card numbers and CVCs. NIO reads them into its own buffers, and the body
    /// chunks Hummingbird hands over are slices of those: copying them elsewhere and zeroing the
    /// copy would leave the card in NIO's buffer, freed without a wipe. So each chunk is zeroed
    /// where it lies, through the storage it shares with NIO's read buffer (nothing reads those
    /// bytes again once the HTTP parser has passed them), and only the `SecureBytes` copy remains;
    /// it is wiped when released. `Tests/VaultCLITests/HardeningCLITests` scans the running
    /// sidecar's memory for the card numbers it was sent.
    static func readJSONBody(_ request: Request) async throws -> SecureBytes {
        let type = request.headers[.contentType]?.lowercased() ?? ""
        guard type.hasPrefix("application/json") else {
            throw APIError(.unsupportedMediaType, "send Content-Type: application/json")
        }
        var chunks: [ByteBuffer] = []
        defer { chunks.forEach(zeroInPlace) }
        var total = 0
        for try await chunk in request.body {
            chunks.append(chunk)
            total += chunk.readableBytes
            guard total <= maxBodyBytes else {
                throw APIError(.bodyTooLarge, "a request body is at most \(maxBodyBytes) bytes")
            }
        }
        return SecureBytes(capacity: total) { out in
            var at = 0
            for chunk in chunks {
                chunk.withUnsafeReadableBytes { raw in
                    UnsafeMutableRawBufferPointer(rebasing: out[at..<(at + raw.count)]).copyMemory(from: raw)
                    at += raw.count
                }
            }
            return total
        }
    }

    /// Zeroes a buffer's readable bytes in the storage it shares with other views (not a copy,
    /// which `withUnsafeMutableReadableBytes` would make for shared storage).
    static func zeroInPlace(_ buffer: ByteBuffer) {
        buffer.withUnsafeReadableBytes { raw in
            if let base = raw.baseAddress { memset(UnsafeMutableRawPointer(mutating: base), 0, raw.count) }
        }
    }

    static func parse<T>(_ raw: UnsafeRawBufferPointer, _ body: (inout JSONReader) throws(VaultError) -> T) throws(APIError) -> T {
        do throws(VaultError) {
            var reader = JSONReader(raw, errorCode: .requestMalformed, maxDepth: 8)
            let value = try body(&reader)
            try reader.finish()
            return value
        } catch {
            throw APIError(error)
        }
    }

    func call<T>(_ body: () async throws(VaultError) -> T) async throws(APIError) -> T {
        do throws(VaultError) { return try await body() } catch { throw APIError(error) }
    }

    static func tokenJSON(_ r: TokenRecord) -> String {
        var out = "{\"token\":\"\(r.token)\",\"card\":" + r.card.json
        out += ",\"expires_at\":\"\(iso(r.expiresAt))\""
        out += ",\"cvc_expires_at\":" + (r.cvcExpiresAt.map { "\"\(iso($0))\"" } ?? "null")
        out += ",\"has_cvc\":\(r.hasCVC),\"single_use\":\(r.singleUse)}"
        return out
    }

    /// `2026-11-23T12:50:59Z` (UTC, whole seconds), without Foundation's formatter machinery.
    static func iso(_ d: Date) -> String {
        var t = time_t(d.timeIntervalSince1970.rounded(.down))
        var tm = tm()
        gmtime_r(&t, &tm)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(tm.tm_year + 1900)-\(two(tm.tm_mon + 1))-\(two(tm.tm_mday))T\(two(tm.tm_hour)):\(two(tm.tm_min)):\(two(tm.tm_sec))Z"
    }
}

extension HTTPField.Name {
    /// Set on the answer to a replayed idempotency key.
    static let idempotentReplayed = Self("Idempotent-Replayed")!
}

/// Request fields several routes share, each with its coded refusal.
enum RequestFields {
    /// Any field that is not a card field: refused with `REQUEST_FIELD_CARD_NUMBER` (422, naming
    /// the field, never echoing the value) when it holds what looks like a card number
    /// (`CardNumberScanner`: 12 to 19 digits passing the Luhn check, separators allowed). Checked
    /// before the field's own form, so the answer says why.
    static func freeText(_ value: String, field: String) throws(VaultError) -> String {
        guard !CardNumberScanner.containsCardNumber(value) else {
            throw VaultError(
                .requestFieldCardNumber, "\(field) looks like it holds a card number; card numbers go only in card.number, where they are sealed",
                field: field)
        }
        return value
    }

    /// A positive amount in minor units (at most `Currency.maximumAmount`).
    static func amount(_ r: inout JSONReader, field: String = "amount") throws(VaultError) -> Int {
        let v = try r.readInt()
        guard (1...Currency.maximumAmount).contains(v) else {
            throw VaultError(.amountInvalid, "\(field) is a positive integer in minor units", field: field)
        }
        return v
    }

    /// An active ISO 4217 code.
    static func currency(_ r: inout JSONReader) throws(VaultError) -> Currency {
        guard let c = Currency(try r.readString(maxBytes: 8)) else {
            throw VaultError(.currencyInvalid, "currency is an ISO 4217 code such as EUR or USD", field: "currency")
        }
        return c
    }

    /// A vault id: `prefix` and lower-case letters, digits or `_` (never a card number: some ids,
    /// such as a session's customer, are stored as given).
    static func id(_ r: inout JSONReader, prefix: String, field: String) throws(VaultError) -> String {
        let v = try freeText(r.readString(maxBytes: 64), field: field)
        guard v.hasPrefix(prefix), v.utf8.allSatisfy({ (48...57).contains($0) || (97...122).contains($0) || $0 == 95 }) else {
            throw VaultError(.requestFieldInvalid, "\(field) is \(prefix) and lower-case letters or digits", field: field)
        }
        return v
    }

    /// 1 to 255 printable ASCII characters without spaces or quotes, outside the reserved
    /// mandate prefix.
    static func idempotencyKey(_ r: inout JSONReader) throws(VaultError) -> String {
        let k = try freeText(r.readString(maxBytes: 255), field: "idempotency_key")
        guard !k.isEmpty, !k.hasPrefix(MandateService.keyPrefix), k.utf8.allSatisfy({ $0 > 32 && $0 < 127 && $0 != 34 && $0 != 92 }) else {
            throw VaultError(
                .requestFieldInvalid, "idempotency_key is 1 to 255 printable ASCII characters, no spaces or quotes, not starting with \(MandateService.keyPrefix)",
                field: "idempotency_key")
        }
        return k
    }
}
