import CardRules
import Foundation
import GatewayAPI
import Store
import Money
import VaultCrypto
import VaultOpen

/// The built-in processor: behaves like a real one for the public test numbers (README "Payments")
/// and approves every other valid, unexpired card.
///
/// | number | outcome |
/// |---|---|
/// | 4242 4242 4242 4242 (and any other valid card) | succeeded |
/// | 4000 0000 0000 0002 | declined `generic_decline` |
/// | 4000 0000 0000 9995 | declined `insufficient_funds` |
/// | 4000 0000 0000 3220 | requires_action (3-D Secure challenge) |
/// | 4000 0000 0000 0069 | declined `expired_card` |
/// | 4000 0000 0000 0127 | declined `incorrect_cvc` |
/// | 4000 0000 0000 0119 | declined `processing_error` |
/// | 4000 0000 0000 5126 | succeeded; every refund of it `failed` (`refund_failed`) |
/// | 4000 0000 0000 7726 | succeeded; every refund of it stays `pending` |
///
/// With `capture: false` a card that would succeed is authorized only (`requires_capture`);
/// captures, voids and refunds (`operate`) are rows of the ledger's operations, decided at once
/// from the authorization's row (never the card), idempotent by operation id.
///
/// Like a real processor it is idempotent by payment id, durably: its charges are rows of the
/// processor ledger in the vault's store (`vault_ledger`, with the 3-D Secure challenges in
/// `vault_sandbox_3ds`), and a second authorization of the same payment returns the first outcome
/// without charging again, also after a restart and through another gateway of the store. The
/// sandbox decides at once: its outcomes are never unknown.
public final class SandboxProcessor: PaymentProcessor {
    public let name = "sandbox"
    public let ledger: LedgerStore
    private let now: @Sendable () -> Date
    /// Base of the challenge URLs of the sandbox ACS.
    let challengeBase: String
    /// The sandbox's 3DS server: signs challenge results and validates them on confirm.
    let threeDS: ThreeDSValidator

    /// The test numbers and what they do. Public test numbers, not card data.
    static let rules: [(digits: [UInt8], outcome: Rule)] = ([
        ("4000000000000002", .decline("generic_decline")),
        ("4000000000009995", .decline("insufficient_funds")),
        ("4000000000003220", .challenge),
        ("4000000000000069", .decline("expired_card")),
        ("4000000000000127", .decline("incorrect_cvc")),
        ("4000000000000119", .decline("processing_error")),
        ("4000000000005126", .refund(refundFails)),
        ("4000000000007726", .refund(refundPending)),
    ] as [(String, Rule)]).map { (Array($0.0.utf8), $0.1) }

    enum Rule: Equatable { case decline(String), challenge, refund(String) }
    /// The refund behaviours of the refund test cards, as the ledger keeps them.
    static let refundFails = "refund_fails", refundPending = "refund_pending"

    /// The sandbox over a migrated store's ledger.
    public init(
        ledger: LedgerStore, threeDS: ThreeDSValidator, challengeBase: String = "/v1/sandbox/3ds/",
        now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.ledger = ledger
        self.threeDS = threeDS
        self.challengeBase = challengeBase
        self.now = now
    }

    public func authorize(_ request: AuthorizationRequest, card: OpenedCard) async throws(ProcessorError) -> AuthorizationOutcome {
        let decided = decide(request, card: card)
        var entry = LedgerEntry(
            paymentID: request.paymentID, processor: name, amount: request.amount, currency: request.currency.code,
            envelopeID: card.envelopeID, state: .done, status: decided.status, createdAt: now())
        var challenge: (transactionID: String, requestJTI: String)?
        switch decided {
        case .succeeded(let r), .authorized(let r): entry.reference = r
        case .declined(let c, let r): (entry.declineCode, entry.reference) = (c, r)
        case .requiresAction(let ch):
            entry.transactionID = ch.transactionID
            // The challenge request's jti: the audience of the result JWT that confirms it.
            challenge = (ch.transactionID, RandomID.make(prefix: "jti_"))
        }
        let claim: LedgerClaim
        do { claim = try await ledger.claim(entry, challenge: challenge, refundRule: refundRule(card)) } catch {
            throw .unavailable("the sandbox ledger failed (\(error.code))")
        }
        switch claim {
        case .claimed: return decided
        case .existing(let row):
            // A payment id is one charge: the same id with another amount, currency or card is refused.
            guard row.sameRequest(amount: request.amount, currency: request.currency.code, envelopeID: card.envelopeID) else {
                throw .paymentIDReused
            }
            // A row the sandbox did not write (a relay's, in a shared store) is not its to answer.
            guard let outcome = Self.outcome(row: row, base: challengeBase) else { throw .inProgress }
            return outcome
        }
    }

