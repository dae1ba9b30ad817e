import Foundation
import GatewayAPI
import Logging
import Payments
import SocketHTTP
import Store
import VaultCrypto

/// After the authorization (README "Capture, cancel, refund"): captures, cancels (voids) and
/// refunds, each made exactly like a payment. The operation is recorded durably (with its checks
/// against the payment, in one transaction) before the gateway is called; the gateway acts on the
/// processor's reference, never the card, and is idempotent by the operation's id; a lost answer
/// leaves the operation `processing` until the reconciler asks the gateway; the same idempotency
/// key and request replay the first answer.
extension PaymentService {
    /// A capture, cancel or refund as asked.
    public struct OperationAsk: Sendable {
        public var kind: PaymentOperation.Kind
        public var paymentID: String
        /// Capture: at most the authorized amount (nil: all of it). Refund: nil refunds what the
        /// succeeded refunds left. Cancel: none.
        public var amount: Int?
        /// The caller's key (the body's `idempotency_key` or the `Idempotency-Key` header); nil:
        /// this request is not replayable.
        public var idempotencyKey: String?
        public var scope: String
        /// A refund's metadata (not part of `canonical`: a replay answers the first refund).
        public var metadata: Metadata

        public init(
            kind: PaymentOperation.Kind, paymentID: String, amount: Int? = nil, idempotencyKey: String?, scope: String, metadata: Metadata = Metadata()
        ) {
            (self.kind, self.paymentID, self.amount, self.idempotencyKey, self.scope) = (kind, paymentID, amount, idempotencyKey, scope)
            self.metadata = metadata
        }

        /// The canonical form stored with the operation: a replay must match it exactly.
        var canonical: String { "\(kind.rawValue)=\(paymentID)&amount=\(amount.map(String.init) ?? "default")" }
    }

    /// Makes (or replays) an operation; `created` is false for a replay.
    public func operate(_ ask: OperationAsk) async throws(VaultError) -> (operation: PaymentOperation, created: Bool) {
        let ops = try operationStore()
        if let key = ask.idempotencyKey,
           let existing = try await store({ () throws(StoreError) in try await ops.findOperation(scope: ask.scope, idempotencyKey: key) }) {
            return (try await replay(existing, ask), false)
        }
        let p = try await payment(ask.paymentID)
        let amount: Int
        switch ask.kind {
        case .capture: amount = ask.amount ?? p.amount
        case .cancel: amount = p.amount
        case .refund: amount = ask.amount ?? max(1, (p.capturedAmount ?? 0) - p.amountRefunded)
        }
        let t = now()
        let op = PaymentOperation(
            id: RandomID.make(prefix: ask.kind.idPrefix), paymentID: p.id, kind: ask.kind, scope: ask.scope,
            idempotencyKey: ask.idempotencyKey ?? RandomID.make(prefix: "auto_"), request: ask.canonical, amount: amount, currency: p.currency,
            createdAt: t, metadata: ask.metadata.droppingEmptyValues)
        switch try await store({ () throws(StoreError) in try await ops.beginOperation(op, now: t) }) {
        case .existing(let existing): return (try await replay(existing, ask), false)
        case .refused(let refusal): throw Self.error(refusal, ask.kind)
        case .created: break
        }
        guard let outcome = try await send(op) else { return (op, true) }
        return (try await record(outcome, for: op), true)
    }

    /// A refund (or any operation) by id.
    public func operation(_ id: String) async throws(VaultError) -> PaymentOperation {
        let ops = try operationStore()
        guard let op = try await store({ () throws(StoreError) in try await ops.operation(id) }) else {
            throw VaultError(.refundNotFound, "no refund with that id")
        }
        return op
    }

    func operationStore() throws(VaultError) -> any PaymentOperationStore {
        guard let operations else { throw VaultError(.storeUnavailable, "this payment store keeps no captures, cancels or refunds") }
        return operations
    }

    /// Sends a recorded operation: its outcome, or nil when the answer was lost (it stays
    /// `processing`, for the reconciler). Nothing sent: the intent is dropped (503, the key may
    /// be retried). A coded refusal: the operation is `failed` with that code, and thrown.
    func send(_ op: PaymentOperation) async throws(VaultError) -> GatewayOperationOutcome? {
        let request = OperationRequest(
            operationID: op.id, kind: Self.gatewayKind(op.kind), paymentID: op.paymentID, amount: op.amount, currency: op.currency)
        do throws(GatewayClient.Failure) {
            return try await gateway.operate(request)
        } catch {
            let ops = try operationStore()
            if error.nothingSent {
                try? await ops.abandonOperation(op.id)
                logger.warning("operation not sent", metadata: ["operation": "\(op.id)", "reason": "\(error.reason)"])
                throw VaultError(.gatewayUnavailable, "\(error.reason); nothing was done, retry with the same idempotency key")
            }
            if case .refused(let code, let message) = error {
                _ = try? await ops.finishOperation(op.id, status: .failed, code: code.rawValue, reference: nil, now: now())
                throw VaultError(code, message)
            }
            logger.warning("operation outcome not known yet; reconciling", metadata: ["operation": "\(op.id)", "reason": "\(error.reason)"])
            return nil
        }
    }

