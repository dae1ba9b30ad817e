import Foundation
import GatewayAPI
import Money
import Store
import VaultCrypto
import VaultOpen

/// What the gateway asks a processor to do: authorize and capture `amount` on the opened card.
public struct AuthorizationRequest: Sendable, Equatable {
    /// The sidecar's payment id; processors use it as their idempotency key.
    public var paymentID: String
    /// Minor units, > 0.
    public var amount: Int
    public var currency: Currency
    /// False: authorize only (the outcome is `.authorized`, captured later by an operation).
    public var capture: Bool

    /// The caller's idempotency key is not part of it: it is scoped to the caller, free text,
    /// and never reaches a processor (the payment id is the processor's idempotency key).
    public init(paymentID: String, amount: Int, currency: Currency, capture: Bool = true) {
        self.paymentID = paymentID
        self.amount = amount
        self.currency = currency
        self.capture = capture
    }
}

/// A processor's answer. Never carries card data.
public enum AuthorizationOutcome: Sendable, Equatable {
    /// Charged; `reference` is the processor's id for the charge.
    case succeeded(reference: String)
    /// Refused by the issuer or the processor, with a stable lower-snake code
    /// (`generic_decline`, `insufficient_funds`, `expired_card`, `incorrect_cvc`, `processing_error`, …).
    case declined(code: String, reference: String?)
    /// The cardholder must complete a 3-D Secure challenge first.
    case requiresAction(ThreeDSChallenge)
    /// Authorized only (`capture: false`): the funds are held under `reference` until a capture
    /// or a void (`PaymentProcessor.operate`).
    case authorized(reference: String)

    /// `succeeded`, `declined`, `requires_action` or `requires_capture`.
    public var status: String {
        switch self {
        case .authorized: "requires_capture"
        case .succeeded: "succeeded"
        case .declined: "declined"
        case .requiresAction: "requires_action"
        }
    }
}

/// A 3-D Secure challenge (the Cardinal flow): the transaction, its payload and where the
/// cardholder completes it.
public struct ThreeDSChallenge: Sendable, Equatable {
    public var transactionID: String
    public var payload: String
    public var challengeURL: String

    public init(transactionID: String, payload: String, challengeURL: String) {
        self.transactionID = transactionID
        self.payload = payload
        self.challengeURL = challengeURL
    }
}

/// What the gateway knows of a payment id (`GET /v1/authorizations/{payment_id}`).
public enum AuthorizationState: Sendable, Equatable {
    /// The processor's outcome.
    case outcome(AuthorizationOutcome)
    /// Sent, the outcome not known yet: being settled.
    case pending(PendingAuthorization)
    /// Still not known at the settlement deadline: reported `unknown` until an operator settles
    /// it by hand (`vault payments settle`).
    case unknown(reason: String, attempts: Int, deadline: Date)
}

