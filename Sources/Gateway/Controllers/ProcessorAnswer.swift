import Foundation
import GatewayAPI
import Hummingbird
import Logging
import SocketHTTP

/// The processor's results as the gateway's HTTP answers (docs/errors.md "Unknown outcomes").
enum ProcessorAnswer {
    /// Processor errors of a 3-D Secure step as coded answers.
    static func mapped<T>(_ body: () async throws(ProcessorError) -> T) async throws(APIError) -> T {
        do throws(ProcessorError) {
            return try await body()
        } catch {
            switch error {
            case .refused(let code, let message): throw APIError(code, message)
            case .unavailable: throw APIError(.gatewayUnavailable, "the processor could not be reached")
            default: throw APIError(error.code, error.reason)
            }
        }
    }

    /// An authorization the processor did not answer with an outcome: an answer (pending, unknown
    /// past the deadline) or a coded refusal; counted and logged.
    static func failed(_ error: ProcessorError, paymentID id: String, metrics: GatewayMetrics, logger: Logger) throws(APIError) -> Response {
        switch error {
        case .paymentIDReused:
            throw APIError(.paymentIDReused, "this payment id was already used with another amount, currency or card")
        case .inProgress:
            // 504 like an unknown outcome: the sidecar keeps the payment processing and reconciles it.
            metrics.processorFailed("in_progress")
            logger.notice("authorization already in progress", metadata: ["payment": "\(id)"])
            throw APIError(.authorizationInProgress, "another call is sending this payment id to the processor or asking about it now; it is not sent again")
        case .pending(let pending):
            metrics.processorFailed("pending")
            logger.notice("authorization pending settlement", metadata: ["payment": "\(id)", "reason": "\(pending.reason)"])
            return JSONOut.response(.gatewayTimeout, pending.json)
        case .deadlinePassed(let reason, let attempts, let deadline):
            metrics.processorFailed("unknown_past_deadline")
            // The error line operators alert on is the settler's, once per payment id.
            logger.notice("answered unknown: past the settlement deadline", metadata: ["payment": "\(id)", "reason": "\(reason)"])
            return JSONOut.response(.ok, GatewayOutcome.unknownJSON(reason: reason, attempts: attempts, deadline: deadline))
        case .refused(let code, let message):
            metrics.processorFailed("refused")
            logger.error("relay refused to send", metadata: ["payment": "\(id)", "code": "\(code)"])
            throw APIError(code, message)
        case .outcomeUnknown(let reason):
            metrics.processorFailed("unknown")
            logger.error("processor outcome unknown", metadata: ["payment": "\(id)", "reason": "\(reason)"])
            throw APIError(.gatewayUnavailable, status: 504, "the processor's answer was lost or unclear; the outcome is not known yet and is being settled (GET /v1/authorizations/\(id))")
        case .unavailable(let reason):
            metrics.processorFailed("unavailable")
            logger.warning("processor unavailable", metadata: ["payment": "\(id)", "reason": "\(reason)"])
            throw APIError(.gatewayUnavailable, "nothing was charged (\(reason)); retry with the same payment id")
        }
    }
}

extension AuthorizationOutcome {
    /// The outcome as the gateway answers it.
    var answer: GatewayOutcome {
        switch self {
        case .succeeded(let reference), .authorized(let reference): GatewayOutcome(status: status, reference: reference)
        case .declined(let code, let reference): GatewayOutcome(status: status, declineCode: code, reference: reference)
        case .requiresAction(let c):
            GatewayOutcome(
                status: status, nextAction: GatewayOutcome.challenge(transactionID: c.transactionID, payload: c.payload, challengeURL: c.challengeURL))
        }
    }
}
