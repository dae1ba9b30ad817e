import Foundation
import Hummingbird
import Payments
import SocketHTTP
import Store
import Tokenizer
import VaultCrypto

/// Lists and searches (README "Listing and search"): `GET /v1/payments`, `/v1/refunds`,
/// `/v1/customers`, `/v1/instruments` and `/v1/tokens` (roles: pay, admin: a list shows every
/// caller's objects, so never to a tokenize-only caller). Newest first, cursor-paginated (`limit`, `starting_after`),
/// `{"object":"list","data":[…],"has_more":…}`, each item as the object's GET answers it; payments,
/// refunds, customers and tokens searched by `metadata[key]=value` (every pair given must match)
/// (customers without their `instruments`: list them with `GET /v1/instruments?customer=…`).
/// Store-wide: idempotency scopes keep keys apart, not objects, so every caller with the role
/// sees every object of the store.
struct ListController: Sendable {
    let tokenizer: Tokenizer
    let payments: PaymentService?
    let customers: CustomerService?

    static let endpoints: [SidecarEndpoint<Self>] = [
        .init(SidecarRoute(.get, "/v1/payments", action: "payment_list", access: [.pay, .admin])) { c, request, _ in try await c.payments(request) },
        .init(SidecarRoute(.get, "/v1/refunds", action: "refund_list", access: [.pay, .admin])) { c, request, _ in try await c.refunds(request) },
        .init(SidecarRoute(.get, "/v1/customers", action: "customer_list", access: [.pay, .admin])) { c, request, _ in try await c.customers(request) },
        .init(SidecarRoute(.get, "/v1/instruments", action: "instrument_list", access: [.pay, .admin])) { c, request, _ in
            try await c.instruments(request)
        },
        .init(SidecarRoute(.get, "/v1/tokens", action: "token_list", access: [.pay, .admin])) { c, request, _ in
            try await c.tokens(request)
        },
    ]

    func addRoutes<Context: RequestContext>(to group: RouterGroup<Context>) { group.add(Self.endpoints, controller: self) }

    /// The parameters every list has.
    static let common: Set<String> = ["limit", "starting_after", "created[gte]", "created[lte]"]

    /// `limit`, `starting_after` (an id with `cursorPrefix`), `created[gte]`, `created[lte]`
    /// (inclusive; `created[lte]` takes in the whole second it names, as answers show whole seconds).
    /// `cursor`: a `starting_after` already read (a card-shaped token's).
    static func query(_ p: QueryParameters, cursorPrefix: String, cursor: String? = nil) throws(APIError) -> ListQuery {
        let after: String? = if let cursor { cursor } else { try p.id("starting_after", prefix: cursorPrefix) }
        return ListQuery(
            limit: try p.int("limit", in: ListQuery.limits) ?? ListQuery.defaultLimit,
            startingAfter: after,
            createdFrom: try p.date("created[gte]"),
            createdTo: try p.date("created[lte]").map { $0.addingTimeInterval(0.999) })
    }

    /// The answer: 200 with the list; a cursor that names no object of the list is
    /// `REQUEST_FIELD_INVALID` (field `starting_after`).
    static func answer<T, Item: Encodable & Sendable>(_ page: ListPage<T>, _ model: (T) -> Item) throws(APIError) -> Response {
        guard case .page(let items, let hasMore) = page else {
            throw APIError(.requestFieldInvalid, "starting_after names no object of this list (unknown or deleted)", field: "starting_after")
        }
        return JSONOut.response(.ok, AnswerJSON.encode(Answer.List(data: items.map(model), has_more: hasMore)))
    }

    static func store<T>(_ body: () async throws(StoreError) -> T) async throws(APIError) -> T {
        do throws(StoreError) { return try await body() } catch { throw APIError(VaultError(store: error)) }
    }

