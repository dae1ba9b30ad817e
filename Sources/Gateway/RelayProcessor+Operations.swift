import GatewayAPI
import Store
import VaultCrypto

/// Capture, void and refund through the relay: its templates have no request for them yet, so
/// the relay refuses them before anything is sent (`OPERATION_NOT_SUPPORTED`, nothing changes on
/// the payment); the sandbox does them all (README "Capture, cancel, refund").
extension RelayProcessor {
    public func operate(_ request: OperationRequest) async throws(ProcessorError) -> GatewayOperationOutcome {
        throw Self.unsupported("a \(request.kind.rawValue)")
    }

    public func operation(_ operationID: String) async throws(ProcessorError) -> LedgerOperation? {
        do { return try await ledger.operation(operationID) } catch { throw .unavailable("the ledger failed (\(error.code))") }
    }

    static func unsupported(_ what: String) -> ProcessorError {
        .refused(.operationNotSupported, "the relay processor cannot send \(what): its template has no such request; nothing was sent")
    }
}
