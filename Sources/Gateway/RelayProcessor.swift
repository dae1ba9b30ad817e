import AsyncHTTPClient
import CardRules
import Foundation
import GatewayAPI
import Logging
import Money
import NIOCore
import NIOPosix
import Store
import VaultCrypto
import VaultOpen

/// The outbound adapter: fills a `RelayTemplate` with the opened card and sends it to a real
/// processor's API, then maps the answer back (README "Payments", docs/configuration.md).
///
/// The request body is built in `SecureBytes`; the copy handed to the HTTP client is zeroed when
/// the call returns (NIO's own buffers are outside our reach: see docs/threat-model.md). The
/// processor's idempotency key is the payment id (`{{idempotency_key}}`, `{{payment_id}}`); the
/// caller's own idempotency key is never sent.
///
/// One send per payment id at a time, whichever gateway of the store gets it: the ledger row
/// (`LedgerStore`, in the vault's store) is claimed by an atomic insert before anything is sent,
/// leased for the send's timeout plus a margin; a later send of the same id takes the row over
/// only by a compare-and-swap on its attempt count. A final outcome is answered again without a
/// send; a row another call is sending answers `ProcessorError.inProgress` (504
/// `AUTHORIZATION_IN_PROGRESS`).
///
/// Where it sends: only to the template's host (or its `allowed_hosts`), over https (http to
/// loopback only when the template allows it), and never where a redirect points: redirects are
/// not followed, and a 3xx answer is an unknown outcome like a 5xx.
///
/// What a failure means (docs/errors.md says the same):
/// - a connection never made on the row's first send (nothing left this host), or a 5xx from a
///   processor whose template says `"server_errors": "not_charged"`: the row is released and the
///   answer is `ProcessorError.unavailable` (503: nothing charged, retry with the same payment id);
/// - anything else after sending (a timeout, a dropped connection, a 5xx, a 3xx, an unreadable
///   answer), and a connection never made on a later send: the outcome is unknown. While the
///   card is in hand (`settle.retry_within_seconds`) the call asks the status query and/or
///   re-sends with the same idempotency key, with backoff and full jitter; still unknown, the
///   row waits (`unknown`, next try, deadline) and the answer is `ProcessorError.outcomeUnknown` (504).
///   The background settler (`LedgerSettler`) asks the status query for such rows; a re-post of
///   the payment (the sidecar's reconciler, with the envelope) re-sends when the template allows
///   it; past the deadline the outcome is reported `unknown` (`ProcessorError.deadlinePassed`).
public final class RelayProcessor: PaymentProcessor {
    public var name: String { "relay:" + template.name }
    let template: RelayTemplate
    let environment: [String: String]
    /// The hosts the template may send to (checked on every filled-in URL before sending).
    let destination: RelayTemplate.Destination
    public let ledger: LedgerStore
    /// Settlement counters (shared with the routes' `GET /metrics`).
    public let metrics: GatewayMetrics
    let logger: Logger
    let timing: Timing
    let now: @Sendable () -> Date
    let http: HTTPClient

    /// The clock of settlement. The defaults are the production ones; tests shorten them.
    public struct Timing: Sendable {
        /// The whole authorize call (sends, status queries, backoff) stays within this many
        /// seconds: the sidecar gives up on the gateway after 30.
        public var callBudget: Double = 25
        /// Added to a send's timeout for its lease, and the time a processor is given to record
        /// a request after the request's timeout (before its "not found" is believed).
        public var margin: Double = 5
        /// In-call backoff: full jitter over min(maxBackoff, firstBackoff × 2ⁿ) seconds.
        public var firstBackoff: Double = 0.25
        public var maxBackoff: Double = 4
        /// A row left unknown is tried again after about half its age (full jitter over the upper
        /// half), within these bounds, and never after its deadline.
        public var minRetry: Double = 1
        public var maxRetry: Double = 300
        public init() {}
    }