    /// `status`, `customer` and the common parameters.
    func payments(_ request: Request) async throws -> Response {
        let service = try SidecarRoutes.needGateway(payments)
        let p = try QueryParameters(request, allowed: Self.common.union(["status", "customer"]), metadata: true)
        let q = try Self.query(p, cursorPrefix: "pay_")
        let status = try p.oneOf("status", PaymentRecord.Status.allCases.map(\.rawValue)).flatMap(PaymentRecord.Status.init(rawValue:))
        let customer = try p.id("customer", prefix: "cus_")
        let search = try p.metadataSearch()
        var page = try await Self.store { () throws(StoreError) in try await service.payments.list(q, status: status, customer: customer, metadata: search) }
        // An authorization past its expiry is shown as its GET shows it (marked as it is read).
        if case .page(var items, let more) = page, items.contains(where: { $0.status == .requiresCapture }) {
            for i in items.indices where items[i].status == .requiresCapture { items[i] = try await service.payment(items[i].id) }
            page = .page(items, hasMore: more)
        }
        return try Self.answer(page, Answer.Payment.init)
    }

    /// `status`, `payment` and the common parameters.
    func refunds(_ request: Request) async throws -> Response {
        let ops = try SidecarRoutes.needGateway(payments).operationStore()
        let p = try QueryParameters(request, allowed: Self.common.union(["status", "payment"]), metadata: true)
        let q = try Self.query(p, cursorPrefix: "re_")
        let status = try p.oneOf("status", PaymentOperation.Status.allCases.map(\.rawValue)).flatMap(PaymentOperation.Status.init(rawValue:))
        let payment = try p.id("payment", prefix: "pay_")
        let search = try p.metadataSearch()
        let page = try await Self.store { () throws(StoreError) in try await ops.listRefunds(q, status: status, payment: payment, metadata: search) }
        return try Self.answer(page, Answer.Refund.init)
    }

    func customerService() throws(APIError) -> CustomerService {
        guard let customers else { throw APIError(.storeUnavailable, "customers are not available on this sidecar") }
        return customers
    }

    /// The common parameters.
    func customers(_ request: Request) async throws -> Response {
        let store = try customerService().customers
        let p = try QueryParameters(request, allowed: Self.common, metadata: true)
        let q = try Self.query(p, cursorPrefix: "cus_")
        let search = try p.metadataSearch()
        let page = try await Self.store { () throws(StoreError) in try await store.list(q, metadata: search) }
        return try Self.answer(page) { Answer.Customer($0, nil) }
    }

    /// `fingerprint` (the card's keyed fingerprint), `customer` (without it, across customers:
    /// admin role only) and the common parameters.
    func instruments(_ request: Request) async throws -> Response {
        let store = try customerService().customers
        let p = try QueryParameters(request, allowed: Self.common.union(["fingerprint", "customer"]))
        let q = try Self.query(p, cursorPrefix: "ins_")
        let fingerprint = try p.fingerprint(), customer = try p.id("customer", prefix: "cus_")
        // Which customers hold a card is an admin's question (docs/dedupe.md): a pay caller lists
        // and searches the instruments of one customer (every instrument answered names its
        // customer and fingerprint, so a list across customers answers it too).
        if customer == nil, Caller.current?.roles.contains(.admin) != true {
            throw APIError(.peerNotAllowed, "listing instruments across customers needs the admin role: give customer=cus_…")
        }
        let page = try await Self.store { () throws(StoreError) in try await store.listInstruments(q, fingerprint: fingerprint, customer: customer) }
        return try Self.answer(page, Answer.Instrument.init)
    }

    /// `fingerprint` (the gateway's fingerprint of the card) and the common parameters: live tokens, metadata only.
    func tokens(_ request: Request) async throws -> Response {
        let p = try QueryParameters(request, allowed: Self.common.union(["fingerprint"]), metadata: true)
        let cardShaped = p["starting_after"].flatMap { TokenID.isCardShaped($0, luhnValid: tokenizer.policy.cardTokenLuhnValid) ? $0 : nil }
        let q = try Self.query(p, cursorPrefix: "tok_", cursor: cardShaped)
        let fingerprint = try p.fingerprint()
        let search = try p.metadataSearch()
        let page: ListPage<TokenRecord>
        do throws(VaultError) { page = try await tokenizer.list(q, fingerprint: fingerprint, metadata: search) } catch { throw APIError(error) }
        return try Self.answer(page, Answer.Token.init)
    }
}
