import Foundation
import Hummingbird
import Logging
import Money
import Payments
import SocketHTTP
import Store
import Tokenizer
import VaultCrypto

/// Payments by token (README "Payments"): the intent is recorded durably under its idempotency key
/// before the gateway is called, the CVC is dropped before the envelope leaves, and the outcome
/// is recorded when it comes back. A crash in between leaves the payment `processing` until the
/// `PaymentReconciler` asks the gateway what happened; the gateway is idempotent by payment id,
/// so nothing is ever charged twice.
public struct PaymentService: Sendable {
    let tokenizer: Tokenizer
    let payments: any PaymentStore
    let gateway: GatewayClient
    let customers: CustomerService?
    let logger: Logger
    let now: @Sendable () -> Date
    /// How long a replay waits for a duplicate still in flight before answering 409.
    let replayWait: Duration
    let metrics: SidecarMetrics?
    /// Captures, cancels and refunds (`PaymentLifecycle`): the payment store's, when it keeps them.
    let operations: (any PaymentOperationStore)?
    /// How long an authorization (`capture: false`) may wait for its capture (`sidecar.authorization_ttl`).
    let authorizationTTL: TimeInterval
    /// Velocity limits of payments (docs/velocity.md); nil: none.
    public var velocity: VelocityLimiter?

    /// Seven days, like card networks' usual hold on an authorization.
    public static let defaultAuthorizationTTL: TimeInterval = 7 * 86_400

    public init(
        tokenizer: Tokenizer, payments: any PaymentStore, gateway: GatewayClient, customers: CustomerService? = nil, logger: Logger,
        replayWait: Duration = .seconds(10), metrics: SidecarMetrics? = nil, authorizationTTL: TimeInterval = PaymentService.defaultAuthorizationTTL,
        now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.metrics = metrics
        self.operations = payments as? any PaymentOperationStore
        self.authorizationTTL = authorizationTTL
        self.tokenizer = tokenizer
        self.payments = payments
        self.gateway = gateway
        self.customers = customers
        self.logger = logger
        self.replayWait = replayWait
        self.now = now
    }

    /// A payment request.
    public struct Request: Sendable {
        /// What pays: a token, or a customer's default instrument.
        public enum Source: Sendable {
            case token(String), customer(String)
            /// A mandate's cycle, charged on the mandate's instrument.
            case mandate(String, cycle: Int, instrument: String)
        }
        public var source: Source
        public var amount: Int
        public var currency: Currency
        public var idempotencyKey: String
        /// The key space of `idempotencyKey` (`PaymentScope`): the caller's uid for
        /// `POST /v1/payments`, the session for a session payment, global for mandate cycles.
        public var scope: String
        /// False: authorize only (`requires_capture`), captured or canceled later.
        public var capture: Bool
        /// The payment's metadata (not part of `canonical`: a replay answers the first payment, its metadata as first stored).
        public var metadata: Metadata
        /// The checkout session paid, if any, and its customer (velocity limits).
        public var session: String?, sessionCustomer: String?

        public init(
            source: Source, amount: Int, currency: Currency, idempotencyKey: String, scope: String, capture: Bool = true, metadata: Metadata = Metadata()
        ) {
            self.metadata = metadata
            self.capture = capture
            self.source = source
            self.amount = amount
            self.currency = currency
            self.idempotencyKey = idempotencyKey
            self.scope = scope
        }

        /// The canonical form stored with the payment: a replay must match it exactly.
        var canonical: String {
            capture ? sourceCanonical : sourceCanonical + "&capture=false"
        }

        private var sourceCanonical: String {
            switch source {
            case .token(let t): "token=\(t)&amount=\(amount)&currency=\(currency.code)"
            case .customer(let c): "customer=\(c)&amount=\(amount)&currency=\(currency.code)"
            case .mandate(let m, let cycle, _): "mandate=\(m)&cycle=\(cycle)&amount=\(amount)&currency=\(currency.code)"
            }
        }
    }

