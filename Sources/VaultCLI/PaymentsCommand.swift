#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import CardRules
import Foundation
import Logging
import Payments
import ServerCLI
import Store
import VaultCrypto

/// `vault payments`: operator commands on payments in a store.
struct PaymentsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "payments",
        abstract: "Operator commands on payments (settle an outcome by hand).",
        subcommands: [PaymentsSettle.self]
    )
}

/// `vault payments settle`: an operator settles a payment whose outcome the gateway could not find
/// out before the settlement deadline (docs/errors.md "Unknown outcomes"),
/// having looked it up at the processor (its dashboard, by the payment id: the processor's
/// idempotency key and the relay's `{{payment_id}}`).
///
/// In the store given (the gateway's, the sidecar's, or one PostgreSQL store shared by both):
/// - the processor ledger row (`vault_ledger`): `succeeded`/`declined` record that outcome (done);
///   `not-charged` deletes the row (the payment id was never charged and may be sent again);
/// - the payment (`vault_payments`), when the store has it and it is `processing` or `unknown`:
///   `succeeded`/`declined` finish it; `not-charged` deletes it, so its idempotency key (and a
///   single-use token) may be used again.
///
/// Refused (nothing changed): a ledger row or payment already finished with another outcome
/// (`SETTLE_CONFLICT`), a ledger row a gateway is sending or asking about right now
/// (`SETTLE_IN_FLIGHT`: try again in a minute), a payment id in neither table
/// (`PAYMENT_NOT_FOUND`). Running it again with the same outcome changes nothing and succeeds.
/// Each run appends an audit line (`payment_settle`) to `--audit-log`.
struct PaymentsSettle: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "settle",
        abstract: "Record a payment's outcome by hand, after checking it at the processor.",
        discussion: """
            For a payment reported unknown after the settlement deadline (GET /v1/authorizations/ID \
            answers {"status":"unknown"}; the gateway logs "payment outcome unknown after the settlement \
            deadline"). Look the payment id up at the processor first. Run it on the store that holds the \
            gateway's ledger, and on the sidecar's store if it is another one.

            Examples:
              vault payments settle pay_abc123 --store postgres://vault@db.internal/vault \\
                --outcome succeeded --reference pi_3Nx…
              vault payments settle pay_abc123 \\
                --store sqlite:/var/lib/vault-gateway/ledger.sqlite --outcome declined \\
                --decline-code card_declined
              vault payments settle pay_abc123 \\
                --store sqlite:/var/lib/vault-sidecar/vault.sqlite --outcome not-charged
            """
    )

    @Argument(help: "The payment id (pay_…).")
    var paymentID: String

    @Option(help: "The store: sqlite:PATH or a postgres:// URL.")
    var store: String

    @Option(help: "What the processor says: succeeded, declined or not-charged.", completion: .list(["succeeded", "declined", "not-charged"]))
    var outcome: String

    @Option(help: "The processor's reference of the charge (succeeded, declined).")
    var reference: String?

    @Option(help: "The decline code (declined; default generic_decline): lower-case letters, digits and _.")
    var declineCode: String?

    @Option(help: "Append an audit line to this file (docs/audit-log.md).", completion: .file())
    var auditLog: String?

    enum Outcome: String { case succeeded, declined, notCharged = "not-charged" }

    func run() async throws {
        var logger = Logger(label: "vault.payments")
        logger.logLevel = .warning
        let id = paymentID
        do {
            guard id.hasPrefix("pay_"), id.count <= 64, id.utf8.allSatisfy({ (48...57).contains($0) || (97...122).contains($0) || $0 == 95 }) else {
                throw VaultError(.requestFieldInvalid, "a payment id is pay_ and lower-case letters or digits", field: "PAYMENT_ID")
            }
            guard let outcome = Outcome(rawValue: outcome) else {
                throw VaultError(.requestFieldInvalid, "--outcome is succeeded, declined or not-charged", field: "--outcome")
            }
            if outcome != .declined, declineCode != nil {
                throw VaultError(.requestFieldInvalid, "--decline-code goes with --outcome declined", field: "--decline-code")
            }
            if outcome == .notCharged, reference != nil {
                throw VaultError(.requestFieldInvalid, "--reference goes with succeeded or declined (not-charged has no charge)", field: "--reference")
            }
            if let reference {
                guard !reference.isEmpty, reference.count <= 255, !reference.contains(where: { $0.isNewline }) else {
                    throw VaultError(.requestFieldInvalid, "--reference is one line of at most 255 characters", field: "--reference")
                }
                // A processor's reference is never a card number: refuse one pasted by mistake.
                guard !CardNumberScanner.containsCardNumber(reference) else {
                    throw VaultError(.requestFieldCardNumber, "--reference looks like a card number", field: "--reference")
                }
            }
            if let declineCode {
                guard !declineCode.isEmpty, declineCode.count <= 64,
                      declineCode.utf8.allSatisfy({ (48...57).contains($0) || (97...122).contains($0) || $0 == 95 })
                else { throw VaultError(.requestFieldInvalid, "--decline-code is lower-case letters, digits and _", field: "--decline-code") }
            }
            let status: String? = switch outcome {
            case .succeeded: "succeeded"
            case .declined: "declined"
            case .notCharged: nil
            }
            let code = declineCode
            let reference = self.reference
            let report = try await StoreTables.withStore(store, logger: logger) { db in
                try await Self.settle(id, status: status, declineCode: code, reference: reference, in: db)
            }
            try StandardIO.write(report.lines.joined(separator: "\n") + "\n")
            CLIAudit.record(
                auditLog, action: "payment_settle", payment: id,
                detail: [(outcome == .notCharged ? "not_charged" : outcome.rawValue, 1), ("ledger_changed", report.ledgerChanged ? 1 : 0),
                         ("payment_changed", report.paymentChanged ? 1 : 0)])
        } catch let error as VaultError {
            if error.code == .settleConflict || error.code == .settleInFlight || error.code.rawValue == "PAYMENT_NOT_FOUND" {
                CLIAudit.record(auditLog, action: "payment_settle", outcome: error.code.rawValue, payment: id)
            }
            throw fail(error)
        }
    }

    struct Report: Sendable {
        var lines: [String] = []
        var ledgerChanged = false
        var paymentChanged = false
    }

    /// Checks both rows first (nothing is changed when either refuses), then settles the ledger
    /// row and the payment, each by a compare-and-swap on its state: running it again is safe.
    /// `declineCode` nil: `generic_decline` for a declined outcome, and any recorded code matches.
    static func settle(_ id: String, status: String?, declineCode: String?, reference: String?, in db: Database) async throws(VaultError) -> Report {
        let ledger = LedgerStore(database: db)
        var report = Report()
        let row = try await mapped { () throws(StoreError) in try await ledger.entry(id) }
        let payments = SQLPaymentStore(database: db)
        let payment = try await mapped { () throws(StoreError) in try await payments.get(id) }
        guard row != nil || payment != nil else {
            throw VaultError(.paymentNotFound, "\(id) is neither in this store's ledger nor among its payments")
        }
        let open: Set<String> = ["processing", "unknown"]
        var settlePayment = false
        if let payment {
            let current = payment.status.rawValue
            if open.contains(current) {
                settlePayment = true
            } else if current != status || (declineCode != nil && payment.code != declineCode) {
                throw VaultError(.settleConflict, "the payment \(id) is \(current) already: it is not settled again")
            }
        }
        switch try await mapped({ () throws(StoreError) in try await ledger.settleByHand(id, status: status, declineCode: declineCode, reference: reference, now: Date()) }) {
        case .settled:
            report.ledgerChanged = true
            report.lines.append(status.map { "ledger: \(id) settled \($0)" } ?? "ledger: \(id) removed (not charged: the payment id may be sent again)")
        case .alreadySettled: report.lines.append("ledger: \(id) was \(status ?? "") already")
        case .noRow: report.lines.append("ledger: \(id) is not in this store's ledger")
        case .conflict(let recorded):
            throw VaultError(.settleConflict, "the ledger has \(id) done as \(recorded): it is not settled again")
        case .inFlight:
            throw VaultError(.settleInFlight, "a gateway is sending \(id) or asking the processor about it now: try again in a minute")
        }
        if settlePayment {
            let outcome = status.flatMap(PaymentRecord.Status.init(rawValue:))
            let code = status == "declined" ? declineCode ?? "generic_decline" : nil
            let changed = try await mapped { () throws(StoreError) in
                try await payments.settleByHand(id, status: outcome, code: code, reference: reference, now: Date())
            }
            report.paymentChanged = changed
            report.lines.append(
                !changed ? "payment: \(id) changed meanwhile: run the command again"
                    : status.map { "payment: \(id) \($0)" } ?? "payment: \(id) removed (its idempotency key may be used again)")
        } else if payment != nil {
            report.lines.append("payment: \(id) was \(status ?? "") already")
        } else {
            report.lines.append("payment: \(id) is not among this store's payments")
        }
        return report
    }

    /// A store operation, its error as the CLI reports it.
    static func mapped<T>(_ body: () async throws(StoreError) -> T) async throws(VaultError) -> T {
        do { return try await body() } catch { throw VaultError(store: error) }
    }
}