    /// - Throws: `RelayTemplate.Invalid` (the template's URLs may not be sent to, their variables
    ///   filled in from `environment`).
    public init(
        template: RelayTemplate, ledger: LedgerStore, metrics: GatewayMetrics = GatewayMetrics(),
        logger: Logger = Logger(label: "vault.gateway.relay"), timing: Timing = Timing(),
        environment: [String: String] = ProcessInfo.processInfo.environment, now: @escaping @Sendable () -> Date = Date.init
    ) throws(RelayTemplate.Invalid) {
        self.template = template
        self.environment = environment
        destination = try template.destination(environment: environment)
        self.ledger = ledger
        self.metrics = metrics
        self.logger = logger
        self.timing = timing
        self.now = now
        // Never follow a redirect: a 307/308 would re-post the card (and the template's secrets)
        // wherever the processor, or whoever answers in its name, points. A 3xx is returned as it is.
        var configuration = HTTPClient.Configuration(timeout: .init(connect: .seconds(5), read: .milliseconds(Int64(template.timeout * 1000))))
        configuration.redirectConfiguration = .disallow
        http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    deinit { try? http.syncShutdown() }

    var settle: RelayTemplate.Settlement { template.settle }
    /// One send's (or status query's) timeout: the template's, within the call's budget.
    var sendTimeout: Double { min(template.timeout, timing.callBudget) }

    /// What a call holds of a ledger row while it talks to the processor.
    struct Held: Sendable {
        var paymentID: String
        /// The row's attempt count (the sends so far, this call's included).
        var attempts: Int
        /// The lease this call set (the compare-and-swap value of its next change).
        var leaseUntil: Date
        var deadline: Date
        var createdAt: Date

        init(_ e: LedgerEntry, deadline: Double) {
            paymentID = e.paymentID
            attempts = e.attempts
            leaseUntil = e.leaseUntil ?? .distantPast
            self.deadline = e.deadlineAt ?? e.createdAt.addingTimeInterval(deadline)
            createdAt = e.createdAt
        }
    }

    // MARK: - Authorize

    public func authorize(_ request: AuthorizationRequest, card: OpenedCard) async throws(ProcessorError) -> AuthorizationOutcome {
        guard request.capture || template.authorizesWithoutCapture else { throw Self.unsupported("an authorization without capture") }
        let started = ContinuousClock.now
        let t = now()
        let entry = LedgerEntry(
            paymentID: request.paymentID, processor: name, amount: request.amount, currency: request.currency.code,
            envelopeID: card.envelopeID, state: .sending, attempts: 1, leaseUntil: t.addingTimeInterval(sendTimeout + timing.margin),
            deadlineAt: t.addingTimeInterval(settle.deadline), createdAt: t)
        // The INSERT and the read of what was there are one transaction: of concurrent calls
        // (on any gateway of the store) exactly one makes the row, and only that one sends.
        switch try await store("claim the payment id", { () throws(StoreError) in try await ledger.claim(entry) }) {
        case .claimed:
            return try await sendAndSettle(request, card: card, held: Held(entry, deadline: settle.deadline), started: started)
        case .existing(let row):
            return try await resume(row, request, card: card, started: started)
        }
    }

    /// A call for a payment id that has a row already.
    func resume(_ row: LedgerEntry, _ request: AuthorizationRequest, card: OpenedCard, started: ContinuousClock.Instant) async throws(ProcessorError) -> AuthorizationOutcome {
        guard row.sameRequest(amount: request.amount, currency: request.currency.code, envelopeID: card.envelopeID) else {
            throw .paymentIDReused
        }
        if row.state == .done, let outcome = Self.outcome(row) { return outcome }
        let t = now()
        // Sent by another call that is still within its lease: never a second send.
        if row.isLeased(at: t) { throw .inProgress }
        if Self.isGivenUp(row) || t > deadline(of: row) {
            throw .deadlinePassed(reason: row.reason ?? Self.neverAnswered, attempts: row.attempts, deadline: deadline(of: row))
        }
        if row.state == .unknown, let next = row.nextTryAt, next > t { throw .pending(pending(row, at: t)) }
        // Due: settle it now, with the card in hand.
        var held: Held
        if settle.status != nil {
            guard let leased = try await store("lease the row", { () throws(StoreError) in
                try await ledger.lease(row.paymentID, attempts: row.attempts, leaseUntil: t.addingTimeInterval(sendTimeout + timing.margin), now: t)
            }) else { throw .inProgress }
            held = Held(leased, deadline: settle.deadline)
            let reason: String
            switch await queryStatus(request, timeout: sendTimeout) {
            case .found(let outcome):
                metrics.settled("settled")
                return try await record(outcome, held)
            case .notFound:
                // Forgotten only when nothing else can settle it: with a re-send the processor's
                // own idempotency key settles it whether or not the first send ever arrived (a
                // "not found" may come from a processor still working on it, or whose lookups lag).
                if !settle.resend, isQuiet(row, at: t), try await store("forget the row", { () throws(StoreError) in
                    try await ledger.forget(held.paymentID, attempts: held.attempts, heldUntil: held.leaseUntil)
                }) {
                    // The processor never got any send (and none can still arrive): nothing was
                    // charged. Start again from a fresh claim (attempt 1).
                    metrics.settled("not_received")
                    logger.notice("payment never received by the processor; sending it again", metadata: ["payment": "\(row.paymentID)"])
                    return try await authorize(request, card: card)
                }
                metrics.settled("unknown")
                // Asked too soon after a send: without a re-send, ask again once none can still arrive.
                guard settle.resend else { throw await leaveUnknown(held, reason: Self.notKnownYet, at: quietAgain(held)) }
                reason = Self.notKnownYet
            case .unknown(let why):
                metrics.settled("unknown")
                reason = why
            }
            guard settle.resend else { throw await leaveUnknown(held, reason: reason) }
            let leaseUntil = now().addingTimeInterval(sendTimeout + timing.margin)
            guard try await store("renew the lease", { () throws(StoreError) in
                try await ledger.renew(held.paymentID, attempts: held.attempts, heldUntil: held.leaseUntil, leaseUntil: leaseUntil, countSend: true, now: now())
            }) else { throw .inProgress }
            held.attempts += 1
            held.leaseUntil = leaseUntil
        } else if settle.resend {
            guard let taken = try await store("take the row over", { () throws(StoreError) in
                try await ledger.retake(row.paymentID, attempts: row.attempts, leaseUntil: t.addingTimeInterval(sendTimeout + timing.margin), now: t)
            }) else { throw .inProgress }
            held = Held(taken, deadline: settle.deadline)
        } else {
            // Neither a re-send nor a status query: nothing the card in hand can do. The outcome
            // stays unknown until an answer comes some other way or the deadline passes.
            throw .pending(pending(row, at: t))
        }
        metrics.settled("resent")
        logger.notice("re-sending a payment whose outcome is unknown", metadata: ["payment": "\(row.paymentID)", "attempt": "\(held.attempts)"])
        return try await sendAndSettle(request, card: card, held: held, started: started, isResend: true)
    }

    /// Sends (the call holds the row, its attempt counted), then, while the outcome is unknown and
    /// the call's budget allows, asks the status query and/or re-sends with backoff and jitter.
    func sendAndSettle(
        _ request: AuthorizationRequest, card: OpenedCard, held: Held, started: ContinuousClock.Instant, isResend: Bool = false
    ) async throws(ProcessorError) -> AuthorizationOutcome {
        var held = held
        var result = try await firstSend(request, card: card, held: held)
        var resent = isResend
        var retries = 0
        var reason: String
        while true {
            switch result {
            case .outcome(let outcome):
                if resent { metrics.settled("settled") }
                return try await record(outcome, held)
            case .unknown(let why):
                reason = why
                if resent { metrics.settled("unknown") }
            }
            // Settlement steps with the card in hand, until a re-send or the end of the window.
            var sentAgain = false
            while !sentAgain {
                guard settle.status != nil || settle.resend, now() < held.deadline, let delay = nextDelay(retries, started: started) else {
                    throw await leaveUnknown(held, reason: reason)
                }
                retries += 1
                try? await Task.sleep(for: .milliseconds(Int64(delay * 1000)))
                if settle.status != nil {
                    guard let timeout = remaining(started) else { throw await leaveUnknown(held, reason: reason) }
                    guard let renewed = try? await renew(held, timeout: timeout, countSend: false) else { throw .inProgress }
                    held = renewed
                    switch await queryStatus(request, timeout: timeout) {
                    case .found(let outcome):
                        metrics.settled("settled")
                        return try await record(outcome, held)
                    case .notFound:
                        // Right after a send, "not found" may only mean "not recorded yet".
                        metrics.settled("unknown")
                        if !reason.hasPrefix(Self.notKnownYet) { reason = Self.notKnownYet + " (" + reason + ")" }
                    case .unknown(let why):
                        metrics.settled("unknown")
                        reason = why
                    }
                }
                if settle.resend {
                    guard let timeout = remaining(started) else { throw await leaveUnknown(held, reason: reason) }
                    guard let renewed = try? await renew(held, timeout: timeout, countSend: true) else { throw .inProgress }
                    held = renewed
                    metrics.settled("resent")
                    resent = true
                    sentAgain = true
                    result = await send(request, card: card, timeout: timeout)
                }
            }
        }
    }

    static let notKnownYet = "the processor's status query does not know the payment yet"
    static let notKnownResend = "the processor's status query does not know the payment: to be re-sent under its idempotency key"

    /// What one send told.
    enum SendResult: Sendable {
        case outcome(AuthorizationOutcome)
        case unknown(String)
    }

    /// The row's first send in this call: on attempt 1, a connection never made (or a 5xx that
    /// the template says charges nothing, or a URL refused before sending) releases the row.
    func firstSend(_ request: AuthorizationRequest, card: OpenedCard, held: Held) async throws(ProcessorError) -> SendResult {
        let attempt: Attempt
        do throws(ProcessorError) {
            attempt = try await charge(request, card: card, timeout: sendTimeout)
        } catch {
            // Refused before sending (a URL the template may not send to, a variable not set):
            // nothing was sent by this call.
            if held.attempts == 1 {
                _ = try? await ledger.release(held.paymentID)
            } else {
                _ = await leaveUnknown(held, reason: "the re-send was refused before sending")
            }
            throw error
        }
        switch attempt {
        case .outcome(let outcome): return .outcome(outcome)
        case .notConnected(let why) where held.attempts == 1:
            if (try? await ledger.release(held.paymentID)) == true { throw .unavailable(why) }
            return .unknown(why)
        case .serverError(let status) where held.attempts == 1 && settle.serverErrors == .notCharged:
            if (try? await ledger.release(held.paymentID)) == true {
                throw .unavailable("the processor answered \(status), which it documents as nothing charged")
            }
            return .unknown("the processor answered \(status)")
        default:
            return Self.unknown(attempt)
        }
    }

    /// A later send (attempt ≥ 2): anything but a clear outcome leaves it unknown.
    func send(_ request: AuthorizationRequest, card: OpenedCard, timeout: Double) async -> SendResult {
        do {
            return Self.unknown(try await charge(request, card: card, timeout: timeout))
        } catch {
            return .unknown("the re-send was refused before sending")
        }
    }

    static func unknown(_ attempt: Attempt) -> SendResult {
        switch attempt {
        case .outcome(let o): .outcome(o)
        case .notConnected(let why): .unknown("\(why) (a later send: an earlier one may have charged)")
        case .serverError(let status): .unknown("the processor answered \(status)")
        case .unknown(let why): .unknown(why)
        }
    }

    /// Records the processor's outcome; the row's recorded outcome if another writer settled it
    /// first (an operator, by hand).
    func record(_ outcome: AuthorizationOutcome, _ held: Held) async throws(ProcessorError) -> AuthorizationOutcome {
        let (status, code, reference) = Self.columns(outcome)
        do throws(StoreError) {
            if try await ledger.settle(held.paymentID, status: status, declineCode: code, reference: reference, now: now()) { return outcome }
            if let row = try await ledger.entry(held.paymentID), let recorded = Self.outcome(row) { return recorded }
            return outcome
        } catch {
            // The row stays leased, then due: the settler or a re-post finds the outcome again.
            throw .outcomeUnknown("the processor answered but its outcome could not be recorded")
        }
    }

    /// Leaves the row `unknown` with its next try (`at`, or after backoff) and deadline, if the
    /// call still holds it; the error to answer (504).
    func leaveUnknown(_ held: Held, reason: String, at next: Date? = nil) async -> ProcessorError {
        let t = now()
        _ = try? await ledger.markUnknown(
            held.paymentID, attempts: held.attempts, heldUntil: held.leaseUntil, reason: reason,
            nextTryAt: next ?? nextTry(created: held.createdAt, at: t, deadline: held.deadline), deadlineAt: held.deadline, now: t)
        return .outcomeUnknown(reason)
    }

    /// Renews the call's lease for one more network step of `timeout` seconds (counting a send).
    func renew(_ held: Held, timeout: Double, countSend: Bool) async throws(StoreError) -> Held? {
        let t = now()
        let leaseUntil = t.addingTimeInterval(timeout + timing.margin)
        guard try await ledger.renew(held.paymentID, attempts: held.attempts, heldUntil: held.leaseUntil, leaseUntil: leaseUntil, countSend: countSend, now: t)
        else { return nil }
        var next = held
        next.leaseUntil = leaseUntil
        if countSend { next.attempts += 1 }
        return next
    }

    // MARK: - Timing

    /// The in-call backoff before retry `n` (full jitter), or nil when it would leave the call's
    /// retry window (`settle.retry_within_seconds`) or its budget.
    func nextDelay(_ n: Int, started: ContinuousClock.Instant) -> Double? {
        let elapsed = Self.seconds(ContinuousClock.now - started)
        let delay = Double.random(in: 0...min(timing.maxBackoff, timing.firstBackoff * pow(2, Double(n))))
        guard elapsed + delay < settle.retryWithin, elapsed + delay + Self.minimumStep <= timing.callBudget else { return nil }
        return delay
    }

    /// What is left of the call's budget for one network step, or nil when too little.
    func remaining(_ started: ContinuousClock.Instant) -> Double? {
        let left = timing.callBudget - Self.seconds(ContinuousClock.now - started)
        return left >= Self.minimumStep ? min(sendTimeout, left) : nil
    }

    /// The shortest network step worth starting.
    static let minimumStep: Double = 1

    static func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }

