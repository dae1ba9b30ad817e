import Foundation
import Store
import VaultCrypto

/// A payment as the sidecar records it: the intent (written before the gateway is called) and,
/// once known, its outcome. No card data: a token id, an amount, codes and references.
public struct PaymentRecord: Sendable, Equatable {
    public enum Status: String, Sendable, CaseIterable {
        /// The intent is recorded and the gateway may have been called; the outcome is not known yet.
        case processing
        case succeeded
        case declined
        /// Waiting for the cardholder (3-D Secure).
        case requiresAction = "requires_action"
        /// Refused before any charge (an envelope the gateway would not open, a token gone).
        case failed
        /// Settlement gave up finding the outcome by its deadline (`reason` says why): it may
        /// have been charged, so it keeps holding a single-use token, and a later answer from the
        /// processor still settles it.
        case unknown
        /// Authorized only (`capture: false`): the funds are held until it is captured
        /// (`succeeded`), canceled, or its authorization expires (`canceled`, code `expired`).
        case requiresCapture = "requires_capture"
        /// The authorization was voided (code `requested`) or expired (code `expired`) before capture.
        case canceled

        /// True once nothing more will happen to it (`unknown` is not: it may still settle; a
        /// succeeded payment may still be refunded, but its status stays).
        public var isFinal: Bool { self == .succeeded || self == .declined || self == .failed || self == .canceled }
    }

    /// `pay_` + 128 random bits.
    public var id: String
    /// Whose key space `idempotencyKey` lives in (`PaymentScope`): a peer's uid, a checkout
    /// session, or the global scope of payments made before scopes existed and of mandate cycles.
    public var scope: String
    /// The caller's key, unique within `scope`: the same scope, key and request return this
    /// payment, never a second charge.
    public var idempotencyKey: String
    /// What was asked, in a canonical form (`token=…&amount=…&currency=…`), to tell a replay from
    /// a different request under the same key.
    public var request: String
    public var token: String
    /// Whether the token is single use: then at most one live payment may use it.
    public var singleUse: Bool
    public var amount: Int
    public var currency: String
    public var status: Status
    /// The decline code (declined) or the error code (failed).
    public var code: String?
    /// The processor's reference.
    public var reference: String?
    /// For `requires_action`: the `next_action` JSON object.
    public var nextAction: String?
    /// For `unknown`: why the outcome is not known (the last failure), for people.
    public var reason: String?
    public var createdAt: Date
    public var updatedAt: Date
    /// Authorize only (`capture: false`): the outcome is `requires_capture`, not `succeeded`.
    public var manualCapture: Bool
    /// What a capture took (set by `POST /v1/payments/{id}/capture`); a payment captured at once
    /// captured its `amount` (`capturedAmount`).
    public var amountCaptured: Int?
    /// The sum of its refunds that succeeded.
    public var amountRefunded: Int
    /// When an authorization held by `requires_capture` lapses (intent time + `authorization_ttl`).
    public var authorizationExpiresAt: Date?
    /// The caller's metadata (README "Metadata").
    public var metadata: Metadata

    /// What was taken from the card: the capture's amount, the whole amount of a payment captured
    /// at once, nil while nothing is captured.
    public var capturedAmount: Int? {
        guard status == .succeeded else { return nil }
        return amountCaptured ?? amount
    }

    public init(
        id: String, scope: String = PaymentScope.global, idempotencyKey: String, request: String, token: String, singleUse: Bool,
        amount: Int, currency: String, status: Status = .processing, code: String? = nil, reference: String? = nil,
        nextAction: String? = nil, reason: String? = nil, createdAt: Date, updatedAt: Date? = nil, manualCapture: Bool = false,
        amountCaptured: Int? = nil, amountRefunded: Int = 0, authorizationExpiresAt: Date? = nil,
        metadata: Metadata = Metadata()
    ) {
        self.metadata = metadata
        self.manualCapture = manualCapture
        self.amountCaptured = amountCaptured
        self.amountRefunded = amountRefunded
        self.authorizationExpiresAt = authorizationExpiresAt
        self.id = id
        self.scope = scope
        self.idempotencyKey = idempotencyKey
        self.request = request
        self.token = token
        self.singleUse = singleUse
        self.amount = amount
        self.currency = currency
        self.status = status
        self.code = code
        self.reference = reference
        self.nextAction = nextAction
        self.reason = reason
        self.createdAt = createdAt
        self.updatedAt = updatedAt ?? createdAt
    }
}

/// The key spaces of idempotency keys. A key is unique within its scope only: the same key sent by
/// two peers, or in two checkout sessions, names two independent payments, and nothing about one
/// is visible through the other.
public enum PaymentScope {
    /// Rows made before scopes existed (migrated in place) and mandate cycles, whose keys
    /// (`mandate:<id>:cycle:<n>`) the vault makes itself under a prefix callers may not use.
    public static let global = "global"
    /// `POST /v1/payments` by the peer with this uid (`SO_PEERCRED`).
    public static func peer(uid: UInt32) -> String { "uid:\(uid)" }
    /// The scope used when no peer credentials are known (routes served without the peer
    /// middleware, as in tests; the sidecar itself refuses such requests before any route runs).
    public static let unknownPeer = "uid:unknown"
    /// `POST /v1/sessions/{id}/pay`: the key lives in that session's scope.
    public static func session(_ id: String) -> String { "session:\(id)" }
}