    /// Makes (or replays) a payment. `created` is false for a replay of an earlier request.
    public func pay(_ request: Request) async throws(VaultError) -> (payment: PaymentRecord, created: Bool) {
        if let first = try await replayed(request) { return (first, false) }
        var card = try await card(for: request)
        let ticket = try await admit(request, card)
        let intent = PaymentRecord(
            id: RandomID.make(prefix: "pay_"), scope: request.scope, idempotencyKey: request.idempotencyKey, request: request.canonical,
            token: card.sourceID, singleUse: card.singleUse, amount: request.amount, currency: request.currency.code, createdAt: now(),
            manualCapture: !request.capture, authorizationExpiresAt: request.capture ? nil : now().addingTimeInterval(authorizationTTL),
            metadata: request.metadata.droppingEmptyValues)
        switch try await store({ () throws(StoreError) in try await payments.begin(intent) }) {
        case .existing(let existing):
            guard let first = try await replay(existing, request) else {
                throw VaultError(.gatewayUnavailable, "a concurrent request under this idempotency_key did not reach the gateway; nothing was charged, retry")
            }
            return (first, false)
        case .created: break
        }
        // The CVC is never kept after the first authorization attempt: it is taken (and forgotten)
        // as the envelope leaves, so of two payments racing on one reusable token only one sends
        // it. It was held in memory only (HeldCVCs), so no copy is left anywhere.
        if let token = card.tokenWithCVC, let cvc = tokenizer.takeCVC(of: token) {
            var envelope = token.envelope
            envelope.fields[.cvc] = cvc
            card.envelopeJSON = envelope.json
        }
        guard let outcome = try await send(intent, envelopeJSON: card.envelopeJSON) else {
            // Sent, the answer lost or unclear: the payment is `processing` (202). The gateway
            // settles it (status query, re-send under the same processor idempotency key) and
            // the reconciler records the outcome; a replay of the key gets it as soon as it is known.
            return (intent, true)
        }
        let done = try await record(outcome, for: intent)
        if done.status == .declined, let ticket { await velocity?.declined(ticket) }
        return (done, true)
    }

    /// A payment let through the velocity limits (nil: a mandate's cycle, which no card tester makes).
    func admit(_ request: Request, _ card: Card) async throws(VaultError) -> VelocityLimiter.Ticket? {
        guard let velocity else { return nil }
        var customer = request.sessionCustomer
        switch request.source {
        case .mandate: return nil
        case .customer(let id): customer = id
        case .token: break
        }
        return try await velocity.admit(
            .pay, .init(session: request.session, bin: card.bin, fingerprint: card.fingerprint, customer: customer))
    }

    /// The first payment made under the request's key, when this is a replay of it. If that first
    /// attempt was dropped meanwhile (it never reached a processor), nil: this request makes the
    /// payment afresh.
    func replayed(_ request: Request) async throws(VaultError) -> PaymentRecord? {
        // The request's scope and the global one, in one read.
        let scopes = request.scope == PaymentScope.global ? [request.scope] : [request.scope, PaymentScope.global]
        let found = try await store { () throws(StoreError) in
            try await payments.find(scopes: scopes, idempotencyKey: request.idempotencyKey)
        }
        if let existing = found[request.scope] { return try await replay(existing, request) }
        // A payment made before keys had scopes lives in the global scope, and nobody knows which
        // peer made it. A retry of exactly that request (same token or customer, amount and
        // currency: knowing the token id already means being its owner) replays it, so a retry
        // across the upgrade never charges twice. Any other request under the key ignores it: no
        // IDEMPOTENCY_KEY_REUSED that would tell another peer the key exists.
        guard request.scope != PaymentScope.global, let legacy = found[PaymentScope.global], legacy.request == request.canonical else {
            return nil
        }
        return try await replay(legacy, request)
    }

    /// What pays: a token's envelope (with its CVC, if still there), or a stored instrument's.
    struct Card {
        var sourceID: String, envelopeJSON: String, singleUse: Bool, tokenWithCVC: TokenRecord?
        var bin: String?, fingerprint: String?
    }

    func card(for request: Request) async throws(VaultError) -> Card {
        switch request.source {
        case .token(let id):
            let token = try await tokenizer.record(id)
            return Card(
                sourceID: token.token, envelopeJSON: token.envelope.json, singleUse: token.singleUse, tokenWithCVC: token.hasCVC ? token : nil,
                bin: token.card.bin, fingerprint: token.fingerprint)
        case .customer(let id):
            guard let customers else { throw VaultError(.storeUnavailable, "customers are not available on this sidecar") }
            let instrument = try await customers.defaultInstrument(of: id)
            return Card(
                sourceID: instrument.id, envelopeJSON: instrument.envelope.json, singleUse: false, tokenWithCVC: nil, bin: instrument.envelope.card.bin,
                fingerprint: instrument.envelope.card.fingerprint)
        case .mandate(_, _, let instrumentID):
            guard let customers, let instrument = try? await customers.customers.instrument(instrumentID) else {
                throw VaultError(.mandateInstrumentGone, "the mandate's instrument was detached")
            }
            return Card(sourceID: instrument.id, envelopeJSON: instrument.envelope.json, singleUse: false, tokenWithCVC: nil)
        }
    }