    /// When a row left unknown is tried again: after about half its age (between `minRetry` and
    /// `maxRetry`, full jitter over the upper half), never after its deadline.
    func nextTry(created: Date, at t: Date, deadline: Date) -> Date {
        let base = min(max(t.timeIntervalSince(created) / 2, timing.minRetry), timing.maxRetry)
        return min(t.addingTimeInterval(base * Double.random(in: 0.5...1)), deadline)
    }

    /// The next try of a row whose status query said "not found" too soon after a send: once the
    /// row has been quiet long enough for that answer to be believed (`isQuiet`).
    func quietAgain(_ held: Held) -> Date {
        min(now().addingTimeInterval(sendTimeout + timing.margin + Double.random(in: 0...timing.minRetry)), held.deadline)
    }

    func deadline(of row: LedgerEntry) -> Date { row.deadlineAt ?? row.createdAt.addingTimeInterval(settle.deadline) }

    /// Whether nothing was done on the row for longer than a send's timeout plus the margin: every
    /// send first writes the row, so no send of it can still reach the processor.
    func isQuiet(_ row: LedgerEntry, at t: Date) -> Bool {
        t.timeIntervalSince(row.updatedAt) > sendTimeout + timing.margin
    }

    static let neverAnswered = "sent; the processor's answer never came"