/// What `begin` found.
public enum PaymentBegin: Sendable, Equatable {
    /// The intent was recorded: go on and call the gateway.
    case created
    /// A payment with that scope and idempotency key exists (whatever its request: the caller compares).
    case existing(PaymentRecord)
}

/// Where payments are recorded: `SQLPaymentStore` over either backend of `Store.Database`, one
/// test suite run on both.
///
/// Every method that changes something returns only after the change is durable, so an intent is
/// on disk before the gateway is called and a restart can reconcile it.
public protocol PaymentStore: Sendable {
    /// Records a new intent (status `processing`) unless its (scope, idempotency key) is taken.
    /// - Throws: `TOKEN_IN_USE` when the token is single use and another payment on it is
    ///   processing, waiting for 3-D Secure or succeeded; `STORE_UNAVAILABLE`.
    func begin(_ record: PaymentRecord) async throws(StoreError) -> PaymentBegin

    /// Sets the outcome of a payment that is `processing`, `requires_action` or `unknown` (a late
    /// answer settles it; its reason is cleared). False when it is already final (a late
    /// duplicate outcome changes nothing). `consuming`: a single-use token its success consumes,
    /// deleted in the same transaction (one durable commit, not two).
    func finish(
        _ id: String, status: PaymentRecord.Status, code: String?, reference: String?, nextAction: String?, now: Date, consuming token: String?
    ) async throws(StoreError) -> Bool

    /// Deletes an intent known never to have reached a processor (the gateway could not be
    /// reached at all), so the same idempotency key can be tried again.
    func abandon(_ id: String) async throws(StoreError)

    /// A payment by id.
    func get(_ id: String) async throws(StoreError) -> PaymentRecord?

    /// The payment made under an idempotency key in a scope, if any (never one of another scope).
    func find(scope: String, idempotencyKey: String) async throws(StoreError) -> PaymentRecord?

    /// The payments made under an idempotency key in each of `scopes`, in one read: scope → payment.
    func find(scopes: [String], idempotencyKey: String) async throws(StoreError) -> [String: PaymentRecord]

    /// Marks a payment still `processing` as `unknown` with `reason` (settlement gave up by its
    /// deadline). False when it is not `processing` (settled meanwhile, or already unknown).
    func markUnknown(_ id: String, reason: String, now: Date) async throws(StoreError) -> Bool

    /// An operator's settlement (`vault payments settle`) of a payment still `processing` or
    /// `unknown`: `status` succeeded or declined records that outcome; nil (not charged) deletes
    /// the payment so its idempotency key, and a single-use token, may be used again. False when
    /// it was in neither state (changed meanwhile, or gone).
    func settleByHand(_ id: String, status: PaymentRecord.Status?, code: String?, reference: String?, now: Date) async throws(StoreError) -> Bool

    /// Payments whose outcome is not known (`processing` or `unknown`) that were last touched
    /// before `before`, oldest first, at most `limit` (to reconcile).
    func unsettled(before: Date, limit: Int) async throws(StoreError) -> [PaymentRecord]

    /// How many payments the store holds in each state (`all`), or only in the backlog states
    /// `processing` and `unknown` (through their partial index, however large the table), and
    /// when the oldest one still `processing` was made: for metrics. Store-wide.
    func stateCounts(all: Bool) async throws(StoreError) -> PaymentStateCounts

    /// A page of the store's payments (every scope), newest first, with `status` and of the
    /// `customer` (paid through the customer or one of its mandates) when given.
    func list(
        _ q: ListQuery, status: PaymentRecord.Status?, customer: String?, metadata: [(key: String, value: String)]
    ) async throws(StoreError) -> ListPage<PaymentRecord>
}

/// The payments of a store by state (`PaymentStore.stateCounts(all:)`).
public struct PaymentStateCounts: Sendable, Equatable {
    /// The states counted (every state, or the backlog's), with 0 for one no payment is in.
    public var byStatus: [PaymentRecord.Status: Int]
    /// When the oldest payment still `processing` was made; nil when none is.
    public var oldestProcessing: Date?

    /// The states `stateCounts(all: false)` counts.
    public static let backlog: [PaymentRecord.Status] = [.processing, .unknown]

    public init(byStatus: [PaymentRecord.Status: Int], counted: [PaymentRecord.Status] = PaymentRecord.Status.allCases, oldestProcessing: Date?) {
        self.byStatus = Dictionary(uniqueKeysWithValues: counted.map { ($0, byStatus[$0] ?? 0) })
        self.oldestProcessing = oldestProcessing
    }
}

extension PaymentStore {
    /// `finish` consuming no token.
    public func finish(
        _ id: String, status: PaymentRecord.Status, code: String?, reference: String?, nextAction: String?, now: Date
    ) async throws(StoreError) -> Bool {
        try await finish(id, status: status, code: code, reference: reference, nextAction: nextAction, now: now, consuming: nil)
    }

    /// A page without a metadata search.
    public func list(_ q: ListQuery, status: PaymentRecord.Status?, customer: String?) async throws(StoreError) -> ListPage<PaymentRecord> {
        try await list(q, status: status, customer: customer, metadata: [])
    }
}
