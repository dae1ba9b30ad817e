import Hummingbird
import Payments
import SocketHTTP
import VaultCrypto

/// Refunds: `POST /v1/refunds` `{"payment","amount"?,"idempotency_key"?}` (or the
/// `Idempotency-Key` header) and `GET /v1/refunds/{refund}` (roles: pay, admin). Several partial
/// refunds of one payment are allowed up to its captured amount.
struct RefundController: Sendable {
    let payments: PaymentService?

    static let endpoints: [SidecarEndpoint<Self>] = [
        .init(SidecarRoute(.post, "/v1/refunds", action: "refund", access: [.pay, .admin])) { c, request, _ in try await c.create(request) },
        .init(SidecarRoute(.get, "/v1/refunds/{refund}", action: "refund_read", access: [.pay, .admin])) { c, _, context in
            let op = try await c.service().operation(context.parameters.get("refund") ?? "")
            guard op.kind == .refund else { throw APIError(.refundNotFound, "no refund with that id") }
            return JSONOut.response(.ok, Self.noted(op))
        },
    ]

    func addRoutes<Context: RequestContext>(to group: RouterGroup<Context>) { group.add(Self.endpoints, controller: self) }

    func service() throws(APIError) -> PaymentService { try SidecarRoutes.needGateway(payments) }

    /// 201 with the refund (`succeeded`, `pending` or `failed`), 200 for a replay of the same key
    /// and request (`Idempotent-Replayed: true`), 202 while its outcome is not known.
    func create(_ request: Request) async throws -> Response {
        let service = try service()
        let header = try RequestFields.idempotencyKeyHeader(request, reservedPrefix: MandateService.keyPrefix)
        let (payment, amount, bodyKey, metadata) = try await JSONBody.parse(request) {
            (r: inout JSONReader) throws(VaultError) -> (String, Int?, String?, Metadata) in
            var payment: String?, amount: Int?, key: String?, metadata = Metadata()
            try r.readObject { (r, field) throws(VaultError) in
                switch field {
                case "metadata": metadata = try RequestFields.metadata(&r)
                case "payment": payment = try RequestFields.id(&r, prefix: "pay_", field: "payment")
                case "amount": amount = try RequestFields.amount(&r)
                case "idempotency_key": key = try RequestFields.idempotencyKey(&r, reservedPrefix: MandateService.keyPrefix)
                default: throw VaultError(.requestFieldUnknown, "a refund has payment, amount, metadata and idempotency_key")
                }
            }
            return (try JSONBody.required(payment, "payment"), amount, key, metadata)
        }
        let key = header == nil && bodyKey == nil ? nil : try RequestFields.idempotencyKey(header: header, body: bodyKey)
        let (op, created) = try await service.operate(
            PaymentService.OperationAsk(
                kind: .refund, paymentID: payment, amount: amount, idempotencyKey: key, scope: Caller.paymentScope, metadata: metadata))
        var response = JSONOut.response(op.status == .processing ? .accepted : created ? .created : .ok, Self.noted(op))
        if !created { response.headers[.idempotentReplayed] = "true" }
        return response
    }

    static func noted(_ op: PaymentOperation) -> String {
        if let note = AuditNote.current { note.payment = op.paymentID }
        return PaymentService.refundJSON(op)
    }
}
