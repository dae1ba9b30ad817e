import Money
import VaultCrypto
import VaultOpen

/// What the gateway asks a processor to do: authorize and capture `amount` on the opened card.
public struct AuthorizationRequest: Sendable, Equatable {
    /// The sidecar's payment id; processors use it as their idempotency key.
    public var paymentID: String
    /// Minor units, > 0.
    public var amount: Int
    public var currency: Currency

    /// The caller's idempotency key is not part of it: it is scoped to the caller, free text,
    /// and never reaches a processor (the payment id is the processor's idempotency key).
    public init(paymentID: String, amount: Int, currency: Currency) {
        self.paymentID = paymentID
        self.amount = amount
        self.currency = currency
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

    /// `succeeded`, `declined` or `requires_action`.
    public var status: String {
        switch self {
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

/// A processor could not be reached or answered nonsense (timeouts, 5xx): nothing is known to be
/// charged, and the caller may retry with the same payment id.
public struct ProcessorUnavailable: Error, Sendable, CustomStringConvertible {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { "GATEWAY_UNAVAILABLE: \(reason)" }
}

/// A payment id already charged with another amount, currency or card (409 `PAYMENT_ID_REUSED`).
public struct PaymentIDReused: Error, Sendable {
    public init() {}
}

/// The payment id was sent to the processor by an earlier call whose outcome is not recorded
/// (still in flight, or its answer was lost): 504 `AUTHORIZATION_IN_PROGRESS`, never a second
/// send. The sidecar keeps the payment `processing` and reconciles it.
public struct PaymentInProgress: Error, Sendable {
    public init() {}
}

/// A processor's coded refusal of a request (not a decline): status and stable code.
public struct ProcessorRefusal: Error, Sendable, Equatable {
    public let status: Int
    public let code: String
    public let message: String
    public init(status: Int, code: String, message: String) {
        self.status = status
        self.code = code
        self.message = message
    }
}

/// Where charges go: the built-in sandbox, or a real processor through the relay.
///
/// `authorize` must be idempotent by `paymentID`: a second call with the same id and request
/// returns the first outcome and charges nothing more; with another request it throws
/// `PaymentIDReused`. The card is in clear only for the call's duration.
public protocol PaymentProcessor: Sendable {
    /// A short name for logs and metrics (`sandbox`, `relay`).
    var name: String { get }
    /// - Throws: `ProcessorUnavailable`, `PaymentIDReused`.
    func authorize(_ request: AuthorizationRequest, card: OpenedCard) async throws -> AuthorizationOutcome
    /// Completes a payment that required 3-D Secure with the result JWT the cardholder's challenge
    /// produced (validated by `ThreeDSValidator`).
    /// - Throws: `ThreeDSValidator.Failure`, `ProcessorRefusal`, `ProcessorUnavailable`.
    func confirm(paymentID: String, threeDSResult: String) async throws -> AuthorizationOutcome
    /// The outcome recorded for a payment id, or nil if the processor never saw it (reconciling
    /// after a crash: nil means nothing was charged).
    func outcome(of paymentID: String) async throws(ProcessorUnavailable) -> AuthorizationOutcome?
}