/// Every way a processor call can fail, one case per cause; each answers with a code of the
/// catalogue (`ErrorCode`), so nothing a processor (or its ledger in the store) throws can reach
/// the caller uncoded.
public enum ProcessorError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Nothing was charged: no connection was made, a 5xx the processor documents as "nothing
    /// charged", or the ledger could not be read; the caller may retry with the same payment id
    /// (503 `GATEWAY_UNAVAILABLE`).
    case unavailable(String)
    /// The processor may have acted but its answer was lost or unclear (a timeout, a dropped
    /// connection, a 5xx, a 3xx, an unreadable answer), or the ledger failed while the payment id
    /// may have been sent: 504 `GATEWAY_UNAVAILABLE`, the payment stays open and its outcome is
    /// settled (docs/errors.md "Unknown outcomes").
    case outcomeUnknown(String)
    /// Another call (on this or another gateway of the store) holds the payment id now: it is
    /// sending it or asking the processor about it. 504 `AUTHORIZATION_IN_PROGRESS`, never a second
    /// send; the sidecar keeps the payment `processing` and asks again.
    case inProgress
    /// The payment id was sent and its outcome is being settled, but nothing can be done with this
    /// call now: its next try is not due, or the template neither re-sends nor has a status query.
    /// 504 `AUTHORIZATION_PENDING` with the settlement's state.
    case pending(PendingAuthorization)
    /// The settlement deadline passed with the outcome still unknown: answered as
    /// `{"status":"unknown","reason",…}` (200), for an operator to settle by hand.
    case deadlinePassed(reason: String, attempts: Int, deadline: Date)
    /// A payment id already charged with another amount, currency or card (409 `PAYMENT_ID_REUSED`).
    case paymentIDReused
    /// A coded refusal of the request (not a decline): a 3-D Secure result, a relay URL the gateway
    /// does not send to, no such authorization or challenge. The catalogue gives its status.
    case refused(ErrorCode, String)

    /// The catalogue code the gateway answers with.
    public var code: ErrorCode {
        switch self {
        case .unavailable, .outcomeUnknown, .deadlinePassed: .gatewayUnavailable
        case .inProgress: .authorizationInProgress
        case .pending: .authorizationPending
        case .paymentIDReused: .paymentIDReused
        case .refused(let code, _): code
        }
    }

    /// Why, for people and logs (never card data).
    public var reason: String {
        switch self {
        case .unavailable(let why), .outcomeUnknown(let why), .refused(_, let why): why
        case .inProgress: "another call holds this payment id now"
        case .pending(let p): p.reason
        case .deadlinePassed(let reason, _, _): reason
        case .paymentIDReused: "this payment id was already used with another amount, currency or card"
        }
    }

    public var description: String { "\(code.rawValue): \(reason)" }
}

/// Where charges go: the built-in sandbox, or a real processor through the relay.
///
/// `authorize` must be idempotent by `paymentID`: a second call with the same id and request
/// returns the first outcome and charges nothing more; with another request it throws
/// `ProcessorError.paymentIDReused`. The card is in clear only for the call's duration. Both processors keep
/// their ledger in the vault's store (`LedgerStore`), shared by every gateway of the store.
public protocol PaymentProcessor: Sendable {
    /// A short name for logs and metrics (`sandbox`, `relay:<template>`); the ledger's `processor`.
    var name: String { get }
    /// Its ledger in the vault's store (the gateway's readiness asks it a cheap query).
    var ledger: LedgerStore { get }
    /// - Throws: any `ProcessorError`: `.unavailable` only when nothing was charged.
    func authorize(_ request: AuthorizationRequest, card: OpenedCard) async throws(ProcessorError) -> AuthorizationOutcome
    /// Completes a payment that required 3-D Secure with the result JWT the cardholder's challenge
    /// produced (validated by `ThreeDSValidator`).
    /// - Throws: `.refused` (the result, or a payment not waiting for it), `.unavailable`.
    func confirm(paymentID: String, threeDSResult: String) async throws(ProcessorError) -> AuthorizationOutcome
    /// What is known of a payment id, or nil when it was never sent (or the processor said it never
    /// received it): nil means nothing was charged.
    /// - Throws: `.unavailable` when the ledger cannot be read.
    func authorization(of paymentID: String) async throws(ProcessorError) -> AuthorizationState?
    /// Captures, voids or refunds an authorized payment by the reference its authorization left in
    /// the ledger (never the card: no envelope is opened). Idempotent by the operation id: a repeat
    /// answers the first outcome.
    /// - Throws: `.refused` (the authorization does not allow it, an amount too large, a processor
    ///   without the operation: `OPERATION_NOT_SUPPORTED`), `.unavailable` (nothing was sent),
    ///   `.outcomeUnknown`, `.inProgress`.
    func operate(_ request: OperationRequest) async throws(ProcessorError) -> GatewayOperationOutcome
    /// What is known of an operation id, or nil when it was never sent.
    func operation(_ operationID: String) async throws(ProcessorError) -> LedgerOperation?
}
