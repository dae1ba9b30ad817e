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
        .init(SidecarRoute(.post, "/v1/customers/{customer}", action: "customer_update", access: [.pay, .admin])) { c, request, context in
            try await c.update(request, customer: context.parameters.get("customer") ?? "")
        },
        .init(SidecarRoute(.delete, "/v1/customers/{customer}", action: "customer_delete", access: [.pay, .admin])) { c, _, context in
            let erasure = try await c.service().delete(context.parameters.get("customer") ?? "")
            AuditNote.current?.customer = erasure.customer
            return JSONOut.response(.ok, CustomerService.erasureJSON(erasure))
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

    /// An empty body, or `{"reference":"…","metadata":{…},"idempotency_key":"…"}` (or the `Idempotency-Key`
    /// header) → 201 with the customer; a retry of the same request with the same key → 200 with
    /// the customer it made, marked `Idempotent-Replayed: true`.
    func create(_ request: Request) async throws -> Response {
        let service = try service()
        let header = try RequestFields.idempotencyKeyHeader(request, reservedPrefix: MandateService.keyPrefix)
        var reference: String?, bodyKey: String?, metadata = Metadata()
        // The body itself says whether there is one: a chunked body has no Content-Length, and
        // was skipped unread, and with it the card-number check, the size limit and the
        // idempotency key (outside audit).
        if let parsed = try await JSONBody.parseIfAny(request, {
                (r: inout JSONReader) throws(VaultError) -> (String?, String?, Metadata) in
                var ref: String?, key: String?, metadata = Metadata()
                try r.readObject { (r, key_) throws(VaultError) in
                    switch key_ {
                    case "reference": ref = try RequestFields.freeText(r.readString(maxBytes: 128), field: "reference")
                    case "metadata": metadata = try RequestFields.metadata(&r)
                    case "idempotency_key": key = try RequestFields.idempotencyKey(&r, reservedPrefix: MandateService.keyPrefix)
                    default: throw VaultError(.requestFieldUnknown, "a customer has reference, metadata (and idempotency_key)")
                    }
                }
                return (ref, key, metadata)
            }) {
            (reference, bodyKey, metadata) = parsed
        }
        let key = try IdempotentCreate.key(header: header, body: bodyKey)
        let (c, replayed) = try await service.create(reference: reference, metadata: metadata, key: key, scope: Caller.paymentScope)
        AuditNote.current?.customer = c.id
        let instruments = replayed ? try await service.customer(c.id).1 : []
        return IdempotentCreate.response(CustomerService.json(c, instruments), replayed: replayed)
    }

    /// `{"reference":"…"|null,"default_instrument":"ins_…","metadata":{…}}` (any of them) → 200 with
    /// the customer. Metadata is merged: a key given a value is set, a key given `""` removed.
    func update(_ request: Request, customer: String) async throws -> Response {
        let service = try service()
        let change = try await JSONBody.parse(request) { (r: inout JSONReader) throws(VaultError) -> CustomerChange in
            var change = CustomerChange()
            try r.readObject { (r, key) throws(VaultError) in
                switch key {
                case "reference":
                    change.reference = r.readNullIfPresent() ? .some(nil) : try RequestFields.freeText(r.readString(maxBytes: 128), field: "reference")
                case "default_instrument":
                    change.defaultInstrument = try RequestFields.freeText(r.readString(maxBytes: 64), field: "default_instrument")
                case "metadata": change.metadata = try RequestFields.metadata(&r)
                default: throw VaultError(.requestFieldUnknown, "a customer update has reference, default_instrument and metadata")
                }
            }
            guard change.reference != nil || change.defaultInstrument != nil || change.metadata != nil else {
                throw VaultError(.requestFieldMissing, "send reference, default_instrument and/or metadata", field: "reference")
            }
            return change
        }
        AuditNote.current?.customer = customer
        try await service.update(customer, change)
        return try await show(customer, status: .ok)
    }

    /// The customer and its instruments.
    func show(_ id: String, status: HTTPResponse.Status) async throws -> Response {
        let (c, instruments) = try await service().customer(id)
        return JSONOut.response(status, CustomerService.json(c, instruments))
    }

    /// `{"token":"tok_…" (or a card-shaped token),"default":true}`: the token becomes a reusable
    /// instrument (CVC dropped), or the customer's instrument of the same card.
    func attach(_ request: Request, customer: String) async throws -> Response {
        let service = try service()
        let luhnValid = service.tokenizer.policy.cardTokenLuhnValid
        let (token, makeDefault) = try await JSONBody.parse(request) { (r: inout JSONReader) throws(VaultError) -> (String, Bool) in
            var token: String?, makeDefault = false
            try r.readObject { (r, key) throws(VaultError) in
                switch key {
                case "token": token = try TokenID.read(&r, luhnValid: luhnValid, prefixed: false)
                case "default": makeDefault = try r.readBool()
                default: throw VaultError(.requestFieldUnknown, "attach takes token and default")
                }
            }
            return (try JSONBody.required(token, "token"), makeDefault)
        }
        // 201 with a new instrument; 200 with the one the customer held for this card (docs/dedupe.md).
        let (i, reused) = try await service.attach(customer: customer, token: token, makeDefault: makeDefault)
        return JSONOut.response(reused ? .ok : .created, CustomerService.instrumentJSON(i))
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
