import CardRules
import Foundation
import GRDB
import Money
import VaultCrypto
import VaultOpen

/// The built-in processor: behaves like a real one for the public test numbers (DESIGN §7) and
/// approves every other valid, unexpired card.
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
///
/// Like a real processor it is idempotent by payment id, durably: its charges live in a SQLite
/// file (`sandbox_charges`), and a second authorization of the same payment returns the first
/// outcome without charging again, also after a restart.
public final class SandboxProcessor: PaymentProcessor {
    public let name = "sandbox"
    private let db: DatabaseQueue
    private let now: @Sendable () -> Date
    /// Base of the challenge URLs of the sandbox ACS.
    let challengeBase: String

    /// The test numbers and what they do. Public test numbers, not card data.
    static let rules: [(digits: [UInt8], outcome: Rule)] = ([
        ("4000000000000002", .decline("generic_decline")),
        ("4000000000009995", .decline("insufficient_funds")),
        ("4000000000003220", .challenge),
        ("4000000000000069", .decline("expired_card")),
        ("4000000000000127", .decline("incorrect_cvc")),
        ("4000000000000119", .decline("processing_error")),
    ] as [(String, Rule)]).map { (Array($0.0.utf8), $0.1) }

    enum Rule: Equatable { case decline(String), challenge }

    /// Opens (creating if needed) the sandbox's charge ledger at `path`.
    public init(ledgerPath path: String, challengeBase: String = "sandbox://acs/", now: @escaping @Sendable () -> Date = Date.init) throws {
        var config = Configuration()
        config.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        db = try DatabaseQueue(path: path, configuration: config)
        try db.write { db in
            try db.execute(sql: """
                CREATE TABLE IF NOT EXISTS sandbox_charges (
                    payment_id TEXT PRIMARY KEY NOT NULL,
                    amount INTEGER NOT NULL,
                    currency TEXT NOT NULL,
                    status TEXT NOT NULL,
                    decline_code TEXT,
                    reference TEXT,
                    transaction_id TEXT,
                    created_at INTEGER NOT NULL,
                    envelope_id TEXT NOT NULL DEFAULT ''
                )
                """)
        }
        self.challengeBase = challengeBase
        self.now = now
    }

    public func authorize(_ request: AuthorizationRequest, card: OpenedCard) async throws -> AuthorizationOutcome {
        let decided = decide(request, card: card)
        do {
            return try await db.write { db in
                if let row = try Row.fetchOne(
                    db, sql: "SELECT status, decline_code, reference, transaction_id, amount, currency, envelope_id FROM sandbox_charges WHERE payment_id = ?",
                    arguments: [request.paymentID]) {
                    // A payment id is one charge: the same id with another amount, currency or card is refused.
                    let amount: Int = row["amount"], currency: String = row["currency"], envelopeID: String = row["envelope_id"]
                    guard amount == request.amount, currency == request.currency.code, envelopeID == card.envelopeID else {
                        throw PaymentIDReused()
                    }
                    return Self.outcome(row: row, base: self.challengeBase, paymentID: request.paymentID)
                }
                var code: String?, reference: String?, transaction: String?
                switch decided {
                case .succeeded(let r): reference = r
                case .declined(let c, let r): code = c; reference = r
                case .requiresAction(let ch): transaction = ch.transactionID
                }
                try db.execute(
                    sql: "INSERT INTO sandbox_charges (payment_id, amount, currency, status, decline_code, reference, transaction_id, created_at, envelope_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    arguments: [request.paymentID, request.amount, request.currency.code, decided.status, code, reference, transaction,
                                Int64(self.now().timeIntervalSince1970), card.envelopeID])
                return decided
            }
        } catch let error as PaymentIDReused {
            throw error
        } catch {
            throw ProcessorUnavailable("the sandbox ledger failed: \(error is DatabaseError ? "SQLite error" : "\(type(of: error))")")
        }
    }

    public func outcome(of paymentID: String) async throws(ProcessorUnavailable) -> AuthorizationOutcome? {
        do {
            return try await db.read { db in
                try Row.fetchOne(db, sql: "SELECT status, decline_code, reference, transaction_id FROM sandbox_charges WHERE payment_id = ?", arguments: [paymentID])
                    .map { Self.outcome(row: $0, base: self.challengeBase, paymentID: paymentID) }
            }
        } catch {
            throw ProcessorUnavailable("the sandbox ledger failed")
        }
    }

    /// What the sandbox does with this card (before looking at its ledger).
    func decide(_ request: AuthorizationRequest, card: OpenedCard) -> AuthorizationOutcome {
        let rule = card.card.number.withUnsafeBytes { raw in Self.rules.first { $0.digits.elementsEqual(raw) }?.outcome }
        switch rule {
        case .decline(let code):
            return .declined(code: code, reference: RandomID.make(prefix: "sbx_"))
        case .challenge:
            let transaction = RandomID.make(prefix: "3ds_")
            return .requiresAction(Self.challenge(transaction: transaction, base: challengeBase, paymentID: request.paymentID))
        case nil:
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

    static func outcome(row: Row, base: String, paymentID: String) -> AuthorizationOutcome {
        let status: String = row["status"]
        switch status {
        case "succeeded": return .succeeded(reference: row["reference"])
        case "requires_action": return .requiresAction(challenge(transaction: row["transaction_id"], base: base, paymentID: paymentID))
        default: return .declined(code: row["decline_code"] ?? "generic_decline", reference: row["reference"])
        }
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