    /// Sends a recorded intent to the gateway: its outcome, or nil when it was sent and the answer
    /// was lost or unclear (the payment stays `processing`).
    /// - Throws: `GATEWAY_UNAVAILABLE` when nothing was sent (the intent is dropped, so the key may
    ///   be retried); the gateway's coded refusal (the payment `failed`).
    func send(_ intent: PaymentRecord, envelopeJSON: String) async throws(VaultError) -> GatewayClient.Outcome? {
        do throws(GatewayClient.Failure) {
            do throws(GatewayClient.Failure) {
                return try await gateway.authorize(
                    paymentID: intent.id, amount: intent.amount, currency: intent.currency, envelopeJSON: envelopeJSON, capture: !intent.manualCapture)
            } catch .connectionClosed(let why) {
                // A kept-alive connection the gateway closed as the request went out. The gateway
                // is idempotent by payment id (its ledger answers a repeat with the first outcome),
                // so asking again once, at once, settles it without a double charge.
                // If the second call cannot even be sent, the first one's fate is still unknown:
                // never report "not sent" then (that would free the key for a second charge).
                logger.notice("gateway connection closed mid-call; asking again", metadata: ["payment": "\(intent.id)"])
                do throws(GatewayClient.Failure) {
                    return try await gateway.authorize(
                        paymentID: intent.id, amount: intent.amount, currency: intent.currency, envelopeJSON: envelopeJSON,
                        capture: !intent.manualCapture)
                } catch let second where second.nothingSent {
                    throw .failedMidway("\(why); asking again failed: \(second.reason)")
                }
            }
        } catch {
            if error.nothingSent {
                try? await payments.abandon(intent.id)
                logger.warning("payment not sent", metadata: ["payment": "\(intent.id)", "reason": "\(error.reason)"])
                throw VaultError(.gatewayUnavailable, "\(error.reason); nothing was charged, retry with the same idempotency_key")
            }
            if case .refused(let code, let message) = error {
                _ = try? await payments.finish(intent.id, status: .failed, code: code.rawValue, reference: nil, nextAction: nil, now: now())
                throw VaultError(code, message)
            }
            logger.warning("payment outcome not known yet; settling", metadata: ["payment": "\(intent.id)", "reason": "\(error.reason)"])
            return nil
        }
    }

    /// Records a gateway outcome and consumes a single-use token that paid.
    func record(_ outcome: GatewayClient.Outcome, for intent: PaymentRecord) async throws(VaultError) -> PaymentRecord {
        let status = PaymentRecord.Status(rawValue: outcome.status) ?? .failed
        let t = now()
        if status == .unknown {
            // Settlement gave up at its deadline: reported, never left `processing` for good.
            let reason = outcome.reason ?? "the processor's outcome could not be found out before the settlement deadline"
            let marked = try await store { () throws(StoreError) in try await payments.markUnknown(intent.id, reason: reason, now: t) }
            if marked {
                metrics?.paymentUnknown()
                logger.error(
                    "payment outcome unknown at the settlement deadline: settle it with `vault payments settle`",
                    metadata: ["payment": "\(intent.id)", "reason": "\(reason)"])
            }
            var unknown = intent
            unknown.status = .unknown
            unknown.reason = reason
            unknown.updatedAt = t
            return unknown
        }
        // A success consumes a single-use token, in the transaction that records it.
        let consumed = (status == .succeeded || status == .requiresCapture) && intent.singleUse ? intent.token : nil
        _ = try await store { () throws(StoreError) in
            try await payments.finish(
                intent.id, status: status, code: outcome.declineCode, reference: outcome.reference, nextAction: outcome.nextAction, now: t,
                consuming: consumed)
        }
        logger.info("payment", metadata: ["payment": "\(intent.id)", "status": "\(status.rawValue)", "code": "\(outcome.declineCode ?? "-")"])
        var done = intent
        done.status = status
        done.code = outcome.declineCode
        done.reference = outcome.reference
        done.nextAction = outcome.nextAction
        done.reason = nil
        done.updatedAt = t
        return done
    }

    /// The decline code a tokenize-only caller sees instead of the precise one (card testing:
    /// `insufficient_funds` against `incorrect_cvc` tells a tester which detail was wrong).
    public static let genericDeclineCode = "card_declined"

