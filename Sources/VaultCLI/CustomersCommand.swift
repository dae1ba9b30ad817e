import ArgumentParser
import Foundation
import Logging
import Payments
import ServerCLI
import VaultCrypto

/// `vault customers`: operator commands on customers in a store.
struct CustomersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "customers",
        abstract: "Operator commands on customers (erase one, e.g. for a GDPR request).",
        subcommands: [CustomersDelete.self]
    )
}

/// `vault customers delete`: what `DELETE /v1/customers/{id}` does, on the store directly (a
/// sidecar need not run): the customer's instruments and their envelopes are deleted (not
/// flagged), its mandates cancelled, its reference removed, then the customer; in one
/// transaction. Prints what was erased. Refused while a payment of its instruments is in flight.
struct CustomersDelete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Erase a customer: its instruments' envelopes, mandates and reference.",
        discussion: """
            Prints each instrument erased and each mandate cancelled. Exit 1 with \
            CUSTOMER_NOT_FOUND or CUSTOMER_PAYMENT_IN_FLIGHT (nothing changed).

            Examples:
              vault customers delete cus_abc123 \\
                --store sqlite:/var/lib/vault-sidecar/vault.sqlite
              vault customers delete cus_abc123 \\
                --store postgres://vault@db.internal/vault \\
                --audit-log /var/log/vault-sidecar/audit.jsonl
            """
    )

    @Argument(help: "The customer id (cus_…).")
    var customerID: String

    @Option(help: "The store: sqlite:PATH or a postgres:// URL.")
    var store: String

    @Option(help: "Append an audit line to this file (docs/audit-log.md).", completion: .file())
    var auditLog: String?

    func run() async throws {
        var logger = Logger(label: "vault.customers")
        logger.logLevel = .warning
        let id = customerID
        do {
            guard id.hasPrefix("cus_"), id.count <= 64, id.utf8.allSatisfy({ (48...57).contains($0) || (97...122).contains($0) || $0 == 95 }) else {
                throw VaultError(.requestFieldInvalid, "a customer id is cus_ and lower-case letters or digits", field: "CUSTOMER_ID")
            }
            let deletion = try await StoreTables.withStore(store, logger: logger) { db in
                try await SQLCustomerStore(database: db).delete(id)
            }
            switch deletion {
            case .erased(let e):
                var lines = e.instruments.map { "erased instrument \($0) (its envelope deleted)" }
                lines += e.mandatesCancelled.map { "cancelled mandate \($0)" }
                lines.append("deleted customer \(e.customer): \(e.instruments.count) instruments erased, \(e.mandatesCancelled.count) mandates cancelled")
                try StandardIO.write(lines.joined(separator: "\n") + "\n")
                CLIAudit.record(auditLog, action: "customer_delete", customer: e.customer, detail: [("instruments", e.instruments.count), ("mandates", e.mandatesCancelled.count)])
            case .customerNotFound:
                throw VaultError(.customerNotFound, "no customer \(id) in this store")
            case .paymentInFlight:
                throw VaultError(.customerPaymentInFlight, "a payment of this customer's instruments is still in flight; retry once it has settled")
            }
        } catch let error as VaultError {
            if error.code == .customerNotFound || error.code == .customerPaymentInFlight {
                CLIAudit.record(auditLog, action: "customer_delete", outcome: error.code.rawValue, customer: id)
            }
            throw fail(error)
        }
    }
}
