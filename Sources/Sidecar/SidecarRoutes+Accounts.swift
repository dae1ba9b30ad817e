import CardRules
import Foundation
import HTTPTypes
import Hummingbird
import Money
import Payments
import SocketHTTP
import Tokenizer
import VaultCrypto

/// The routes of customers, stored instruments, checkout sessions and mandates (roles: pay, admin;
/// a session is paid by a tokenize-role caller).
extension SidecarRoutes {
    func sessionService() throws(APIError) -> SessionService {
        guard let sessions else {
            throw APIError(.gatewayUnavailable, "this sidecar has no gateway (vault serve --gateway PATH)")
        }
        return sessions
    }

    /// Checkout sessions: created by pay/admin, paid by tokenize with one card.
    func registerSessions<Context: RequestContext>(on router: Router<Context>) {
        // `{"amount","currency","accepted_brands":["visa",…],"customer":"cus_…","ttl_seconds":900}`
        router.post("/v1/sessions") { request, _ in
            let service = try self.sessionService()
            let body = try await Self.readJSONBody(request)
            let (amount, currency, brands, customer, ttl) = try body.withUnsafeBytes { raw in
                try Self.parse(raw) { (r: inout JSONReader) throws(VaultError) -> (Int, Currency, [CardBrand], String?, Double) in
                    var amount: Int?, currency: Currency?, brands: [CardBrand] = [], customer: String?, ttl = 900.0
                    try r.readObject { (r, key) throws(VaultError) in
                        switch key {
                        case "amount": amount = try RequestFields.amount(&r)
                        case "currency": currency = try RequestFields.currency(&r)
                        case "accepted_brands":
                            try r.readArray { r throws(VaultError) in
                                let b = CardBrand(rawValue: try r.readString(maxBytes: 32))
                                guard CardBrand.all.contains(b) else {
                                    throw VaultError(.requestFieldInvalid, "unknown brand \(JSONReader.printable(b.rawValue))", field: "accepted_brands")
                                }
                                brands.append(b)
                            }
                        case "customer": customer = try RequestFields.id(&r, prefix: "cus_", field: "customer")
                        case "ttl_seconds":
                            let t = try r.readInt()
                            guard (1...Int(SessionService.maxTTL)).contains(t) else {
                                throw VaultError(.requestFieldInvalid, "ttl_seconds is 1 to 3600", field: "ttl_seconds")
                            }
                            ttl = Double(t)
                        default: throw VaultError(.requestFieldUnknown, "a session has amount, currency, accepted_brands, customer and ttl_seconds")
                        }
                    }
                    guard let amount else { throw VaultError(.requestFieldMissing, "amount is missing", field: "amount") }
                    guard let currency else { throw VaultError(.requestFieldMissing, "currency is missing", field: "currency") }
                    return (amount, currency, brands, customer, ttl)
                }
            }
            let session = try await service.create(amount: amount, currency: currency, acceptedBrands: brands, customer: customer, ttl: ttl)
            return JSONOut.response(.created, SessionService.json(session))
        }
        router.get("/v1/sessions/:session") { _, context in
            JSONOut.response(.ok, SessionService.json(try await self.sessionService().session(context.parameters.get("session") ?? "")))
        }
        // `{"card":{…}}` or `{"envelope":{…}}`, and `idempotency_key`: tokenize and pay the session.
        router.post("/v1/sessions/:session/pay") { request, context in
            let service = try self.sessionService()
            let body = try await Self.readJSONBody(request)
            let (input, key): (CardInput, String) = try body.withUnsafeBytes { raw in
                try Self.parse(raw) { (r: inout JSONReader) throws(VaultError) -> (CardInput, String) in
                    var found: CardInput?, key: String?
                    try r.readObject { (r, field) throws(VaultError) in
                        switch field {
                        case "card":
                            guard found == nil else { throw VaultError(.requestAmbiguous, "give either card or envelope", field: field) }
                            found = .card(try CardData.parse(from: &r, fieldPrefix: "card."))
                        case "envelope":
                            guard found == nil else { throw VaultError(.requestAmbiguous, "give either card or envelope", field: field) }
                            found = .envelope(try CardEnvelope.parse(from: &r))
                        case "idempotency_key": key = try RequestFields.idempotencyKey(&r)
                        default: throw VaultError(.requestFieldUnknown, "a session payment has card or envelope, and idempotency_key")
                        }
                    }
                    guard let found else { throw VaultError(.requestFieldMissing, "give card or envelope", field: "card") }
                    guard let key else { throw VaultError(.requestFieldMissing, "idempotency_key is missing", field: "idempotency_key") }
                    return (found, key)
                }
            }
            let (payment, created) = try await service.pay(context.parameters.get("session") ?? "", idempotencyKey: key) { () throws(APIError) in
                try await self.call { () throws(VaultError) in
                    switch input {
                    case .card(let card): try await self.tokenizer.tokenize(card)
                    case .envelope(let envelope): try await self.tokenizer.tokenize(envelope: envelope)
                    }
                }
            }
            metrics.payment(status: payment.status.rawValue, replayed: !created)
            // A tokenize-only caller (a checkout page's server) learns that the card was declined,
            // not why: the precise code stays on the payment, for pay/admin callers.
            var shown = payment
            if shown.status == .declined, Caller.current?.isTokenizeOnly == true { shown.code = PaymentService.genericDeclineCode }
            return JSONOut.response(Self.httpStatus(of: payment, created: created), Self.noted(shown))
        }
    }

