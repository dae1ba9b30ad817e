import Foundation
import Hummingbird
import Money
import Payments
import SocketHTTP
import VaultCrypto

/// Recurring mandates (roles: pay, admin).
struct MandateController: Sendable {
    let mandates: MandateService?
    let metrics: SidecarMetrics

    static let endpoints: [SidecarEndpoint<Self>] = [
        .init(SidecarRoute(.post, "/v1/customers/{customer}/mandates", action: "mandate_create", access: [.pay, .admin])) { c, request, context in
            try await c.create(request, customer: context.parameters.get("customer") ?? "")
        },
        .init(SidecarRoute(.get, "/v1/mandates/{mandate}", action: "mandate_read", access: [.pay, .admin])) { c, _, context in
            JSONOut.response(.ok, MandateService.json(try await c.service().mandate(context.parameters.get("mandate") ?? "")))
        },
        .init(SidecarRoute(.delete, "/v1/mandates/{mandate}", action: "mandate_cancel", access: [.pay, .admin])) { c, _, context in
            try await c.service().cancel(context.parameters.get("mandate") ?? "")
            return Response(status: .noContent)
        },
        .init(SidecarRoute(.post, "/v1/mandates/{mandate}/charges", action: "pay", access: [.pay, .admin])) { c, request, context in
            try await c.charge(request, mandate: context.parameters.get("mandate") ?? "")
        },
    ]

    func addRoutes<Context: RequestContext>(to group: RouterGroup<Context>) { group.add(Self.endpoints, controller: self) }

    func service() throws(APIError) -> MandateService { try SidecarRoutes.needGateway(mandates) }

    struct NewMandate {
        var instrument: String?, amount: Int?, maxAmount: Int?, currency: Currency?, interval: MandateRecord.Interval?
        var maxCycles: Int?, expires: Date?, key: String?
    }

    /// `{"instrument","amount","max_amount","currency","interval":"day|week|month","max_cycles","expires_at":"ISO 8601"}` → 201.
    /// An optional `idempotency_key` (or `Idempotency-Key` header) makes it idempotent: a replay → 200.
    func create(_ request: Request, customer: String) async throws -> Response {
        let service = try service()
        let header = try RequestFields.idempotencyKeyHeader(request, reservedPrefix: MandateService.keyPrefix)
        let m = try await JSONBody.parse(request) { (r: inout JSONReader) throws(VaultError) -> NewMandate in
            var m = NewMandate()
            try r.readObject { (r, key) throws(VaultError) in try Self.read(key, from: &r, into: &m) }
            return m
        }
        guard let amount = m.amount, let maxAmount = m.maxAmount, let currency = m.currency, let interval = m.interval,
              let maxCycles = m.maxCycles, let expires = m.expires
        else {
            throw APIError(.requestFieldMissing, "a mandate needs amount, max_amount, currency, interval, max_cycles and expires_at")
        }
        let (made, replayed) = try await service.create(
            customer: customer, instrument: m.instrument, amount: amount, maxAmount: maxAmount, currency: currency,
            interval: interval, maxCycles: maxCycles, expiresAt: expires, key: try IdempotentCreate.key(header: header, body: m.key),
            scope: Caller.paymentScope)
        return IdempotentCreate.response(MandateService.json(made), replayed: replayed)
    }

    static func read(_ key: String, from r: inout JSONReader, into m: inout NewMandate) throws(VaultError) {
        switch key {
        case "instrument": m.instrument = try RequestFields.id(&r, prefix: "ins_", field: "instrument")
        case "amount": m.amount = try RequestFields.amount(&r)
        case "max_amount": m.maxAmount = try RequestFields.amount(&r, field: "max_amount")
        case "currency": m.currency = try RequestFields.currency(&r)
        case "interval":
            guard let i = MandateRecord.Interval(rawValue: try r.readString(maxBytes: 8)) else {
                throw VaultError(.requestFieldInvalid, "interval is day, week or month", field: "interval")
            }
            m.interval = i
        case "max_cycles":
            let v = try r.readInt()
            guard (1...1000).contains(v) else { throw VaultError(.requestFieldInvalid, "max_cycles is 1 to 1000", field: "max_cycles") }
            m.maxCycles = v
        case "expires_at":
            let text = try r.readString(maxBytes: 40)
            guard let d = ISO8601DateFormatter().date(from: text) else {
                throw VaultError(.requestFieldInvalid, "expires_at is an ISO 8601 time such as 2027-01-31T00:00:00Z", field: "expires_at")
            }
            m.expires = d
        case "idempotency_key": m.key = try RequestFields.idempotencyKey(&r, reservedPrefix: MandateService.keyPrefix)
        default:
            throw VaultError(
                .requestFieldUnknown, "a mandate has instrument, amount, max_amount, currency, interval, max_cycles, expires_at (and idempotency_key)")
        }
    }

    /// `{"cycle":1,"amount":999}` (amount optional: the plan amount). Idempotent per cycle.
    func charge(_ request: Request, mandate id: String) async throws -> Response {
        let service = try service()
        let (cycle, amount) = try await JSONBody.parse(request) { (r: inout JSONReader) throws(VaultError) -> (Int, Int?) in
            var cycle: Int?, amount: Int?
            try r.readObject { (r, key) throws(VaultError) in
                switch key {
                case "cycle": cycle = try r.readInt(in: 0...1_000_000)
                case "amount": amount = try r.readInt(in: 0...Currency.maximumAmount)
                default: throw VaultError(.requestFieldUnknown, "a mandate charge has cycle and amount")
                }
            }
            return (try JSONBody.required(cycle, "cycle"), amount)
        }
        let (payment, created) = try await service.charge(id, cycle: cycle, amount: amount)
        return PaymentAnswer.response(payment, created: created, metrics: metrics)
    }
}