    public func authorization(of paymentID: String) async throws(ProcessorError) -> AuthorizationState? {
        let row: LedgerEntry?
        do { row = try await ledger.entry(paymentID) } catch { throw .unavailable("the sandbox ledger failed (\(error.code))") }
        guard let row else { return nil }
        guard let outcome = Self.outcome(row: row, base: challengeBase) else {
            throw .unavailable("this payment id is another processor's, not settled yet")
        }
        return .outcome(outcome)
    }

    /// The sandbox ACS: the cardholder completes challenge `transactionID` with `action`
    /// (SUCCESS, NOACTION, FAILURE, ERROR, CANCEL, TIMEOUT); the answer is the result JWT that
    /// the caller posts to confirm the payment. The JWT is valid for ten minutes.
    public func completeChallenge(transactionID: String, action: String) async throws(ProcessorError) -> String {
        guard ThreeDSValidator.Action(rawValue: action) != nil else {
            throw .refused(.threeDSActionInvalid, "action is SUCCESS, NOACTION, FAILURE, ERROR, CANCEL or TIMEOUT")
        }
        let found: (paymentID: String, requestJTI: String)?
        do { found = try await ledger.challenge(transactionID) } catch {
            throw .unavailable("the sandbox ledger failed (\(error.code))")
        }
        guard let found else {
            throw .refused(.threeDSTransactionNotFound, "no 3DS challenge with that transaction id")
        }
        let t = now()
        do {
            return try await threeDS.sign(
                action: action, audience: found.requestJTI, issuedAt: t, expiresAt: t.addingTimeInterval(600), id: RandomID.make(prefix: "jti_"))
        } catch {
            throw .unavailable("the sandbox 3DS server could not sign the result (\(type(of: error)))")
        }
    }

    public func confirm(paymentID: String, threeDSResult: String) async throws(ProcessorError) -> AuthorizationOutcome {
        let found: (entry: LedgerEntry, requestJTI: String?)?
        do { found = try await ledger.awaitingChallenge(paymentID) } catch {
            throw .unavailable("the sandbox ledger failed (\(error.code))")
        }
        guard let found else {
            throw .refused(.authorizationNotFound, "the processor has no authorization for this payment id")
        }
        guard found.entry.state == .done, found.entry.status == "requires_action", let audience = found.requestJTI else {
            throw .refused(.paymentNotAwaitingAction, "this payment is not waiting for 3-D Secure")
        }
        let (action, resultID): (ThreeDSValidator.Action, String)
        do throws(ThreeDSValidator.Failure) {
            (action, resultID) = try await threeDS.validate(threeDSResult, expectedAudience: audience, now: now())
        } catch {
            throw .refused(error.code, error.message)
        }
        let reference = RandomID.make(prefix: "sbx_")
        let outcome: AuthorizationOutcome = action.declineCode.map { .declined(code: $0, reference: reference) } ?? .succeeded(reference: reference)
        let code: String? = if case .declined(let c, _) = outcome { c } else { nil }
        // One result confirms one payment, once; a second confirmation races in the store and loses.
        let confirmation: LedgerStore.Confirmation
        do {
            confirmation = try await ledger.confirmChallenge(
                paymentID, resultID: resultID, status: outcome.status, declineCode: code, reference: reference, now: now())
        } catch {
            throw .unavailable("the sandbox ledger failed (\(error.code))")
        }
        switch confirmation {
        case .confirmed: return outcome
        case .resultReplayed: throw .refused(.threeDSJWTReplayed, "this 3DS result was already used")
        case .notAwaiting:
            throw .refused(.paymentNotAwaitingAction, "this payment is not waiting for 3-D Secure")
        }
    }

    /// The test card's rule, if it is one.
    func rule(_ card: OpenedCard) -> Rule? {
        card.card.number.withUnsafeBytes { raw in Self.rules.first { $0.digits.elementsEqual(raw) }?.outcome }
    }

    /// A refund test card's behaviour, kept in the ledger with its authorization.
    func refundRule(_ card: OpenedCard) -> String? {
        if case .refund(let r)? = rule(card) { return r }
        return nil
    }

