import GatewayAPI
import Hummingbird
import Logging
import SocketHTTP
import VaultCrypto
import VaultOpen

/// Authorizations: `POST /v1/authorize`, `GET /v1/authorizations/{payment}` and
/// `POST /v1/authorizations/{payment}/confirm` (the answers: `GatewayRoutes`).
struct AuthorizationController: Sendable {
    let openers: Openers
    let processor: any PaymentProcessor
    let metrics: GatewayMetrics

    static let endpoints: [GatewayEndpoint<Self>] = [
        .init(GatewayRoute(.post, "/v1/authorize", action: "authorize")) { c, request, context in
            try await c.authorize(request, logger: context.logger)
        },
        .init(GatewayRoute(.get, "/v1/authorizations/{payment}", action: "payment_read")) { c, _, context in
            try await c.authorization(of: context.parameters.get("payment") ?? "")
        },
        .init(GatewayRoute(.post, "/v1/authorizations/{payment}/confirm", action: "confirm")) { c, request, context in
            try await c.confirm(request, id: context.parameters.get("payment") ?? "", logger: context.logger)
        },
    ]

    func addRoutes<Context: RequestContext>(to group: RouterGroup<Context>) { group.add(Self.endpoints, controller: self) }

    /// Opens the envelope, checks it, and hands the card to the processor; the plaintext is wiped
    /// when the call returns.
    func authorize(_ request: Request, logger: Logger) async throws -> Response {
        let parsed = try await JSONBody.parse(request, AuthorizeRequest.parse(from:))
        if let note = AuditNote.current {
            note.payment = parsed.paymentID
            note.kid = parsed.envelope.kid.rawValue
            note.envelope = parsed.envelope.id
        }
        switch try await send(parsed) {
        case .success(let outcome):
            logger.info("authorized", metadata: [
                "payment": "\(parsed.paymentID)", "status": "\(outcome.status)", "processor": "\(processor.name)",
                "brand": "\(parsed.envelope.card.brand.rawValue)", "last4": "\(parsed.envelope.card.last4)",
            ])
            return JSONOut.response(.ok, outcome.answer.json)
        case .failure(let error):
            return try ProcessorAnswer.failed(error, paymentID: parsed.paymentID, metrics: metrics, logger: logger)
        }
    }

    /// The processor's answer for the opened card. The opened card lives in `SecureBytes` for
    /// this scope only; released (wiped) after.
    func send(_ parsed: AuthorizeRequest) async throws(APIError) -> Result<AuthorizationOutcome, ProcessorError> {
        let card: OpenedCard
        do throws(VaultError) { card = try openers.current.open(parsed.envelope) } catch {
            metrics.opened(error.code.rawValue)
            throw APIError(error)
        }
        metrics.opened("ok")
        let start = ContinuousClock.now
        do throws(ProcessorError) {
            let outcome = try await processor.authorize(
                AuthorizationRequest(paymentID: parsed.paymentID, amount: parsed.amount, currency: parsed.currency, capture: parsed.capture),
                card: card)
            metrics.authorized(status: "\(outcome.status)", duration: ContinuousClock.now - start)
            return .success(outcome)
        } catch {
            return .failure(error)
        }
    }

    /// What is known of a payment id (see `GatewayRoutes` for the answers).
    func authorization(of id: String) async throws -> Response {
        let state: AuthorizationState?
        do throws(ProcessorError) { state = try await processor.authorization(of: id) } catch {
            throw APIError(.gatewayUnavailable, "the processor's ledger could not be read")
        }
        switch state {
        case nil:
            throw APIError(.authorizationNotFound, "the processor has no authorization for this payment id: nothing was charged")
        case .outcome(let outcome)?:
            return JSONOut.response(.ok, outcome.answer.json)
        case .pending(let pending)?:
            return JSONOut.response(.conflict, pending.json)
        case .unknown(let reason, let attempts, let deadline)?:
            return JSONOut.response(.ok, GatewayOutcome.unknownJSON(reason: reason, attempts: attempts, deadline: deadline))
        }
    }

    /// `{"three_ds_result":"<JWT>"}`: completes a payment that required 3-D Secure.
    func confirm(_ request: Request, id: String, logger: Logger) async throws -> Response {
        let jwt = try await JSONBody.stringField(ThreeDSResult.field, of: request, maxBytes: 8192)
        let outcome = try await ProcessorAnswer.mapped { () async throws(ProcessorError) in
            try await processor.confirm(paymentID: id, threeDSResult: jwt)
        }
        logger.info("3DS confirmed", metadata: ["payment": "\(id)", "status": "\(outcome.status)"])
        return JSONOut.response(.ok, outcome.answer.json)
    }
}
