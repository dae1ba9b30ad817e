import GatewayAPI
import VaultCrypto

/// Captures, voids and refunds through the gateway (`POST /v1/operations`): ids and amounts only,
/// never an envelope (the processor acts on its authorization's reference).
extension GatewayClient {
    /// What the gateway knows of an operation id (`GET /v1/operations/{id}`).
    public enum OperationState: Sendable, Equatable {
        case outcome(GatewayOperationOutcome)
        /// No row: never sent, nothing done.
        case notFound
        /// Sent, the outcome not known yet.
        case pending
    }

    /// Sends an operation; the outcome, or a `Failure` as for an authorization (`nothingSent`
    /// tells whether the intent may be dropped).
    public func operate(_ request: OperationRequest) async throws(Failure) -> GatewayOperationOutcome {
        let (status, text) = try await call("POST", "/v1/operations", body: request.json)
        if status == 200 {
            guard let outcome = GatewayOperationOutcome(json: text) else { throw .badAnswer("the gateway's answer is not an operation's outcome") }
            return outcome
        }
        let (code, message) = Self.error(text)
        if status == 504 { throw .outcomeUnknown(code, "the processor's answer was lost") }
        if status == 503 || code == .gatewayUnavailable { throw .processorUnavailable("the gateway could not reach the processor") }
        if status == 403 { throw .peerRefused }
        throw .refused(code, message)
    }

    /// What the gateway knows of an operation id.
    public func operation(_ id: String) async throws(Failure) -> OperationState {
        let (status, text) = try await call("GET", "/v1/operations/" + id, body: nil)
        switch status {
        case 200:
            guard let outcome = GatewayOperationOutcome(json: text) else { throw .badAnswer("the gateway's answer is not an operation's outcome") }
            return .outcome(outcome)
        case 404: return .notFound
        case 409: return .pending
        default: throw .badAnswer("the gateway answered \(status)")
        }
    }
}
