import GatewayAPI
import Hummingbird
import SocketHTTP

/// The sandbox ACS: `POST /v1/sandbox/acs/{transaction}` `{"action":"SUCCESS"}` completes a
/// challenge and answers its result JWT. `NOT_SANDBOX` for any other processor.
struct SandboxACSController: Sendable {
    let sandbox: SandboxProcessor?

    static let endpoints: [GatewayEndpoint<Self>] = [
        .init(GatewayRoute(.post, "/v1/sandbox/acs/{transaction}")) { c, request, context in
            try await c.complete(request, transaction: context.parameters.get("transaction") ?? "")
        }
    ]

    func addRoutes<Context: RequestContext>(to group: RouterGroup<Context>) { group.add(Self.endpoints, controller: self) }

    func complete(_ request: Request, transaction: String) async throws -> Response {
        guard let sandbox else { throw APIError(.notSandbox, "only the sandbox processor has an ACS") }
        let action = try await JSONBody.stringField("action", of: request, maxBytes: 16)
        let jwt = try await ProcessorAnswer.mapped { () async throws(ProcessorError) in
            try await sandbox.completeChallenge(transactionID: transaction, action: action)
        }
        return JSONOut.response(.ok, ThreeDSResult.json(jwt))
    }
}