    /// What the sandbox does with this card (before looking at its ledger).
    func decide(_ request: AuthorizationRequest, card: OpenedCard) -> AuthorizationOutcome {
        let decided = decideCharge(request, card: card)
        if !request.capture, case .succeeded(let reference) = decided { return .authorized(reference: reference) }
        return decided
    }

    func decideCharge(_ request: AuthorizationRequest, card: OpenedCard) -> AuthorizationOutcome {
        switch rule(card) {
        case .decline(let code):
            return .declined(code: code, reference: RandomID.make(prefix: "sbx_"))
        case .challenge:
            let transaction = RandomID.make(prefix: "3ds_")
            return .requiresAction(Self.challenge(transaction: transaction, base: challengeBase, paymentID: request.paymentID))
        case nil, .refund:
            if card.card.expiry.calendarMonth < CalendarMonth.of(now()) {
                return .declined(code: "expired_card", reference: RandomID.make(prefix: "sbx_"))
            }
            return .succeeded(reference: RandomID.make(prefix: "sbx_"))
        }
    }

    static func challenge(transaction: String, base: String, paymentID: String) -> ThreeDSChallenge {
        let payload = Data("{\"transaction_id\":\"\(transaction)\",\"payment_id\":\"\(paymentID)\"}".utf8).base64EncodedString()
        return ThreeDSChallenge(transactionID: transaction, payload: payload, challengeURL: base + transaction)
    }

    /// A done row as the sandbox answers it; nil for a row that is not done.
    static func outcome(row: LedgerEntry, base: String) -> AuthorizationOutcome? {
        guard row.state == .done, let status = row.status else { return nil }
        switch status {
        case "succeeded": return .succeeded(reference: row.reference ?? "")
        case "requires_capture": return .authorized(reference: row.reference ?? "")
        case "requires_action":
            return .requiresAction(challenge(transaction: row.transactionID ?? row.reference ?? "", base: base, paymentID: row.paymentID))
        default: return .declined(code: row.declineCode ?? "generic_decline", reference: row.reference)
        }
    }
}

extension SandboxProcessor {
    /// Captures, voids and refunds, decided at once: every capture and void of an authorization
    /// that allows it succeeds; a refund succeeds, or fails (`refund_failed`) or stays `pending`
    /// for the refund test cards. The ledger checks the amounts against the authorization.
    public func operate(_ request: OperationRequest) async throws(ProcessorError) -> GatewayOperationOutcome {
        let rule: String?
        do { rule = request.kind == .refund ? try await ledger.refundRule(request.paymentID) : nil } catch {
            throw .unavailable("the sandbox ledger failed (\(error.code))")
        }
        var decided = GatewayOperationOutcome(status: "succeeded", reference: RandomID.make(prefix: "sbx_"))
        if rule == Self.refundFails { (decided.status, decided.failureCode) = ("failed", "refund_failed") }
        if rule == Self.refundPending { decided.status = "pending" }
        let row = LedgerOperation(
            operationID: request.operationID, paymentID: request.paymentID, kind: request.kind.rawValue, processor: name,
            amount: request.amount, currency: request.currency, state: .done, status: decided.status, failureCode: decided.failureCode,
            reference: decided.reference, createdAt: now())
        let claim: LedgerOperationClaim
        do { claim = try await ledger.claimOperation(row) } catch { throw .unavailable("the sandbox ledger failed (\(error.code))") }
        switch claim {
        case .claimed: return decided
        case .refused(let code, let message): throw .refused(code, message)
        case .existing(let first):
            guard first.sameRequest(kind: request.kind.rawValue, paymentID: request.paymentID, amount: request.amount) else {
                throw .refused(.paymentIDReused, "this operation id was already used for another operation")
            }
            guard first.state == .done, let status = first.status else { throw .inProgress }
            return GatewayOperationOutcome(status: status, failureCode: first.failureCode, reference: first.reference)
        }
    }

    public func operation(_ operationID: String) async throws(ProcessorError) -> LedgerOperation? {
        do { return try await ledger.operation(operationID) } catch { throw .unavailable("the sandbox ledger failed (\(error.code))") }
    }
}

extension CalendarMonth {
    /// The UTC month of `date`.
    static func of(_ date: Date) -> CalendarMonth {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let c = calendar.dateComponents([.year, .month], from: date)
        return CalendarMonth(year: c.year!, month: c.month!)
    }
}