    /// Given up at its deadline (`LedgerStore.giveUp`): unknown for good.
    static func isGivenUp(_ row: LedgerEntry) -> Bool { row.state == .unknown && row.nextTryAt == nil }

    // MARK: - What the gateway knows

    public func authorization(of paymentID: String) async throws(ProcessorError) -> AuthorizationState? {
        let row: LedgerEntry?
        do { row = try await ledger.entry(paymentID) } catch { throw .unavailable("the ledger failed (\(error.code))") }
        guard let row else { return nil }
        if row.state == .done, let outcome = Self.outcome(row) { return .outcome(outcome) }
        let t = now()
        if Self.isGivenUp(row) || (!row.isLeased(at: t) && t > deadline(of: row)) {
            return .unknown(reason: row.reason ?? Self.neverAnswered, attempts: row.attempts, deadline: deadline(of: row))
        }
        return .pending(pending(row, at: t))
    }

    func pending(_ row: LedgerEntry, at t: Date) -> PendingAuthorization {
        let inFlight = row.isLeased(at: t)
        return PendingAuthorization(
            resend: settle.resend, statusQuery: settle.status != nil, inFlight: inFlight, attempts: row.attempts,
            nextTryAt: inFlight ? (row.leaseUntil ?? t) : (row.nextTryAt ?? row.leaseUntil ?? t), deadlineAt: deadline(of: row),
            reason: row.reason ?? (inFlight ? "being sent to the processor" : Self.neverAnswered))
    }

