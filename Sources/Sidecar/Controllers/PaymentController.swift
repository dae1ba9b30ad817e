import GatewayAPI
import HTTPTypes
import Hummingbird
import Money
import Payments
import SocketHTTP
import VaultCrypto

/// Payments: `POST /v1/payments`, `GET /v1/payments/{payment}`, `POST /v1/payments/{payment}/confirm`,
/// `…/capture` and `…/cancel` (roles: pay, admin).
struct PaymentController: Sendable {
    let payments: PaymentService?
    let metrics: SidecarMetrics

    static let endpoints: [SidecarEndpoint<Self>] = [
        .init(SidecarRoute(.post, "/v1/payments", action: "pay", access: [.pay, .admin])) { c, request, _ in try await c.create(request) },
        .init(SidecarRoute(.get, "/v1/payments/{payment}", action: "payment_read", access: [.pay, .admin])) { c, _, context in
            let p = try await c.service().payment(context.parameters.get("payment") ?? "")
            return JSONOut.response(.ok, PaymentAnswer.noted(p))
        },
        .init(SidecarRoute(.post, "/v1/payments/{payment}/confirm", action: "confirm", access: [.pay, .admin])) { c, request, context in
            try await c.confirm(request, id: context.parameters.get("payment") ?? "")
        },
        .init(SidecarRoute(.post, "/v1/payments/{payment}/capture", action: "capture", access: [.pay, .admin])) { c, request, context in
            try await c.operate(.capture, request, id: context.parameters.get("payment") ?? "")
        },
        .init(SidecarRoute(.post, "/v1/payments/{payment}/cancel", action: "cancel", access: [.pay, .admin])) { c, request, context in
            try await c.operate(.cancel, request, id: context.parameters.get("payment") ?? "")
        },
    ]

    func addRoutes<Context: RequestContext>(to group: RouterGroup<Context>) { group.add(Self.endpoints, controller: self) }

    func service() throws(APIError) -> PaymentService { try SidecarRoutes.needGateway(payments) }

    /// `{"token","amount","currency","idempotency_key"}` (or `customer` for `token`; the key or the
    /// `Idempotency-Key` header): 201 with the
    /// payment, or 200 with the first payment for a replay of the same key and request.
    func create(_ request: Request) async throws -> Response {
        let service = try service()
        let header = try RequestFields.idempotencyKeyHeader(request, reservedPrefix: MandateService.keyPrefix)
        let luhnValid = service.tokenizer.policy.cardTokenLuhnValid
        let parsed = try await JSONBody.parse(request) { (r: inout JSONReader) throws(VaultError) in
            try Self.parseRequest(&r, headerKey: header, cardTokensLuhnValid: luhnValid)
        }
        let (payment, created) = try await service.pay(parsed)
        return PaymentAnswer.response(payment, created: created, markReplay: true, metrics: metrics)
    }

    /// The body; `headerKey` is the `Idempotency-Key` header's (`RequestFields.idempotencyKey(header:body:)`);
    /// `cardTokensLuhnValid`: the sidecar's `card_token_luhn_valid` (`TokenID.read`).
    static func parseRequest(_ r: inout JSONReader, headerKey: String? = nil, cardTokensLuhnValid: Bool = false) throws(VaultError) -> PaymentService.Request {
        var token: String?, customer: String?, amount: Int?, currency: Currency?, key: String?, capture = true, metadata = Metadata()
        try r.readObject { (r, field) throws(VaultError) in
            switch field {
            case "metadata": metadata = try RequestFields.metadata(&r)
            case "capture": capture = try r.readBool()
            case "token": token = try TokenID.read(&r, luhnValid: cardTokensLuhnValid, prefixed: true)
            case "amount": amount = try RequestFields.amount(&r)
            case "currency": currency = try RequestFields.currency(&r)
            case "idempotency_key": key = try RequestFields.idempotencyKey(&r, reservedPrefix: MandateService.keyPrefix)
            case "customer": customer = try RequestFields.id(&r, prefix: "cus_", field: "customer")
            default:
                throw VaultError(.requestFieldUnknown, "a payment has token or customer, amount, currency, capture, metadata and idempotency_key")
            }
        }
        if token != nil, customer != nil {
            throw VaultError(.requestAmbiguous, "pay with a token or a customer, not both", field: "customer")
        }
        guard let source = token.map(PaymentService.Request.Source.token) ?? customer.map(PaymentService.Request.Source.customer) else {
            throw VaultError(.requestFieldMissing, "token (or customer) is missing", field: "token")
        }
        return PaymentService.Request(
            source: source, amount: try JSONBody.required(amount, "amount"), currency: try JSONBody.required(currency, "currency"),
            idempotencyKey: try RequestFields.idempotencyKey(header: headerKey, body: key), scope: Caller.paymentScope, capture: capture,
            metadata: metadata)
    }

