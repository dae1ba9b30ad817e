import Money
import VaultCrypto

/// The gateway adapter's wire format, shared by its routes (Sources/Gateway) and its client, the
/// sidecar's `GatewayClient`: the request and answer types of the gateway's API and their JSON.
/// No HTTP and no opening here; the gateway's routes are documented on `GatewayRoutes`.
public enum GatewayAPI {
    /// Largest request body the gateway accepts (fingerprint batches: this per envelope).
    public static let maxBodyBytes = 16 * 1024
    /// Most envelopes one `POST /v1/fingerprints` takes.
    public static let maxFingerprintBatch = 64
}

/// `POST /v1/authorize` `{"payment_id":"pay_…","amount":1000,"currency":"EUR","envelope":{…v1…}}`.
public struct AuthorizeRequest: Sendable {
    public var paymentID: String
    public var amount: Int
    public var currency: Currency
    public var envelope: CardEnvelope

    /// The request's JSON, with an envelope already in its JSON form (the sidecar stores them so).
    /// The caller's idempotency key never goes to the gateway: the payment id is the processor's
    /// idempotency key (unique per payment, the same on every retry).
    public static func json(paymentID: String, amount: Int, currency: String, envelopeJSON: String) -> String {
        #"{"payment_id":"\#(paymentID)","amount":\#(amount),"currency":"\#(currency)","envelope":\#(envelopeJSON)}"#
    }

    /// Parses the request at the reader's position, strictly.
    /// - Throws: `REQUEST_FIELD_UNKNOWN`, `REQUEST_FIELD_MISSING`, `REQUEST_FIELD_INVALID`,
    ///   `AMOUNT_INVALID`, `CURRENCY_INVALID` and the envelope's refusals.
    public static func parse(from r: inout JSONReader) throws(VaultError) -> AuthorizeRequest {
        var paymentID: String?, amount: Int?, currency: Currency?, envelope: CardEnvelope?
        try r.readObject { (r, key) throws(VaultError) in
            switch key {
            case "payment_id":
                let id = try r.readString(maxBytes: 64)
                guard id.hasPrefix("pay_"), id.utf8.allSatisfy({ (48...57).contains($0) || (97...122).contains($0) || $0 == 95 }) else {
                    throw VaultError(.requestFieldInvalid, "payment_id is pay_ and lower-case letters or digits", field: "payment_id")
                }
                paymentID = id
            case "amount":
                let value = try r.readInt()
                guard (1...Currency.maximumAmount).contains(value) else {
                    throw VaultError(.amountInvalid, "amount is a positive integer in minor units, at most \(Currency.maximumAmount)", field: "amount")
                }
                amount = value
            case "currency":
                guard let c = Currency(try r.readString(maxBytes: 8)) else {
                    throw VaultError(.currencyInvalid, "currency is an ISO 4217 code such as EUR or USD", field: "currency")
                }
                currency = c
            case "envelope": envelope = try CardEnvelope.parse(from: &r)
            case "idempotency_key":
                // Accepted for compatibility and ignored: the caller's key is scoped to the
                // caller and never used here (the payment id is the processor's key).
                _ = try r.readString(maxBytes: 255)
            default: throw VaultError(.requestFieldUnknown, "an authorization has payment_id, amount, currency, envelope and idempotency_key")
            }
        }
        return AuthorizeRequest(
            paymentID: try required(paymentID, "payment_id"), amount: try required(amount, "amount"),
            currency: try required(currency, "currency"), envelope: try required(envelope, "envelope"))
    }

    static func required<T>(_ value: T?, _ field: String) throws(VaultError) -> T {
        guard let value else { throw VaultError(.requestFieldMissing, "\(field) is missing", field: field) }
        return value
    }
}

/// `{"three_ds_result":"<JWT>"}`: the body of a 3-D Secure confirmation, and the answer of a
/// sandbox challenge page (the gateway's ACS, the sidecar's sandbox route).
public enum ThreeDSResult {
    public static let field = "three_ds_result"

    public static func json(_ jwt: String) -> String {
        var out = "{\"\(field)\":"
        JSONText.appendString(jwt, to: &out)
        return out + "}"
    }
}