    /// A card to tokenize: in clear (sealed at the door) or already sealed by the caller.
    enum CardInput { case card(CardData), envelope(CardEnvelope) }

    func mandateService() throws(APIError) -> MandateService {
        guard let mandates else {
            throw APIError(.gatewayUnavailable, "this sidecar has no gateway (vault serve --gateway PATH)")
        }
        return mandates
    }

    /// Recurring mandates (roles: pay, admin).
    func registerMandates<Context: RequestContext>(on router: Router<Context>) {
        // `{"instrument","amount","max_amount","currency","interval":"day|week|month","max_cycles","expires_at":"ISO 8601"}`
        router.post("/v1/customers/:customer/mandates") { request, context in
            let service = try self.mandateService()
            let body = try await Self.readJSONBody(request)
            typealias Fields = (String?, Int, Int, Currency, MandateRecord.Interval, Int, Date)
            let f: Fields = try body.withUnsafeBytes { raw in
                try Self.parse(raw) { (r: inout JSONReader) throws(VaultError) -> Fields in
                    var instrument: String?, amount: Int?, maxAmount: Int?, currency: Currency?, interval: MandateRecord.Interval?
                    var maxCycles: Int?, expires: Date?
                    try r.readObject { (r, key) throws(VaultError) in
                        switch key {
                        case "instrument": instrument = try RequestFields.id(&r, prefix: "ins_", field: "instrument")
                        case "amount": amount = try RequestFields.amount(&r)
                        case "max_amount": maxAmount = try RequestFields.amount(&r, field: "max_amount")
                        case "currency": currency = try RequestFields.currency(&r)
                        case "interval":
                            guard let i = MandateRecord.Interval(rawValue: try r.readString(maxBytes: 8)) else {
                                throw VaultError(.requestFieldInvalid, "interval is day, week or month", field: "interval")
                            }
                            interval = i
                        case "max_cycles":
                            let v = try r.readInt()
                            guard (1...1000).contains(v) else { throw VaultError(.requestFieldInvalid, "max_cycles is 1 to 1000", field: "max_cycles") }
                            maxCycles = v
                        case "expires_at":
                            let text = try r.readString(maxBytes: 40)
                            guard let d = ISO8601DateFormatter().date(from: text) else {
                                throw VaultError(.requestFieldInvalid, "expires_at is an ISO 8601 time such as 2027-01-31T00:00:00Z", field: "expires_at")
                            }
                            expires = d
                        default: throw VaultError(.requestFieldUnknown, "a mandate has instrument, amount, max_amount, currency, interval, max_cycles, expires_at")
                        }
                    }
                    guard let amount, let maxAmount, let currency, let interval, let maxCycles, let expires else {
                        throw VaultError(.requestFieldMissing, "a mandate needs amount, max_amount, currency, interval, max_cycles and expires_at")
                    }
                    return (instrument, amount, maxAmount, currency, interval, maxCycles, expires)
                }
            }
            let m = try await service.create(
                customer: context.parameters.get("customer") ?? "", instrument: f.0, amount: f.1, maxAmount: f.2, currency: f.3,
                interval: f.4, maxCycles: f.5, expiresAt: f.6)
            return JSONOut.response(.created, MandateService.json(m))
        }
        router.get("/v1/mandates/:mandate") { _, context in
            JSONOut.response(.ok, MandateService.json(try await self.mandateService().mandate(context.parameters.get("mandate") ?? "")))
        }
        router.delete("/v1/mandates/:mandate") { _, context in
            try await self.mandateService().cancel(context.parameters.get("mandate") ?? "")
            return Response(status: .noContent)
        }
        // `{"cycle":1,"amount":999}` (amount optional: the plan amount). Idempotent per cycle.
        router.post("/v1/mandates/:mandate/charges") { request, context in
            let service = try self.mandateService()
            let body = try await Self.readJSONBody(request)
            let (cycle, amount): (Int, Int?) = try body.withUnsafeBytes { raw in
                try Self.parse(raw) { (r: inout JSONReader) throws(VaultError) -> (Int, Int?) in
                    var cycle: Int?, amount: Int?
                    try r.readObject { (r, key) throws(VaultError) in
                        switch key {
                        case "cycle": cycle = try r.readInt(in: 0...1_000_000)
                        case "amount": amount = try r.readInt(in: 0...Currency.maximumAmount)
                        default: throw VaultError(.requestFieldUnknown, "a mandate charge has cycle and amount")
                        }
                    }
                    guard let cycle else { throw VaultError(.requestFieldMissing, "cycle is missing", field: "cycle") }
                    return (cycle, amount)
                }
            }
            let (payment, created) = try await service.charge(context.parameters.get("mandate") ?? "", cycle: cycle, amount: amount)
            metrics.payment(status: payment.status.rawValue, replayed: !created)
            return JSONOut.response(Self.httpStatus(of: payment, created: created), Self.noted(payment))
        }
    }

