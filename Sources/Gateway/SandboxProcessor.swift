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
    ] as [(String, Rule)]).map { (Array($0.0.utf8), $0.1) }

    enum Rule: Equatable { case decline(String), challenge }

    /// Opens (creating if needed) the sandbox's charge ledger at `path`.
    public init(
        ledgerPath path: String, threeDS: ThreeDSValidator, challengeBase: String = "/v1/sandbox/3ds/",
        now: @escaping @Sendable () -> Date = Date.init
    ) throws {
        var config = Configuration()
        // WAL: one fsync per commit instead of a rollback journal's several; FULL: durable on return.
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        db = try DatabaseQueue(path: path, configuration: config)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("sandbox-v1") { db in
            try db.execute(sql: """
                CREATE TABLE sandbox_charges (
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
            // 3-D Secure challenges (the jti of the challenge request is the result's aud) and
            // the result ids already used (a result confirms one payment, once).
            try db.execute(sql: """
                CREATE TABLE sandbox_3ds (
                    transaction_id TEXT PRIMARY KEY NOT NULL,
                    payment_id TEXT NOT NULL,
                    request_jti TEXT NOT NULL
                )
                """)
            try db.execute(sql: "CREATE TABLE sandbox_3ds_used (jti TEXT PRIMARY KEY NOT NULL)")
        }
        try migrator.migrate(db)
        self.threeDS = threeDS
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
                if case .requiresAction(let ch) = decided {
                    try db.execute(
                        sql: "INSERT INTO sandbox_3ds (transaction_id, payment_id, request_jti) VALUES (?, ?, ?)",
                        arguments: [ch.transactionID, request.paymentID, RandomID.make(prefix: "jti_")])
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

    /// The sandbox ACS: the cardholder completes challenge `transactionID` with `action`
    /// (SUCCESS, NOACTION, FAILURE, ERROR, CANCEL, TIMEOUT); the answer is the result JWT that
    /// the caller posts to confirm the payment. The JWT is valid for ten minutes.
    public func completeChallenge(transactionID: String, action: String) async throws -> String {
        guard ThreeDSValidator.Action(rawValue: action) != nil else {
            throw ProcessorRefusal(status: 422, code: "THREE_DS_ACTION_INVALID", message: "action is SUCCESS, NOACTION, FAILURE, ERROR, CANCEL or TIMEOUT")
        }
        let row: Row?
        do {
            row = try await db.read { db in try Row.fetchOne(db, sql: "SELECT request_jti FROM sandbox_3ds WHERE transaction_id = ?", arguments: [transactionID]) }
        } catch {
            throw ProcessorUnavailable("the sandbox ledger failed")
        }
        guard let row else {
            throw ProcessorRefusal(status: 404, code: "THREE_DS_TRANSACTION_NOT_FOUND", message: "no 3DS challenge with that transaction id")
        }
        let t = now()
        return try await threeDS.sign(
            action: action, audience: row["request_jti"], issuedAt: t, expiresAt: t.addingTimeInterval(600), id: RandomID.make(prefix: "jti_"))
    }

    public func confirm(paymentID: String, threeDSResult: String) async throws -> AuthorizationOutcome {
        let found: Row?
        do {
            found = try await db.read { db in
                try Row.fetchOne(db, sql: """
                    SELECT c.status, t.request_jti FROM sandbox_charges c LEFT JOIN sandbox_3ds t ON t.transaction_id = c.transaction_id
                    WHERE c.payment_id = ?
                    """, arguments: [paymentID])
            }
        } catch {
            throw ProcessorUnavailable("the sandbox ledger failed")
        }
        guard let found else {
            throw ProcessorRefusal(status: 404, code: "AUTHORIZATION_NOT_FOUND", message: "the processor has no authorization for this payment id")
        }
        let status: String = found["status"]
        guard status == "requires_action", let audience: String = found["request_jti"] else {
            throw ProcessorRefusal(status: 409, code: "PAYMENT_NOT_AWAITING_ACTION", message: "this payment is not waiting for 3-D Secure")
        }
        let (action, resultID) = try await threeDS.validate(threeDSResult, expectedAudience: audience, now: now())
        let reference = RandomID.make(prefix: "sbx_")
        do {
            return try await db.write { db in
                // One result confirms one payment, once; a second confirmation races here and loses.
                let used = try Bool.fetchOne(db, sql: "SELECT 1 FROM sandbox_3ds_used WHERE jti = ?", arguments: [resultID]) ?? false
                if used { throw ThreeDSValidator.Failure(code: "THREE_DS_JWT_REPLAYED", message: "this 3DS result was already used") }
                try db.execute(sql: "INSERT INTO sandbox_3ds_used (jti) VALUES (?)", arguments: [resultID])
                let outcome: AuthorizationOutcome = action.declineCode.map { .declined(code: $0, reference: reference) } ?? .succeeded(reference: reference)
                let code: String? = if case .declined(let c, _) = outcome { c } else { nil }
                try db.execute(
                    sql: "UPDATE sandbox_charges SET status = ?, decline_code = ?, reference = ? WHERE payment_id = ? AND status = 'requires_action'",
                    arguments: [outcome.status, code, reference, paymentID])
                guard db.changesCount == 1 else {
                    throw ProcessorRefusal(status: 409, code: "PAYMENT_NOT_AWAITING_ACTION", message: "this payment is not waiting for 3-D Secure")
                }
                return outcome
            }
        } catch let error as ThreeDSValidator.Failure {
            throw error
        } catch let error as ProcessorRefusal {
            throw error
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
