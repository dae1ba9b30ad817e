import CardRules
import Foundation
import Hummingbird
import Money
import Payments
import SocketHTTP
import Store
import Tokenizer
import VaultCrypto

/// Checkout sessions: a `pay`/`admin` caller fixes what may be paid; a `tokenize` caller pays
/// exactly that, once, with one card, before the session expires.
public struct SessionService: Sendable {
    let sessions: any SessionStore
    let payments: PaymentService
    let tokenizer: Tokenizer
    /// Payment attempts a session allows before it is closed (`session_max_attempts`).
    let maxAttempts: Int
    /// Velocity limits (docs/velocity.md): the session's tokenize here, its payment in `PaymentService`.
    var velocity: VelocityLimiter? { payments.velocity }
    let now: @Sendable () -> Date

    public init(
        sessions: any SessionStore, payments: PaymentService, tokenizer: Tokenizer, maxAttempts: Int = SessionService.defaultMaxAttempts,
        now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.sessions = sessions
        self.payments = payments
        self.tokenizer = tokenizer
        self.maxAttempts = max(1, maxAttempts)
        self.now = now
    }

    /// Longest session lifetime.
    public static let maxTTL: Double = 3600
    /// Default of `session_max_attempts`.
    public static let defaultMaxAttempts = 3

    /// Makes a session; with an idempotency key (`key`, in the caller's `scope`), a retry of the
    /// same request answers the session made the first time (`replayed`), as it is now.
    public func create(
        amount: Int, currency: Currency, acceptedBrands: [CardBrand], customer: String?, ttl: Double, key: String? = nil, scope: String = "global"
    ) async throws(VaultError) -> (SessionRecord, replayed: Bool) {
        let t = now()
        let s = SessionRecord(
            id: RandomID.make(prefix: "sess_"), amount: amount, currency: currency.code, acceptedBrands: acceptedBrands.map(\.rawValue),
            customer: customer, createdAt: t, expiresAt: t.addingTimeInterval(ttl))
        let claim = key.map {
            CreateClaim(scope: scope, kind: "session", key: $0, requestHash: CreateClaim.requestHash([
                "amount": String(amount), "currency": currency.code, "accepted_brands": s.acceptedBrands.joined(separator: ","),
                "customer": customer, "ttl_seconds": String(ttl),
            ]))
        }
        switch try await store({ () throws(StoreError) in try await sessions.createSession(s, claim: claim) }) {
        case .claimed: return (s, false)
        case .replay(let id): return (try await session(id), true)
        case .reused: throw VaultError(.idempotencyKeyReused, "this idempotency key made a session with another request", field: "idempotency_key")
        }
    }

    public func session(_ id: String) async throws(VaultError) -> SessionRecord {
        guard let s = try await store({ () throws(StoreError) in try await sessions.session(id) }) else {
            throw VaultError(.sessionNotFound, "no checkout session with that id")
        }
        return await following(s)
    }

    /// A session `paying` with a payment whose outcome was not known when its request was
    /// answered (it stayed `processing`) follows that payment once it is settled, by the
    /// reconciler or by `vault payments settle`: succeeded or waiting for 3-D Secure completes it,
    /// declined or failed counts a failed attempt, a payment dropped as never sent (or settled
    /// not charged) opens it again. Each step is a compare-and-swap on the session's status.
    func following(_ s: SessionRecord) async -> SessionRecord {
        guard s.status == .paying, let paid = s.paymentID else { return s }
        let p: PaymentRecord?
        do throws(StoreError) { p = try await payments.payments.get(paid) } catch { return s }
        switch p?.status {
        case .processing, .unknown: return s
        case .succeeded, .requiresAction, .requiresCapture:
            _ = try? await sessions.transitionSession(s.id, from: .paying, to: .completed, paymentID: paid)
        case .declined, .failed, .canceled:
            _ = try? await sessions.failSessionAttempt(s.id, maxAttempts: maxAttempts)
        case nil:
            _ = try? await sessions.transitionSession(s.id, from: .paying, to: .open, paymentID: nil)
        }
        return (try? await sessions.session(s.id)) ?? s
    }