    public func confirm(paymentID: String, threeDSResult: String) async throws(ProcessorError) -> AuthorizationOutcome {
        throw .refused(.paymentNotAwaitingAction, "the relay does not run 3-D Secure challenges")
    }

    // MARK: - Background settlement

    /// Asks the status query about every row of this processor that is due (`unknown` and due,
    /// or `sending` with an expired lease: a gateway died mid-call), each under a lease: found →
    /// settled; not found and quiet for a send's timeout plus the margin → the processor never got
    /// it, the row is deleted (nothing charged; GET answers 404); otherwise → unknown again, with
    /// backoff. The number of rows asked about. Without a status query there is nothing to ask:
    /// rows wait for a re-post (`resend`) or the deadline.
    @discardableResult
    public func settleDue() async -> Int {
        guard settle.status != nil else { return 0 }
        let rows: [LedgerEntry]
        do { rows = try await ledger.dueForSettlement(processor: name, now: now()) } catch {
            logger.warning("settling: the ledger failed", metadata: ["error": "\(error.code)"])
            return 0
        }
        var asked = 0
        for row in rows where await settleInBackground(row) { asked += 1 }
        return asked
    }

    /// One due row (see `settleDue`); false when another gateway took it first.
    func settleInBackground(_ row: LedgerEntry) async -> Bool {
        let t = now()
        guard let leased = try? await ledger.lease(row.paymentID, attempts: row.attempts, leaseUntil: t.addingTimeInterval(sendTimeout + timing.margin), now: t)
        else { return false }
        let held = Held(leased, deadline: settle.deadline)
        guard let currency = Currency(row.currency) else {
            _ = await leaveUnknown(held, reason: "the ledger row's currency is not known to this version")
            return true
        }
        let request = AuthorizationRequest(paymentID: row.paymentID, amount: row.amount, currency: currency)
        switch await queryStatus(request, timeout: sendTimeout) {
        case .found(let outcome):
            metrics.settled("settled")
            _ = try? await record(outcome, held)
            logger.notice("payment settled by the processor's status query", metadata: ["payment": "\(row.paymentID)", "status": "\(outcome.status)"])
        case .notFound where settle.resend:
            // Never forgotten while a re-send can settle it: "not found" may come from a processor
            // still working on the first send, or whose lookups lag, and a new payment for the
            // same order would then be a second charge. Due again with backoff, and never before
            // no send can still arrive: the sidecar, which holds the card's envelope, re-posts
            // it, and the processor's idempotency key (the payment id) makes the re-send charge
            // at most once; a row nobody re-posts is asked about again until its deadline.
            metrics.settled("unknown")
            _ = await leaveUnknown(held, reason: Self.notKnownResend, at: isQuiet(row, at: t) ? nil : quietAgain(held))
        case .notFound where isQuiet(row, at: t):
            if (try? await ledger.forget(held.paymentID, attempts: held.attempts, heldUntil: held.leaseUntil)) == true {
                metrics.settled("not_received")
                logger.notice("payment never received by the processor: nothing charged, ledger row removed", metadata: ["payment": "\(row.paymentID)"])
            }
        case .notFound:
            // Asked too soon after a send: ask again once no send can still arrive.
            metrics.settled("unknown")
            _ = await leaveUnknown(held, reason: Self.notKnownYet, at: quietAgain(held))
        case .unknown(let why):
            metrics.settled("unknown")
            _ = await leaveUnknown(held, reason: why)
        }
        return true
    }