    /// Records the gateway's outcome of an operation (and its effect on the payment).
    func record(_ outcome: GatewayOperationOutcome, for op: PaymentOperation) async throws(VaultError) -> PaymentOperation {
        let ops = try operationStore()
        let status = PaymentOperation.Status(rawValue: outcome.status) ?? .failed
        let t = now()
        _ = try await store { () throws(StoreError) in
            try await ops.finishOperation(op.id, status: status, code: outcome.failureCode, reference: outcome.reference, now: t)
        }
        logger.info("operation", metadata: [
            "operation": "\(op.id)", "kind": "\(op.kind.rawValue)", "payment": "\(op.paymentID)", "status": "\(status.rawValue)",
        ])
        return try await store { () throws(StoreError) in try await ops.operation(op.id) } ?? op
    }

    /// The first operation under the key: the same request gets it (after waiting while it is in
    /// flight); another request 409 `IDEMPOTENCY_KEY_REUSED`.
    func replay(_ existing: PaymentOperation, _ ask: OperationAsk) async throws(VaultError) -> PaymentOperation {
        guard existing.request == ask.canonical else {
            throw VaultError(.idempotencyKeyReused, "this idempotency key was used for a different request")
        }
        let ops = try operationStore()
        var current = existing
        let deadline = ContinuousClock.now + replayWait
        while current.status == .processing, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(25))
            guard let fresh = try await store({ () throws(StoreError) in try await ops.operation(existing.id) }) else {
                throw VaultError(.gatewayUnavailable, "the first request under this key was not sent; nothing was done, retry")
            }
            current = fresh
        }
        if current.status == .failed, let code = current.code, let coded = ErrorCode(rawValue: code) {
            throw VaultError(coded, "\(current.id) failed: \(code)")
        }
        return current
    }

    /// Operations a crash or a lost answer left `processing`: the gateway's outcome is recorded;
    /// one it never saw is dropped (once no call can still be on its way); one it has sent but
    /// not settled is sent again under the same operation id (the processor's idempotency key).
    func reconcileOperations(before cutoff: Date, abandonBefore: Date) async -> Int {
        guard let ops = operations, let stale = try? await ops.unsettledOperations(before: cutoff, limit: 100) else { return 0 }
        var settled = 0
        for op in stale {
            let known: GatewayClient.OperationState
            do throws(GatewayClient.Failure) { known = try await gateway.operation(op.id) } catch {
                if error.nothingSent { break }
                continue
            }
            switch known {
            case .outcome(let outcome):
                if (try? await record(outcome, for: op)) != nil { settled += 1 }
            case .notFound:
                guard op.updatedAt < abandonBefore else { continue }
                try? await ops.abandonOperation(op.id)
                settled += 1
            case .pending:
                if let outcome = try? await send(op), (try? await record(outcome, for: op)) != nil { settled += 1 }
            }
        }
        return settled
    }

    static func gatewayKind(_ kind: PaymentOperation.Kind) -> OperationRequest.Kind {
        switch kind {
        case .capture: .capture
        case .cancel: .void
        case .refund: .refund
        }
    }

    static func error(_ refusal: OperationRefusal, _ kind: PaymentOperation.Kind) -> VaultError {
        switch refusal {
        case .paymentNotFound: VaultError(.paymentNotFound, "no payment with that id", field: kind == .refund ? "payment" : nil)
        case .notCapturable: VaultError(.paymentNotCapturable, "the payment is not requires_capture, or a capture or cancel of it is recorded")
        case .notCancelable: VaultError(.paymentNotCancelable, "the payment is not requires_capture, or a capture or cancel of it is recorded")
        case .notRefundable: VaultError(.paymentNotRefundable, "the payment has captured nothing")
        case .authorizationExpired: VaultError(.authorizationExpired, "the authorization expired before it was captured; the payment is canceled")
        case .exceedsAuthorized(let authorized):
            VaultError(.captureExceedsAuthorized, "a capture is at most the authorized amount (\(authorized))", field: "amount")
        case .exceedsCaptured(let available):
            VaultError(.refundExceedsCaptured, "the refunds would exceed the captured amount: \(available) may still be refunded", field: "amount")
        }
    }

    /// A refund as the API shows it (openapi.json `Refund`). No card data.
    public static func refundJSON(_ op: PaymentOperation) -> String { AnswerJSON.encode(Answer.Refund(op)) }
}
