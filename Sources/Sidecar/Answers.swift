import CardRules
import Foundation
import Payments
import SocketHTTP
import Tokenizer
import VaultCrypto

/// The API's answers as `Encodable` models, one per schema of openapi.json (field names and
/// order as the schema and earlier versions write them), encoded by `AnswerJSON`. Metadata only:
/// no model holds card data beyond the card's metadata (brand, BIN, last 4, expiry, fingerprint).
enum Answer {
    /// `CardMetadata`.
    struct Card: Encodable, Sendable {
        let brand: String, bin: String, last4: String, length: Int
        let exp_month: Int, exp_year: Int
        let fingerprint: String?

        init(_ c: CardMetadata) {
            // The visible prefix (DESIGN §1), whatever an older row holds.
            (brand, bin, last4, length, exp_month, exp_year, fingerprint) = (
                c.brand.rawValue, CardNumberInfo.visiblePrefix(c.bin, length: c.length), c.last4, c.length, c.expMonth, c.expYear, c.fingerprint
            )
        }
    }

    /// `Token`.
    struct Token: Encodable, Sendable {
        let token: String
        let card: Card
        let expires_at: String
        let cvc_expires_at: OrNull<String>
        let has_cvc: Bool, single_use: Bool
        let metadata: Metadata

        init(_ r: TokenRecord) {
            token = r.token
            card = Card(r.card)
            expires_at = JSONOut.iso(r.expiresAt)
            cvc_expires_at = OrNull(r.cvcExpiresAt.map(JSONOut.iso))
            has_cvc = r.hasCVC
            single_use = r.singleUse
            metadata = r.metadata
        }
    }

    /// `Payment`: `token` or `instrument` (what paid), `customer`/`mandate` when paid through one,
    /// the code under the name its status gives it.
    struct Payment: Encodable, Sendable {
        let id: String, status: String, amount: Int, currency: String
        let token: String?, instrument: String?, customer: String?, mandate: String?
        let capture_method: String, amount_captured: Int, amount_refunded: Int
        let authorization_expires_at: String?
        let failure_code: String?, cancellation_reason: String?, decline_code: String?
        let reference: String?
        let next_action: RawJSON?
        let reason: String?
        let metadata: Metadata
        let created_at: String, updated_at: String

        init(_ p: PaymentRecord) {
            func field(_ name: String) -> String? {
                p.request.hasPrefix(name + "=") ? String(p.request.dropFirst(name.count + 1).prefix { $0 != "&" }) : nil
            }
            (id, status, amount, currency) = (p.id, p.status.rawValue, p.amount, p.currency)
            let byInstrument = p.token.hasPrefix("ins_")
            token = byInstrument ? nil : p.token
            instrument = byInstrument ? p.token : nil
            customer = field("customer")
            mandate = field("mandate")
            capture_method = p.manualCapture ? "manual" : "automatic"
            amount_captured = p.capturedAmount ?? 0
            amount_refunded = p.amountRefunded
            let holding = p.status == .requiresCapture || p.status == .processing
            authorization_expires_at = p.manualCapture && holding ? p.authorizationExpiresAt.map(JSONOut.iso) : nil
            failure_code = p.status == .failed ? p.code : nil
            cancellation_reason = p.status == .canceled ? p.code : nil
            decline_code = p.status != .failed && p.status != .canceled ? p.code : nil
            reference = p.reference
            next_action = p.nextAction.map(RawJSON.init)
            reason = p.reason
            metadata = p.metadata
            created_at = JSONOut.iso(p.createdAt)
            updated_at = JSONOut.iso(p.updatedAt)
        }
    }

    /// `Refund`.
    struct Refund: Encodable, Sendable {
        let id: String, object = "refund", payment: String, status: String, amount: Int, currency: String
        let failure_code: String?, reference: String?
        let metadata: Metadata
        let created_at: String, updated_at: String

        init(_ op: PaymentOperation) {
            (id, payment, status, amount, currency) = (op.id, op.paymentID, op.status.rawValue, op.amount, op.currency)
            (failure_code, reference, metadata) = (op.code, op.reference, op.metadata)
            created_at = JSONOut.iso(op.createdAt)
            updated_at = JSONOut.iso(op.updatedAt)
        }
    }

    /// `Instrument`.
    struct Instrument: Encodable, Sendable {
        let id: String, customer: String, card: Card, created_at: String

        init(_ i: InstrumentRecord) {
            (id, customer, card, created_at) = (i.id, i.customer, Card(i.envelope.card), JSONOut.iso(i.createdAt))
        }
    }

    /// `Customer`: with its `instruments` for its own GET, without them (nil) in lists.
    struct Customer: Encodable, Sendable {
        let id: String
        let reference: OrNull<String>, default_instrument: OrNull<String>
        let instruments: [Instrument]?
        let metadata: Metadata
        let created_at: String

        init(_ c: CustomerRecord, _ instruments: [InstrumentRecord]?) {
            id = c.id
            reference = OrNull(c.reference)
            default_instrument = OrNull(c.defaultInstrument)
            self.instruments = instruments?.map(Instrument.init)
            metadata = c.metadata
            created_at = JSONOut.iso(c.createdAt)
        }
    }

    /// `CustomerErasure`.
    struct Erasure: Encodable, Sendable {
        struct Erased: Encodable, Sendable { let instruments: [String], mandates_cancelled: [String] }
        let id: String, deleted = true, erased: Erased

        init(_ e: CustomerErasure) {
            id = e.customer
            erased = Erased(instruments: e.instruments, mandates_cancelled: e.mandatesCancelled)
        }
    }

    /// `Session`: `expired` once an open session's time has passed.
    struct Session: Encodable, Sendable {
        let id: String, status: String, amount: Int, currency: String, accepted_brands: [String]
        let customer: OrNull<String>, payment: OrNull<String>
        let attempts: Int
        let created_at: String, expires_at: String

        init(_ s: SessionRecord, now: Date) {
            (id, amount, currency, accepted_brands) = (s.id, s.amount, s.currency, s.acceptedBrands)
            status = s.status == .open && now >= s.expiresAt ? "expired" : s.status.rawValue
            (customer, payment, attempts) = (OrNull(s.customer), OrNull(s.paymentID), s.attempts)
            (created_at, expires_at) = (JSONOut.iso(s.createdAt), JSONOut.iso(s.expiresAt))
        }
    }

    /// `Mandate`.
    struct Mandate: Encodable, Sendable {
        let id: String, status: String, customer: String, instrument: String
        let amount: Int, max_amount: Int, currency: String, interval: String, max_cycles: Int
        let created_at: String, expires_at: String

        init(_ m: MandateRecord) {
            (id, status, customer, instrument) = (m.id, m.status.rawValue, m.customer, m.instrument)
            (amount, max_amount, currency, interval, max_cycles) = (m.amount, m.maxAmount, m.currency, m.interval.rawValue, m.maxCycles)
            (created_at, expires_at) = (JSONOut.iso(m.createdAt), JSONOut.iso(m.expiresAt))
        }
    }

    /// The list envelope of every list route (`PaymentList`, `RefundList`, …).
    struct List<Item: Encodable & Sendable>: Encodable, Sendable {
        let object = "list"
        let data: [Item]
        let has_more: Bool
    }
}
