import GatewayAPI
import Money
import SocketHTTP
import VaultCrypto

/// The gateway's request bodies (GatewayAPI's types), read with the field checks both servers
/// share (`RequestFields`).
extension AuthorizeRequest {
    /// Parses the request at the reader's position, strictly.
    /// - Throws: `REQUEST_FIELD_UNKNOWN`, `REQUEST_FIELD_MISSING`, `REQUEST_FIELD_INVALID`,
    ///   `AMOUNT_INVALID`, `CURRENCY_INVALID` and the envelope's refusals.
    static func parse(from r: inout JSONReader) throws(VaultError) -> AuthorizeRequest {
        var paymentID: String?, amount: Int?, currency: Currency?, envelope: CardEnvelope?, capture = true
        try r.readObject { (r, key) throws(VaultError) in
            switch key {
            // Made by the sidecar (random): not checked as free text.
            case "payment_id": paymentID = try RequestFields.id(&r, prefix: "pay_", field: "payment_id", freeTextCheck: false)
            case "amount": amount = try RequestFields.amount(&r)
            case "currency": currency = try RequestFields.currency(&r)
            case "envelope": envelope = try CardEnvelope.parse(from: &r)
            case "capture": capture = try r.readBool()
            case "idempotency_key":
                // Accepted for compatibility and ignored: the caller's key is scoped to the
                // caller and never used here (the payment id is the processor's key).
                _ = try r.readString(maxBytes: 255)
            default: throw VaultError(.requestFieldUnknown, "an authorization has payment_id, amount, currency, envelope, capture and idempotency_key")
            }
        }
        return AuthorizeRequest(
            paymentID: try JSONBody.required(paymentID, "payment_id"), amount: try JSONBody.required(amount, "amount"),
            currency: try JSONBody.required(currency, "currency"), envelope: try JSONBody.required(envelope, "envelope"), capture: capture)
    }
}

extension OperationRequest {
    /// Parses `{"operation_id","kind","payment_id","amount","currency"}` strictly.
    static func parse(from r: inout JSONReader) throws(VaultError) -> OperationRequest {
        var id: String?, kind: Kind?, paymentID: String?, amount: Int?, currency: Currency?
        try r.readObject { (r, key) throws(VaultError) in
            switch key {
            // Ids the sidecar made (random): not checked as free text.
            case "operation_id":
                let v = try r.readString(maxBytes: 64)
                guard ["cap_", "void_", "re_"].contains(where: v.hasPrefix), v.utf8.allSatisfy({ (48...57).contains($0) || (97...122).contains($0) || $0 == 95 }) else {
                    throw VaultError(.requestFieldInvalid, "operation_id is cap_, void_ or re_ and lower-case letters or digits", field: "operation_id")
                }
                id = v
            case "kind":
                guard let k = Kind(rawValue: try r.readString(maxBytes: 16)) else {
                    throw VaultError(.requestFieldInvalid, "kind is capture, void or refund", field: "kind")
                }
                kind = k
            case "payment_id": paymentID = try RequestFields.id(&r, prefix: "pay_", field: "payment_id", freeTextCheck: false)
            case "amount": amount = try RequestFields.amount(&r)
            case "currency": currency = try RequestFields.currency(&r)
            default: throw VaultError(.requestFieldUnknown, "an operation has operation_id, kind, payment_id, amount and currency")
            }
        }
        return OperationRequest(
            operationID: try JSONBody.required(id, "operation_id"), kind: try JSONBody.required(kind, "kind"),
            paymentID: try JSONBody.required(paymentID, "payment_id"), amount: try JSONBody.required(amount, "amount"),
            currency: try JSONBody.required(currency, "currency").code)
    }
}

extension FingerprintBatch {
    /// Parses the request at the reader's position.
    /// - Throws: `REQUEST_FIELD_UNKNOWN`, `REQUEST_FIELD_MISSING`, `REQUEST_FIELD_INVALID` (too
    ///   many envelopes) and the envelopes' refusals.
    static func parse(from r: inout JSONReader) throws(VaultError) -> [CardEnvelope] {
        var found: [CardEnvelope]?
        try r.readObject { (r, key) throws(VaultError) in
            guard key == "envelopes" else { throw VaultError(.requestFieldUnknown, "a fingerprint request has only envelopes") }
            var list: [CardEnvelope] = []
            try r.readArray { (r) throws(VaultError) in
                guard list.count < GatewayAPI.maxFingerprintBatch else {
                    throw VaultError(.requestFieldInvalid, "at most \(GatewayAPI.maxFingerprintBatch) envelopes", field: "envelopes")
                }
                list.append(try CardEnvelope.parse(from: &r))
            }
            found = list
        }
        return try JSONBody.required(found, "envelopes")
    }
}