    /// Tokenizes `tokenize()`'s card and pays the session's amount with it. A replay of the
    /// idempotency key returns the first payment; a declined card leaves the session open until
    /// `maxAttempts` attempts have failed, then the session is closed
    /// (`SESSION_ATTEMPTS_EXCEEDED`). The key lives in the session's own scope.
    public func pay(
        _ id: String, idempotencyKey: String, bin: String? = nil, tokenize: (Fingerprinted?) async throws(VaultError) -> TokenRecord
    ) async throws(VaultError) -> (PaymentRecord, Bool) {
        let s = try await session(id)
        guard let currency = Currency(s.currency) else { throw VaultError(.currencyInvalid, "the session's currency is not valid") }
        if s.status == .completed || s.status == .paying, let paid = s.paymentID, let p = try? await payments.payment(paid),
           p.idempotencyKey == idempotencyKey {
            // A replay of the request that completed the session, or of the one whose outcome is
            // still being settled (its payment, `processing` or `unknown`, as it is now).
            return (p, false)
        }
        // Card testing on one session: refused before its state says anything (docs/velocity.md).
        let ticket = try await velocity?.admit(.tokenize, .init(session: id, bin: bin, customer: s.customer))
        guard now() < s.expiresAt else { throw VaultError(.sessionExpired, "this checkout session has expired") }
        try refuseIfExhausted(s)
        guard s.status == .open else { throw VaultError(.sessionUsed, "this checkout session was already used") }
        // Once the gateway has fingerprinted the card, before it is stored: the fingerprint's
        // tokenize limits, and every limit of the payment to come (checked, counted when it is made).
        var fingerprinted: Fingerprinted?
        if let limiter = velocity {
            let customer = s.customer
            fingerprinted = { (fp: String) async throws(VaultError) -> Void in
                _ = try await limiter.admit(.tokenize, VelocityLimiter.Keys(fingerprint: fp, peer: nil))
                _ = try await limiter.admit(.pay, VelocityLimiter.Keys(session: id, bin: bin, fingerprint: fp, customer: customer), count: false)
            }
        }
        let token: TokenRecord
        do throws(VaultError) { token = try await tokenize(fingerprinted) } catch {
            if let ticket, VelocityLimiter.isCardDecline(error.code) { await velocity?.declined(ticket) }
            throw error
        }
        guard s.acceptedBrands.isEmpty || s.acceptedBrands.contains(token.card.brand.rawValue) else {
            _ = try? await tokenizer.store.delete(token.token)
            tokenizer.dropCVC(token.token)
            throw VaultError(.sessionBrandNotAccepted, "this session accepts \(s.acceptedBrands.joined(separator: ", ")) only")
        }
        guard try await store({ () throws(StoreError) in try await sessions.transitionSession(id, from: .open, to: .paying, paymentID: nil) }) else {
            _ = try? await tokenizer.store.delete(token.token)
            tokenizer.dropCVC(token.token)
            if let fresh = try? await sessions.session(id) { try refuseIfExhausted(fresh) }
            throw VaultError(.sessionUsed, "this checkout session was already used")
        }
        var attempt = PaymentService.Request(
            source: .token(token.token), amount: s.amount, currency: currency, idempotencyKey: idempotencyKey, scope: PaymentScope.session(id))
        (attempt.session, attempt.sessionCustomer) = (id, s.customer)
        let result: (payment: PaymentRecord, created: Bool)
        do throws(VaultError) {
            result = try await payments.pay(attempt)
        } catch {
            // Only this attempt's own payment counts (same scope, key and request): a payment made
            // under the same key by anyone else, or by an earlier attempt, says nothing about this one.
            let left = try? await payments.payments.find(scope: attempt.scope, idempotencyKey: idempotencyKey)
            if let left, left.request == attempt.canonical, left.status != .failed {
                // Still processing (outcome unknown): the session stays claimed by it.
                _ = try? await sessions.transitionSession(id, from: .paying, to: .paying, paymentID: left.id)
            } else if let left, left.request == attempt.canonical {
                // Refused by the gateway: an attempt that reached it.
                _ = try? await sessions.failSessionAttempt(id, maxAttempts: maxAttempts)
            } else {
                // Nothing of this attempt reached a processor: not counted. Refused by the
                // payment's velocity limits (checked before the token was stored; a window filled
                // by requests in flight meanwhile): the token goes too.
                if error.code == .velocityLimit {
                    _ = try? await tokenizer.store.delete(token.token)
                    tokenizer.dropCVC(token.token)
                }
                _ = try? await sessions.transitionSession(id, from: .paying, to: .open, paymentID: nil)
            }
            throw error
        }
        switch result.payment.status {
        case .succeeded, .requiresAction, .requiresCapture:
            _ = try? await sessions.transitionSession(id, from: .paying, to: .completed, paymentID: result.payment.id)
        case .declined, .failed, .canceled:
            _ = try? await sessions.failSessionAttempt(id, maxAttempts: maxAttempts)
        case .processing, .unknown:
            // The outcome is not known (it may have been charged): the session stays claimed by it.
            _ = try? await sessions.transitionSession(id, from: .paying, to: .paying, paymentID: result.payment.id)
        }
        return result
    }

    /// 409 `SESSION_ATTEMPTS_EXCEEDED` for a session closed after its failed attempts (or one
    /// that already has as many as the current setting allows).
    private func refuseIfExhausted(_ s: SessionRecord) throws(VaultError) {
        if s.status == .closed || (s.status == .open && s.attempts >= maxAttempts) {
            throw VaultError(.sessionAttemptsExceeded, "this checkout session was closed after \(s.attempts) failed payment attempts; create a new session")
        }
    }

    private func store<T>(_ body: () async throws(StoreError) -> T) async throws(VaultError) -> T {
        do throws(StoreError) { return try await body() } catch {
            throw VaultError(store: error)
        }
    }

    public static func json(_ s: SessionRecord, now: Date = Date()) -> String { AnswerJSON.encode(Answer.Session(s, now: now)) }
}
