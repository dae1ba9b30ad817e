import Foundation
import Store
import VaultCrypto

/// Something done to a payment after its authorization (README "Capture, cancel, refund"): a
/// capture, a cancel (void) or a refund. Recorded by the sidecar before the gateway is called,
/// exactly like a payment's intent, under the caller's idempotency key; its outcome recorded when
/// the gateway answers (or when the reconciler asks it, after a crash or a lost answer). The
/// operation's id is the processor's idempotency key. No card data.
public struct PaymentOperation: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable {
        case capture, cancel, refund

        /// The id prefix: `cap_`, `void_`, `re_`.
        public var idPrefix: String {
            switch self {
            case .capture: "cap_"
            case .cancel: "void_"
            case .refund: "re_"
            }
        }
    }

    public enum Status: String, Sendable, CaseIterable {
        /// Recorded; the gateway may have been called, the outcome is not known yet.
        case processing
        case succeeded
        /// Accepted by the processor, not completed (a refund the bank has not settled).
        case pending
        /// Refused by the processor (`code`); changes nothing on the payment.
        case failed
    }

    /// `cap_`/`void_`/`re_` + 128 random bits.
    public var id: String
    public var paymentID: String
    public var kind: Kind
    /// The key space of `idempotencyKey` (the calling peer's uid, `PaymentScope.peer`).
    public var scope: String
    public var idempotencyKey: String
    /// The canonical request (`capture=pay_…&amount=…`), to tell a replay from another request.
    public var request: String
    /// Minor units of the payment's currency (the whole authorized amount for a cancel).
    public var amount: Int
    public var currency: String
    public var status: Status
    /// The processor's failure code (`failed`), e.g. `refund_failed`.
    public var code: String?
    /// The processor's reference of the operation.
    public var reference: String?
    public var createdAt: Date
    public var updatedAt: Date
    /// The caller's metadata (refunds: README "Metadata").
    public var metadata: Metadata

    public init(
        id: String, paymentID: String, kind: Kind, scope: String, idempotencyKey: String, request: String, amount: Int, currency: String,
        status: Status = .processing, code: String? = nil, reference: String? = nil, createdAt: Date, updatedAt: Date? = nil,
        metadata: Metadata = Metadata()
    ) {
        self.metadata = metadata
        self.id = id
        self.paymentID = paymentID
        self.kind = kind
        self.scope = scope
        self.idempotencyKey = idempotencyKey
        self.request = request
        self.amount = amount
        self.currency = currency
        self.status = status
        self.code = code
        self.reference = reference
        self.createdAt = createdAt
        self.updatedAt = updatedAt ?? createdAt
    }
}

/// What `beginOperation` found.
public enum OperationBegin: Sendable, Equatable {
    /// The intent was recorded: go on and call the gateway.
    case created
    /// An operation with that scope and idempotency key exists (the caller compares requests).
    case existing(PaymentOperation)
    /// The payment does not allow it; nothing was recorded.
    case refused(OperationRefusal)
}

/// Why an operation is not allowed on a payment (each is a code of the catalogue, mapped by the sidecar).
public enum OperationRefusal: Sendable, Equatable {
    case paymentNotFound
    /// Not `requires_capture`, or a capture or cancel of it is recorded already.
    case notCapturable, notCancelable
    /// Nothing captured.
    case notRefundable
    /// The authorization lapsed (the payment is now `canceled`, code `expired`).
    case authorizationExpired
    case exceedsAuthorized(authorized: Int)
    /// `available`: what may still be refunded.
    case exceedsCaptured(available: Int)
}

/// Where operations are recorded, beside the payments (`SQLPaymentStore`). Every change is durable
/// when the method returns.
public protocol PaymentOperationStore: Sendable {
    /// Records a new operation (`processing`) unless its (scope, idempotency key) is taken, in one
    /// transaction with the checks against its payment: a capture or cancel needs a payment
    /// `requires_capture`, not expired at `now`, with no live capture or cancel; a capture at most
    /// the authorized amount; a refund a captured payment and at most what its refunds (succeeded,
    /// pending or processing) leave. An expired authorization is marked `canceled` here.
    func beginOperation(_ op: PaymentOperation, now: Date) async throws(StoreError) -> OperationBegin

    /// Sets an operation's outcome (from `processing`, or a `pending` one's final outcome) and, in
    /// the same transaction, its effect on the payment: a capture makes it `succeeded` with
    /// `amount_captured`, a cancel `canceled` (code `requested`), a refund adds to
    /// `amount_refunded`. False when it was already settled so (a late duplicate changes nothing).
    func finishOperation(_ id: String, status: PaymentOperation.Status, code: String?, reference: String?, now: Date) async throws(StoreError) -> Bool

    /// Deletes an operation known never to have reached a processor, so its key can be tried again.
    func abandonOperation(_ id: String) async throws(StoreError)

    func operation(_ id: String) async throws(StoreError) -> PaymentOperation?
    func findOperation(scope: String, idempotencyKey: String) async throws(StoreError) -> PaymentOperation?

    /// Operations still `processing` last touched before `before`, oldest first (to reconcile).
    func unsettledOperations(before: Date, limit: Int) async throws(StoreError) -> [PaymentOperation]

    /// Marks authorizations lapsed at `now` `canceled` (code `expired`): the one named by `id`, or
    /// every one when `id` is nil (the sweep); not one with a capture or cancel recorded. Returns
    /// the ids marked.
    func expireAuthorizations(_ id: String?, now: Date) async throws(StoreError) -> [String]

    /// A page of the store's refunds (every scope), newest first, with `status` and of `payment` when given.
    /// With `metadata`: only refunds whose metadata holds every pair.
    func listRefunds(
        _ q: ListQuery, status: PaymentOperation.Status?, payment: String?, metadata: [(key: String, value: String)]
    ) async throws(StoreError) -> ListPage<PaymentOperation>
}

extension PaymentOperationStore {
    /// A page without a metadata search.
    public func listRefunds(_ q: ListQuery, status: PaymentOperation.Status?, payment: String?) async throws(StoreError) -> ListPage<PaymentOperation> {
        try await listRefunds(q, status: status, payment: payment, metadata: [])
    }
}
