import GatewayAPI
import Hummingbird
import Logging
import SocketHTTP
import Store
import VaultCrypto

/// Captures, voids and refunds (the payment lifecycle): `POST /v1/operations` and
/// `GET /v1/operations/{operation}`. No envelope is opened here: the processor acts on the
/// reference its authorization left in the ledger.
///
/// - `POST /v1/operations` `{"operation_id","kind":"capture|void|refund","payment_id","amount","currency"}`
///   → 200 `{"status":"succeeded|pending|failed","failure_code","reference"}` (a repeat of the
///   operation id answers the first outcome and sends nothing); coded refusals:
///   `PAYMENT_NOT_CAPTURABLE`, `PAYMENT_NOT_CANCELABLE`, `PAYMENT_NOT_REFUNDABLE`,
///   `CAPTURE_EXCEEDS_AUTHORIZED`, `REFUND_EXCEEDS_CAPTURED`, `AUTHORIZATION_NOT_FOUND`,
///   `OPERATION_NOT_SUPPORTED` (a relay template without it); 503 `GATEWAY_UNAVAILABLE` when
///   nothing was sent, 504 when the outcome is not known.
/// - `GET /v1/operations/{operation}` → 200 the outcome; 404 `AUTHORIZATION_NOT_FOUND` (no row:
///   never sent); 409 `AUTHORIZATION_PENDING` (sent, the outcome not known yet).
struct OperationController: Sendable {
    let processor: any PaymentProcessor
    let metrics: GatewayMetrics

    static let endpoints: [GatewayEndpoint<Self>] = [
        .init(GatewayRoute(.post, "/v1/operations", action: "operate")) { c, request, context in
            try await c.operate(request, logger: context.logger)
        },
        .init(GatewayRoute(.get, "/v1/operations/{operation}", action: "operation_read")) { c, _, context in
            try await c.operation(context.parameters.get("operation") ?? "")
        },
    ]

    func addRoutes<Context: RequestContext>(to group: RouterGroup<Context>) { group.add(Self.endpoints, controller: self) }

    func operate(_ request: Request, logger: Logger) async throws -> Response {
        let parsed = try await JSONBody.parse(request, OperationRequest.parse(from:))
        if let note = AuditNote.current { note.payment = parsed.paymentID }
        let outcome: GatewayOperationOutcome
        do throws(ProcessorError) { outcome = try await processor.operate(parsed) } catch {
            if case .refused(let code, let message) = error { throw APIError(code, message) }
            return try ProcessorAnswer.failed(error, paymentID: parsed.paymentID, metrics: metrics, logger: logger)
        }
        logger.info("operation", metadata: [
            "operation": "\(parsed.operationID)", "kind": "\(parsed.kind.rawValue)", "payment": "\(parsed.paymentID)",
            "status": "\(outcome.status)", "processor": "\(processor.name)",
        ])
        return JSONOut.response(.ok, outcome.json)
    }

    func operation(_ id: String) async throws -> Response {
        let row: LedgerOperation?
        do throws(ProcessorError) { row = try await processor.operation(id) } catch {
            throw APIError(.gatewayUnavailable, "the processor's ledger could not be read")
        }
        guard let row else { throw APIError(.authorizationNotFound, "the processor has no operation with this id: nothing was sent") }
        guard row.state == .done, let status = row.status else {
            throw APIError(.authorizationPending, "this operation was sent and its outcome is not known yet")
        }
        return JSONOut.response(.ok, GatewayOperationOutcome(status: status, failureCode: row.failureCode, reference: row.reference).json)
    }
}
