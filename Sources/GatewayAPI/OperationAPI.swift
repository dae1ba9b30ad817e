import Foundation
import VaultCrypto

/// `POST /v1/operations`: something done to an authorized payment, by the processor's reference
/// recorded in the gateway's ledger at authorization (the card is never sent again, no envelope is
/// opened). `{"operation_id":"cap_…|void_…|re_…","kind":"capture|void|refund","payment_id":"pay_…",
/// "amount":1000,"currency":"EUR"}`. The operation id is the processor's idempotency key: the
/// gateway answers a repeat with the first outcome and never sends it twice.
public struct OperationRequest: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable {
        case capture, void, refund
    }

    public var operationID: String
    public var kind: Kind
    public var paymentID: String
    /// Minor units: the amount to capture or refund (the authorized amount for a void).
    public var amount: Int
    public var currency: String

    public init(operationID: String, kind: Kind, paymentID: String, amount: Int, currency: String) {
        (self.operationID, self.kind, self.paymentID, self.amount, self.currency) = (operationID, kind, paymentID, amount, currency)
    }

    /// The request's JSON (ids the vault made: lower-case letters, digits and `_`).
    public var json: String {
        #"{"operation_id":"\#(operationID)","kind":"\#(kind.rawValue)","payment_id":"\#(paymentID)","amount":\#(amount),"currency":"\#(currency)"}"#
    }
}

/// The gateway's answer to an operation (`POST /v1/operations`, `GET /v1/operations/{id}`):
/// `{"status":"succeeded|pending|failed","failure_code","reference"}`.
public struct GatewayOperationOutcome: Sendable, Equatable {
    public var status: String
    /// Why the processor refused it (`failed`), e.g. `refund_failed`.
    public var failureCode: String?
    /// The processor's reference of the operation.
    public var reference: String?

    public static let statuses = ["succeeded", "pending", "failed"]

    public init(status: String, failureCode: String? = nil, reference: String? = nil) {
        self.status = status
        self.failureCode = failureCode
        self.reference = reference
    }

    public var json: String {
        var out = "{\"status\":"
        JSONText.appendString(status, to: &out)
        if let failureCode {
            out += ",\"failure_code\":"
            JSONText.appendString(failureCode, to: &out)
        }
        if let reference {
            out += ",\"reference\":"
            JSONText.appendString(reference, to: &out)
        }
        return out + "}"
    }

    /// Reads an answer; nil when it is not an operation's outcome.
    public init?(json text: String) {
        guard let json = GatewayJSON.object(text), let status = json["status"] as? String, Self.statuses.contains(status) else { return nil }
        self.init(status: status, failureCode: json["failure_code"] as? String, reference: json["reference"] as? String)
    }
}