    /// The first payment made under this key: the same request gets its result (after waiting for
    /// it if it is still in flight); another request gets 409 `IDEMPOTENCY_KEY_REUSED`. Nil when
    /// the first attempt was dropped while waiting (it never reached a processor).
    func replay(_ existing: PaymentRecord, _ request: Request) async throws(VaultError) -> PaymentRecord? {
        guard existing.request == request.canonical else {
            throw VaultError(.idempotencyKeyReused, "this idempotency_key was used for a different payment request")
        }
        var current = existing
        let deadline = ContinuousClock.now + replayWait
        while current.status == .processing, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(25))
            guard let fresh = try await store({ () throws(StoreError) in try await payments.get(existing.id) }) else { return nil }
            current = fresh
        }
        if current.status == .processing {
            throw VaultError(.paymentInProgress, "\(current.id) is still being processed: GET /v1/payments/\(current.id)")
        }
        if current.status == .failed, let text = current.code {
            // The gateway's code, as recorded (`GATEWAY_ERROR` for one this version does not know).
            throw VaultError(ErrorCode(rawValue: text) ?? .gatewayError, "\(current.id) failed: \(text)")
        }
        return current
    }

    /// Completes a payment waiting for 3-D Secure with the result JWT from the challenge. The
    /// gateway validates it; a refused result leaves the payment waiting.
    public func confirm(_ id: String, threeDSResult jwt: String) async throws(VaultError) -> PaymentRecord {
        let p = try await payment(id)
        guard p.status == .requiresAction else {
            throw VaultError(.paymentNotAwaitingAction, "\(id) is \(p.status.rawValue), not waiting for 3-D Secure")
        }
        let outcome: GatewayClient.Outcome
        do throws(GatewayClient.Failure) {
            outcome = try await gateway.confirm(paymentID: id, threeDSResult: jwt)
        } catch {
            // The gateway may have finished it already (a lost answer, or a retry after one):
            // take its recorded outcome rather than leave the payment waiting forever.
            if case .refused(.paymentNotAwaitingAction, _) = error, let settled = try await settleFromGateway(p) { return settled }
            if error.answerLost, let settled = try await settleFromGateway(p) { return settled }
            if case .refused(let code, let message) = error { throw VaultError(code, message) }
            throw VaultError(.gatewayUnavailable, "\(error.reason); the payment still waits for 3-D Secure")
        }
        let done = try await record(outcome, for: p)
        // A decline after the challenge counts as the payment's decline would have (docs/velocity.md).
        if done.status == .declined, let velocity { await velocity.declined(velocity.ticket(.pay, await declineKeys(of: p))) }
        return done
    }

    /// What a payment's decline counts by, read again at `confirm`: its card's BIN and fingerprint
    /// (the token's, or the instrument's and its customer). The session is not known here.
    func declineKeys(of p: PaymentRecord) async -> VelocityLimiter.Keys {
        // A mandate's cycle is never counted (no card tester makes one), at confirm neither.
        if p.request.hasPrefix("mandate=") { return .init(peer: nil) }
        if p.token.hasPrefix("ins_"), let instrument = try? await customers?.customers.instrument(p.token) {
            return .init(bin: instrument.envelope.card.bin, fingerprint: instrument.envelope.card.fingerprint, customer: instrument.customer)
        }
        let token = try? await tokenizer.store.get(p.token, now: now())
        return .init(bin: token?.card.bin, fingerprint: token?.fingerprint)
    }

    /// The gateway's recorded outcome of a payment, recorded here too when it is final.
    func settleFromGateway(_ p: PaymentRecord) async throws(VaultError) -> PaymentRecord? {
        guard case .outcome(let outcome)? = try? await gateway.authorization(of: p.id), outcome.status != "requires_action" else { return nil }
        return try await record(outcome, for: p)
    }

    /// The sandbox's challenge page, reached through the sidecar: completes a challenge.
    public func completeSandboxChallenge(_ transactionID: String, action: String) async throws(VaultError) -> String {
        do throws(GatewayClient.Failure) {
            return try await gateway.completeChallenge(transactionID: transactionID, action: action)
        } catch {
            if case .refused(let code, let message) = error { throw VaultError(code, message) }
            throw VaultError(.gatewayUnavailable, error.reason)
        }
    }

    /// A payment by id.
    /// An authorization past its `authorization_expires_at` is marked `canceled` (`expired`) as it is read.
    public func payment(_ id: String) async throws(VaultError) -> PaymentRecord {
        guard var p = try await store({ () throws(StoreError) in try await payments.get(id) }) else {
            throw VaultError(.paymentNotFound, "no payment with that id")
        }
        if p.status == .requiresCapture, let expiry = p.authorizationExpiresAt, expiry <= now(), let operations {
            let t = now()
            if try await store({ () throws(StoreError) in try await operations.expireAuthorizations(id, now: t) }) == [id] {
                (p.status, p.code, p.updatedAt) = (.canceled, "expired", t)
            }
        }
        return p
    }

    /// Settles payments whose outcome is not known (`processing` after a crash or a lost
    /// answer, `unknown` after settlement gave up) by asking the gateway, oldest first:
    /// - a recorded outcome is recorded here too (`unknown` at the deadline: reported, metric and
    ///   error log line, and asked again on later rounds: an operator may settle it);
    /// - no ledger row: nothing was charged; the intent is dropped so the key can be used again,
    ///   but only once no call of any sidecar can still be on its way to a gateway with it
    ///   (`abandonAfter`: the gateway call's own timeout and a margin);
    /// - pending with `resend` (a template without a status query), due and not in flight: the
    ///   payment is re-posted with its card's envelope (without a CVC: it never outlives the first
    ///   attempt), and the gateway re-sends it under the same processor idempotency key.
    /// Returns how many were settled.
    @discardableResult
    public func reconcile(olderThan age: Duration) async -> Int {
        let t = now()
        let cutoff = t.addingTimeInterval(-Self.seconds(age))
        let abandonBefore = t.addingTimeInterval(-max(Self.seconds(age), Self.seconds(abandonAfter)))
        let expired = (try? await operations?.expireAuthorizations(nil, now: t)) ?? []
        if !expired.isEmpty { logger.notice("authorizations expired", metadata: ["count": "\(expired.count)"]) }
        var settled = await reconcileOperations(before: cutoff, abandonBefore: abandonBefore)
        guard let stale = try? await payments.unsettled(before: cutoff, limit: 100) else { return settled }
        for p in stale {
            let known: GatewayClient.Authorization
            do throws(GatewayClient.Failure) {
                known = try await gateway.authorization(of: p.id)
            } catch {
                if error.nothingSent {
                    logger.warning("reconcile: gateway not reachable", metadata: ["payment": "\(p.id)"])
                    break
                }
                continue
            }
            switch known {
            case .outcome(let outcome):
                if outcome.status == "unknown", p.status == .unknown { continue }
                guard let done = try? await record(outcome, for: p) else { continue }
                if done.status != .unknown { settled += 1; metrics?.paymentSettled(how: "reconciled") }
            case .notFound:
                guard p.status == .processing, p.updatedAt < abandonBefore else { continue }
                try? await payments.abandon(p.id)
                metrics?.paymentSettled(how: "not_received")
                settled += 1
            case .pending(let resend, let inFlight, let nextTryAt, _):
                guard resend, !inFlight, (nextTryAt ?? .distantPast) <= t, let envelope = await envelope(of: p) else { continue }
                do throws(GatewayClient.Failure) {
                    let outcome = try await gateway.authorize(
                        paymentID: p.id, amount: p.amount, currency: p.currency, envelopeJSON: envelope, capture: !p.manualCapture)
                    guard let done = try? await record(outcome, for: p) else { continue }
                    if done.status != .unknown { settled += 1; metrics?.paymentSettled(how: "resent") }
                } catch {
                    // Still not known (or refused): it was sent before, so it is never dropped
                    // here; the gateway's deadline decides.
                    continue
                }
            }
        }
        if settled > 0 { logger.notice("reconciled payments", metadata: ["count": "\(settled)"]) }
        return settled
    }

    /// How long after its intent a payment the gateway never saw may be dropped: no call with it
    /// can still be on its way (the gateway call times out after 30 s; 5 s of margin).
    var abandonAfter: Duration { .seconds(35) }

    /// The envelope a payment was made with, for a re-post: the token's (its CVC already gone)
    /// or the stored instrument's. Nil when it is gone (a token expired): then only the gateway's
    /// status query or its deadline settles the payment.
    func envelope(of p: PaymentRecord) async -> String? {
        if p.token.hasPrefix("ins_") {
            return try? await customers?.customers.instrument(p.token)?.envelope.droppingCVC().json
        }
        guard let token = try? await tokenizer.store.get(p.token, now: now()) else { return nil }
        return token.envelope.droppingCVC().json
    }

    static func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }

    func store<T>(_ body: () async throws(StoreError) -> T) async throws(VaultError) -> T {
        do throws(StoreError) { return try await body() } catch {
            throw VaultError(store: error)
        }
    }

    /// A payment as the API shows it (README "Payments", openapi.json). No card data.
    public static func json(_ p: PaymentRecord) -> String { AnswerJSON.encode(Answer.Payment(p)) }
}
