import CardRules
import Foundation
import Hummingbird
import Money
import Payments
import SocketHTTP
import Tokenizer
import VaultCrypto

/// Checkout sessions: a `pay`/`admin` caller fixes what may be paid; a `tokenize` caller pays
/// exactly that, once, with one card, before the session expires.
public struct SessionService: Sendable {
    let sessions: any SessionStore
    let payments: PaymentService
    let tokenizer: Tokenizer
    let now: @Sendable () -> Date

    public init(sessions: any SessionStore, payments: PaymentService, tokenizer: Tokenizer, now: @escaping @Sendable () -> Date = Date.init) {
        self.sessions = sessions
        self.payments = payments
        self.tokenizer = tokenizer
        self.now = now
    }

    /// Longest session lifetime.
    public static let maxTTL: Double = 3600

    public func create(amount: Int, currency: Currency, acceptedBrands: [CardBrand], customer: String?, ttl: Double) async throws(APIError) -> SessionRecord {
        let t = now()
        let s = SessionRecord(
            id: RandomID.make(prefix: "sess_"), amount: amount, currency: currency.code, acceptedBrands: acceptedBrands.map(\.rawValue),
            customer: customer, createdAt: t, expiresAt: t.addingTimeInterval(ttl))
        try await store { () throws(PaymentStoreError) in try await sessions.createSession(s) }
        return s
    }

    public func session(_ id: String) async throws(APIError) -> SessionRecord {
        guard let s = try await store({ () throws(PaymentStoreError) in try await sessions.session(id) }) else {
            throw APIError(.notFound, "SESSION_NOT_FOUND", "no checkout session with that id")
        }
        return s
    }

    /// Tokenizes `tokenize()`'s card and pays the session's amount with it. A replay of the
    /// idempotency key returns the first payment; a declined card leaves the session open.
    public func pay(
        _ id: String, idempotencyKey: String, tokenize: () async throws(APIError) -> TokenRecord
    ) async throws(APIError) -> (PaymentRecord, Bool) {
        let s = try await session(id)
        guard let currency = Currency(s.currency) else { throw APIError(.unprocessableContent, "CURRENCY_INVALID", "the session's currency is not valid") }
        if s.status == .completed, let paid = s.paymentID, let p = try? await payments.payment(paid),
           p.idempotencyKey == idempotencyKey {
            return (p, false)   // a replay of the request that completed the session
        }
        guard now() < s.expiresAt else { throw APIError(.gone, "SESSION_EXPIRED", "this checkout session has expired") }
        guard s.status == .open else { throw APIError(.conflict, "SESSION_USED", "this checkout session was already used") }
        let token = try await tokenize()
        guard s.acceptedBrands.isEmpty || s.acceptedBrands.contains(token.card.brand.rawValue) else {
            _ = try? await tokenizer.store.delete(token.token)
            throw APIError(.unprocessableContent, "SESSION_BRAND_NOT_ACCEPTED", "this session accepts \(s.acceptedBrands.joined(separator: ", ")) only")
        }
        guard try await store({ () throws(PaymentStoreError) in try await sessions.transitionSession(id, from: .open, to: .paying, paymentID: nil) }) else {
            _ = try? await tokenizer.store.delete(token.token)
            throw APIError(.conflict, "SESSION_USED", "this checkout session was already used")
        }
        let result: (payment: PaymentRecord, created: Bool)
        do throws(APIError) {
            result = try await payments.pay(.init(source: .token(token.token), amount: s.amount, currency: currency, idempotencyKey: idempotencyKey))
        } catch {
            // Reopen only when nothing can have been charged: no payment left, or a refused one.
            // A payment still processing (outcome unknown) keeps the session claimed.
            let left = try? await payments.payments.find(idempotencyKey: idempotencyKey)
            if let left, left.status != .failed {
                _ = try? await sessions.transitionSession(id, from: .paying, to: .paying, paymentID: left.id)
            } else {
                _ = try? await sessions.transitionSession(id, from: .paying, to: .open, paymentID: nil)
            }
            throw error
        }
        let done = result.payment.status == .succeeded || result.payment.status == .requiresAction
        _ = try? await sessions.transitionSession(id, from: .paying, to: done ? .completed : .open, paymentID: done ? result.payment.id : nil)
        return result
    }

    private func store<T>(_ body: () async throws(PaymentStoreError) -> T) async throws(APIError) -> T {
        do throws(PaymentStoreError) { return try await body() } catch {
            throw APIError(.serviceUnavailable, error.code.rawValue, error.message)
        }
    }

    public static func json(_ s: SessionRecord, now: Date = Date()) -> String {
        let status = s.status == .open && now >= s.expiresAt ? "expired" : s.status.rawValue
        var out = "{\"id\":\"\(s.id)\",\"status\":\"\(status)\",\"amount\":\(s.amount),\"currency\":\"\(s.currency)\""
        out += ",\"accepted_brands\":[" + s.acceptedBrands.map { "\"\($0)\"" }.joined(separator: ",") + "]"
        out += ",\"customer\":"
        if let c = s.customer { JSONOut.string(c, into: &out) } else { out += "null" }
        out += ",\"payment\":" + (s.paymentID.map { "\"\($0)\"" } ?? "null")
        out += ",\"created_at\":\"\(SidecarRoutes.iso(s.createdAt))\",\"expires_at\":\"\(SidecarRoutes.iso(s.expiresAt))\"}"
        return out
    }
}
