import Foundation
import Gateway
import GatewayAPI
import Testing
import VaultCrypto

/// The relay and the payment lifecycle: its templates have no capture, void or refund request, so
/// it refuses them (and `capture: false`) with `OPERATION_NOT_SUPPORTED` before anything is sent;
/// the ledger keeps no row for a refused operation.
@Suite struct RelayOperationTests {
    @Test(arguments: OperationRequest.Kind.allCases)
    func theRelayRefusesOperationsBeforeSending(kind: OperationRequest.Kind) async throws {
        let f = try GatewayRouteTests.Fixture()
        defer { f.remove() }
        let relay = try await RelayProcessorTests.load(RelayProcessorTests.template(url: "https://processor.invalid/v1/charges"), dir: f.dir)
        let request = OperationRequest(operationID: "re_" + RandomID.make(prefix: "").lowercased(), kind: kind, paymentID: "pay_x", amount: 100, currency: "EUR")
        await #expect(throws: ProcessorError.refused(.operationNotSupported, "the relay processor cannot send a \(kind.rawValue): its template has no such request; nothing was sent")) {
            try await relay.operate(request)
        }
        #expect(try await relay.operation(request.operationID) == nil)
    }
}