    /// `POST /v1/payments/{id}/capture` `{"amount"?, "idempotency_key"?}` and `…/cancel`
    /// `{"idempotency_key"?}` (or the `Idempotency-Key` header): 200 with the payment as it is
    /// after the operation (a replay marked `Idempotent-Replayed: true`), 202 when the
    /// operation's outcome is not known yet (the payment still `requires_capture`).
    func operate(_ kind: PaymentOperation.Kind, _ request: Request, id: String) async throws -> Response {
        let service = try service()
        let header = try RequestFields.idempotencyKeyHeader(request, reservedPrefix: MandateService.keyPrefix)
        let (amount, bodyKey) = try await JSONBody.parse(request) { (r: inout JSONReader) throws(VaultError) -> (Int?, String?) in
            var amount: Int?, key: String?
            try r.readObject { (r, field) throws(VaultError) in
                switch field {
                case "amount" where kind == .capture: amount = try RequestFields.amount(&r)
                case "idempotency_key": key = try RequestFields.idempotencyKey(&r, reservedPrefix: MandateService.keyPrefix)
                default:
                    throw VaultError(.requestFieldUnknown, kind == .capture ? "a capture has amount and idempotency_key" : "a cancel has idempotency_key")
                }
            }
            return (amount, key)
        }
        let key = header == nil && bodyKey == nil ? nil : try RequestFields.idempotencyKey(header: header, body: bodyKey)
        let (op, created) = try await service.operate(
            PaymentService.OperationAsk(kind: kind, paymentID: id, amount: amount, idempotencyKey: key, scope: Caller.paymentScope))
        let p = try await service.payment(op.paymentID)
        var response = JSONOut.response(op.status == .processing ? .accepted : .ok, PaymentAnswer.noted(p))
        if !created { response.headers[.idempotentReplayed] = "true" }
        return response
    }

    /// `{"three_ds_result":"<JWT>"}`: completes a payment that required 3-D Secure.
    func confirm(_ request: Request, id: String) async throws -> Response {
        let service = try service()
        let jwt = try await JSONBody.stringField("three_ds_result", of: request, maxBytes: 8192)
        let p = try await service.confirm(id, threeDSResult: jwt)
        metrics.payment(status: p.status.rawValue, replayed: false)
        return JSONOut.response(.ok, PaymentAnswer.noted(p))
    }
}

/// The sandbox processor's 3DS challenge page (challenge_url), for tests and demos:
/// `{"action":"SUCCESS|NOACTION|FAILURE|ERROR|CANCEL|TIMEOUT"}` → `{"three_ds_result":"<JWT>"}`.
struct SandboxController: Sendable {
    let payments: PaymentService?

    static let endpoints: [SidecarEndpoint<Self>] = [
        .init(SidecarRoute(.post, "/v1/sandbox/3ds/{transaction}", access: [.tokenize, .pay, .admin])) { c, request, context in
            try await c.complete(request, transaction: context.parameters.get("transaction") ?? "")
        }
    ]

    func addRoutes<Context: RequestContext>(to group: RouterGroup<Context>) { group.add(Self.endpoints, controller: self) }

    func complete(_ request: Request, transaction: String) async throws -> Response {
        let service = try SidecarRoutes.needGateway(payments)
        let action = try await JSONBody.stringField("action", of: request, maxBytes: 16)
        let jwt = try await service.completeSandboxChallenge(transaction, action: action)
        return JSONOut.response(.ok, ThreeDSResult.json(jwt))
    }
}

/// A payment as an answer, for the routes that make one (payments, sessions, mandate charges).
enum PaymentAnswer {
    /// 201 made, 200 a replay (marked `Idempotent-Replayed: true` with `markReplay`), 202 when its
    /// outcome is not known yet (`processing`: sent, the answer lost; settled automatically, and
    /// `GET /v1/payments/{id}` or a replay of the key shows the outcome once known); counted.
    static func response(
        _ payment: PaymentRecord, shown: PaymentRecord? = nil, created: Bool, markReplay: Bool = false, metrics: SidecarMetrics
    ) -> Response {
        var response = JSONOut.response(status(of: payment, created: created), noted(shown ?? payment))
        if markReplay, !created { response.headers[.idempotentReplayed] = "true" }
        metrics.payment(status: payment.status.rawValue, replayed: !created)
        return response
    }

    static func status(of payment: PaymentRecord, created: Bool) -> HTTPResponse.Status {
        if payment.status == .processing { return .accepted }
        return created ? .created : .ok
    }

    /// A payment's JSON, its ids noted for the request's audit line.
    static func noted(_ p: PaymentRecord) -> String {
        if let note = AuditNote.current {
            note.payment = p.id
            if !p.token.hasPrefix("ins_") { note.token = p.token }
        }
        return PaymentService.json(p)
    }
}