    func customerService() throws(APIError) -> CustomerService {
        guard let customers else { throw APIError(.storeUnavailable, "customers are not available on this sidecar") }
        return customers
    }

    /// Customers and stored instruments (roles: pay, admin).
    func registerCustomers<Context: RequestContext>(on router: Router<Context>) {
        router.post("/v1/customers") { request, _ in
            let service = try self.customerService()
            var reference: String?
            if let length = request.headers[.contentLength], length != "0" {
                let body = try await Self.readJSONBody(request)
                reference = try body.withUnsafeBytes { raw in
                    try Self.parse(raw) { (r: inout JSONReader) throws(VaultError) -> String? in
                        var ref: String?
                        try r.readObject { (r, key) throws(VaultError) in
                            guard key == "reference" else { throw VaultError(.requestFieldUnknown, "a customer has only reference") }
                            ref = try RequestFields.freeText(r.readString(maxBytes: 128), field: "reference")
                        }
                        return ref
                    }
                }
            }
            let c = try await service.create(reference: reference)
            AuditNote.current?.customer = c.id
            return JSONOut.response(.created, CustomerService.json(c, []))
        }
        router.get("/v1/customers/:customer") { _, context in
            let (c, instruments) = try await self.customerService().customer(context.parameters.get("customer") ?? "")
            return JSONOut.response(.ok, CustomerService.json(c, instruments))
        }
        // `{"token":"tok_…","default":true}`: the token becomes a reusable instrument (CVC dropped).
        router.post("/v1/customers/:customer/instruments") { request, context in
            let service = try self.customerService()
            let body = try await Self.readJSONBody(request)
            let (token, makeDefault) = try body.withUnsafeBytes { raw in
                try Self.parse(raw) { (r: inout JSONReader) throws(VaultError) -> (String, Bool) in
                    var token: String?, makeDefault = false
                    try r.readObject { (r, key) throws(VaultError) in
                        switch key {
                        case "token": token = try RequestFields.freeText(r.readString(maxBytes: 64), field: "token")
                        case "default": makeDefault = try r.readBool()
                        default: throw VaultError(.requestFieldUnknown, "attach takes token and default")
                        }
                    }
                    guard let token else { throw VaultError(.requestFieldMissing, "token is missing", field: "token") }
                    return (token, makeDefault)
                }
            }
            let i = try await service.attach(customer: context.parameters.get("customer") ?? "", token: token, makeDefault: makeDefault)
            return JSONOut.response(.created, CustomerService.instrumentJSON(i))
        }
        router.post("/v1/customers/:customer/default_instrument") { request, context in
            let service = try self.customerService()
            let id = context.parameters.get("customer") ?? ""
            let instrument = try await Self.stringField("instrument", of: request, maxBytes: 64)
            do throws(VaultError) { _ = try RequestFields.freeText(instrument, field: "instrument") } catch { throw APIError(error) }
            try await service.setDefault(customer: id, instrument: instrument)
            let (c, instruments) = try await service.customer(id)
            return JSONOut.response(.ok, CustomerService.json(c, instruments))
        }
        router.delete("/v1/customers/:customer/instruments/:instrument") { _, context in
            try await self.customerService().detach(
                customer: context.parameters.get("customer") ?? "", instrument: context.parameters.get("instrument") ?? "")
            return Response(status: .noContent)
        }
    }
}
