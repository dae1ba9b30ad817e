import Events
import Foundation
import Hummingbird
import SocketHTTP
import Store
import VaultCrypto

/// The events outbox (docs/events.md): `GET /v1/events` (newest first, cursor-paginated, filters
/// `type` — exact, or `payment.*` for an object's every type — `object`, `created[gte]`,
/// `created[lte]`) and `GET /v1/events/{event}` with its webhook delivery state. Roles: pay,
/// admin (events carry payments, customers and tokens' metadata of every caller of the store).
struct EventController: Sendable {
    let store: EventStore?

    static let endpoints: [SidecarEndpoint<Self>] = [
        .init(SidecarRoute(.get, "/v1/events", action: "event_list", access: [.pay, .admin])) { c, request, _ in try await c.list(request) },
        .init(SidecarRoute(.get, "/v1/events/{event}", action: "event_read", access: [.pay, .admin])) { c, _, context in
            try await c.get(context.parameters.get("event") ?? "")
        },
    ]

    func addRoutes<Context: RequestContext>(to group: RouterGroup<Context>) { group.add(Self.endpoints, controller: self) }

    /// The object types events are about, and the prefixes of their ids.
    static let objects: [String: String] = [
        "token": "tok_", "payment": "pay_", "refund": "re_", "customer": "cus_", "instrument": "ins_", "mandate": "man_",
        "velocity": "vel_", "fingerprint": "tok_",
    ]

    var events: EventStore {
        get throws(APIError) {
            guard let store else { throw APIError(.storeUnavailable, "events are not available on this sidecar") }
            return store
        }
    }

    func get(_ id: String) async throws -> Response {
        let events = try events
        guard Self.wellFormed(id) else { throw APIError(.eventNotFound, "no event with that id") }
        guard let event = try await ListController.store({ () throws(StoreError) in try await events.get(id) }) else {
            throw APIError(.eventNotFound, "no event with that id")
        }
        return JSONOut.response(.ok, AnswerJSON.encode(Answer.Event(event)))
    }

    func list(_ request: Request) async throws -> Response {
        let events = try events
        let p = try QueryParameters(request, allowed: ListController.common.union(["type", "object"]))
        var q = try ListController.query(p, cursorPrefix: "evt_")
        q.startingAfter = try Self.cursor(p)
        let type = try Self.type(p)
        let object = try Self.object(p)
        let page = try await ListController.store { () throws(StoreError) in try await events.list(q, type: type, object: object) }
        return try ListController.answer(page, Answer.Event.init)
    }

    /// `evt_` and 24 lower-case hex digits.
    static func wellFormed(_ id: String) -> Bool { EventRecord.seq(id) != nil }

    static func cursor(_ p: QueryParameters) throws(APIError) -> String? {
        guard let v = p["starting_after"] else { return nil }
        guard wellFormed(v) else { throw APIError(.requestFieldInvalid, "starting_after is an event id (evt_ and 24 hex digits)", field: "starting_after") }
        return v
    }

    /// `<object>.<what>` or `<object>.*`, of a known object.
    static func type(_ p: QueryParameters) throws(APIError) -> String? {
        guard let v = p["type"] else { return nil }
        let parts = v.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, objects[String(parts[0])] != nil, parts[1] == "*" || (1...32).contains(parts[1].utf8.count)
            && parts[1].utf8.allSatisfy({ (97...122).contains($0) || $0 == 95 })
        else {
            throw APIError(
                .requestFieldInvalid, "type is <object>.<change> or <object>.* (objects: \(objects.keys.sorted().joined(separator: ", ")))",
                field: "type")
        }
        return v
    }

    /// An id of an object events are about.
    static func object(_ p: QueryParameters) throws(APIError) -> String? {
        guard let v = p["object"] else { return nil }
        // A card-shaped token (docs/card-tokens.md) that fails the Luhn check: no card number does.
        if TokenID.isCardShaped(v, luhnValid: false) { return v }
        guard v.utf8.count <= 64, objects.values.contains(where: { v.hasPrefix($0) }),
              v.utf8.allSatisfy({ (48...57).contains($0) || (97...122).contains($0) || $0 == 95 })
        else {
            throw APIError(.requestFieldInvalid, "object is the id of a token, payment, refund, customer, instrument, mandate or velocity limit event", field: "object")
        }
        return v
    }
}

extension Answer {
    /// An event (openapi.json `Event`): the webhook's JSON (`EventRecord.json`: `data.object` is
    /// the store's snapshot, written as it is) and its `delivery`.
    struct Event: Encodable, Sendable {
        struct Data: Encodable, Sendable { let object: RawJSON }
        struct Delivery: Encodable, Sendable {
            let status: String
            let attempts: Int
            let last_attempt_at: OrNull<String>
            let last_status: OrNull<Int>
            let last_error: OrNull<String>
            let next_attempt_at: OrNull<String>
            let delivered_at: OrNull<String>
        }

        let id: String
        let object = "event"
        let type: String
        let created_at: String
        let data: Data
        let delivery: Delivery

        init(_ e: EventRecord) {
            id = e.id
            type = e.type
            created_at = JSONOut.iso(e.createdAt)
            data = Data(object: RawJSON(e.data))
            let d = e.delivery
            delivery = Delivery(
                status: d.delivered ? "delivered" : "pending", attempts: d.attempts, last_attempt_at: OrNull(d.lastAttemptAt.map(JSONOut.iso)),
                last_status: OrNull(d.lastStatus), last_error: OrNull(d.lastError),
                next_attempt_at: OrNull(d.delivered || d.attempts == 0 ? nil : d.nextAttemptAt.map(JSONOut.iso)),
                delivered_at: OrNull(d.deliveredAt.map(JSONOut.iso)))
        }
    }
}
