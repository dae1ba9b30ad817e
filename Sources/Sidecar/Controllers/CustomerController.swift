import Hummingbird
import Payments
import SocketHTTP
import VaultCrypto

/// Customers and their stored instruments (roles: pay, admin).
struct CustomerController: Sendable {
    let customers: CustomerService?

    static let endpoints: [SidecarEndpoint<Self>] = [
        .init(SidecarRoute(.post, "/v1/customers", action: "customer_create", access: [.pay, .admin])) { c, request, _ in
            try await c.create(request)
        },
        .init(SidecarRoute(.get, "/v1/customers/{customer}", action: "customer_read", access: [.pay, .admin])) { c, _, context in
            try await c.show(context.parameters.get("customer") ?? "", status: .ok)
        },
        .init(SidecarRoute(.post, "/v1/customers/{customer}/instruments", action: "attach", access: [.pay, .admin])) { c, request, context in
            try await c.attach(request, customer: context.parameters.get("customer") ?? "")
        },
        .init(SidecarRoute(.post, "/v1/customers/{customer}/default_instrument", action: "set_default", access: [.pay, .admin])) {
            c, request, context in try await c.setDefault(request, customer: context.parameters.get("customer") ?? "")
        },
        .init(SidecarRoute(.delete, "/v1/customers/{customer}/instruments/{instrument}", action: "detach", access: [.pay, .admin])) {
            c, _, context in
            try await c.service().detach(
                customer: context.parameters.get("customer") ?? "", instrument: context.parameters.get("instrument") ?? "")
            return Response(status: .noContent)
        },
    ]

    func addRoutes<Context: RequestContext>(to group: RouterGroup<Context>) { group.add(Self.endpoints, controller: self) }

    func service() throws(APIError) -> CustomerService {
        guard let customers else { throw APIError(.storeUnavailable, "customers are not available on this sidecar") }
        return customers
    }

    /// An empty body, or `{"reference":"…"}` → 201 with the customer.
    func create(_ request: Request) async throws -> Response {
        let service = try service()
        var reference: String?
        if let length = request.headers[.contentLength], length != "0" {
            reference = try await JSONBody.parse(request) { (r: inout JSONReader) throws(VaultError) -> String? in
                var ref: String?
                try r.readObject { (r, key) throws(VaultError) in
                    guard key == "reference" else { throw VaultError(.requestFieldUnknown, "a customer has only reference") }
                    ref = try RequestFields.freeText(r.readString(maxBytes: 128), field: "reference")
                }
                return ref
            }
        }
        let c = try await service.create(reference: reference)
        AuditNote.current?.customer = c.id
        return JSONOut.response(.created, CustomerService.json(c, []))
    }

    /// The customer and its instruments.
    func show(_ id: String, status: HTTPResponse.Status) async throws -> Response {
        let (c, instruments) = try await service().customer(id)
        return JSONOut.response(status, CustomerService.json(c, instruments))
    }

    /// `{"token":"tok_…","default":true}`: the token becomes a reusable instrument (CVC dropped).
    func attach(_ request: Request, customer: String) async throws -> Response {
        let service = try service()
        let (token, makeDefault) = try await JSONBody.parse(request) { (r: inout JSONReader) throws(VaultError) -> (String, Bool) in
            var token: String?, makeDefault = false
            try r.readObject { (r, key) throws(VaultError) in
                switch key {
                case "token": token = try RequestFields.freeText(r.readString(maxBytes: 64), field: "token")
                case "default": makeDefault = try r.readBool()
                default: throw VaultError(.requestFieldUnknown, "attach takes token and default")
                }
            }
            return (try JSONBody.required(token, "token"), makeDefault)
        }
        let i = try await service.attach(customer: customer, token: token, makeDefault: makeDefault)
        return JSONOut.response(.created, CustomerService.instrumentJSON(i))
    }

    /// `{"instrument":"ins_…"}` → 200 with the customer.
    func setDefault(_ request: Request, customer: String) async throws -> Response {
        let service = try service()
        let instrument = try RequestFields.freeText(
            try await JSONBody.stringField("instrument", of: request, maxBytes: 64), field: "instrument")
        try await service.setDefault(customer: customer, instrument: instrument)
        return try await show(customer, status: .ok)
    }
}