    // MARK: - Ledger

    static func outcome(_ row: LedgerEntry) -> AuthorizationOutcome? {
        guard row.state == .done, let status = row.status else { return nil }
        switch status {
        case "succeeded": return .succeeded(reference: row.reference ?? "")
        case "requires_capture": return .authorized(reference: row.reference ?? "")
        case "requires_action": return .requiresAction(ThreeDSChallenge(transactionID: row.reference ?? "", payload: "", challengeURL: ""))
        default: return .declined(code: row.declineCode ?? "generic_decline", reference: row.reference)
        }
    }

    static func columns(_ o: AuthorizationOutcome) -> (String, String?, String?) {
        switch o {
        case .succeeded(let r): ("succeeded", nil, r)
        case .authorized(let r): ("requires_capture", nil, r)
        case .declined(let c, let r): ("declined", c, r)
        case .requiresAction(let ch): ("requires_action", nil, ch.transactionID)
        }
    }

    /// A ledger operation before this call sends. A store that fails is an unknown outcome (504),
    /// never "nothing charged": the payment id may have been sent by an earlier call, and a 503
    /// would let the sidecar drop a payment that was charged.
    func store<T>(_ what: String, _ body: () async throws(StoreError) -> T) async throws(ProcessorError) -> T {
        do { return try await body() } catch { throw .outcomeUnknown("the ledger failed to \(what) (\(error.code)); nothing was sent by this call") }
    }
}
