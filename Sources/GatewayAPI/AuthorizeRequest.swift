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

/// `POST /v1/authorize` `{"payment_id":"pay_…","amount":1000,"currency":"EUR","envelope":{…v1…}}`
/// (the gateway reads it with the servers' shared field checks: `AuthorizeRequest.parse` in Gateway).
public struct AuthorizeRequest: Sendable {
    public var paymentID: String
    public var amount: Int
    public var currency: Currency
    public var envelope: CardEnvelope
    /// False (`"capture":false`): authorize only; the answer is `requires_capture`.
    public var capture: Bool

    public init(paymentID: String, amount: Int, currency: Currency, envelope: CardEnvelope, capture: Bool = true) {
        (self.paymentID, self.amount, self.currency, self.envelope, self.capture) = (paymentID, amount, currency, envelope, capture)
    }

    /// The request's JSON, with an envelope already in its JSON form (the sidecar stores them so).
    /// The caller's idempotency key never goes to the gateway: the payment id is the processor's
    /// idempotency key (unique per payment, the same on every retry).
    public static func json(paymentID: String, amount: Int, currency: String, envelopeJSON: String, capture: Bool = true) -> String {
        let authorizeOnly = capture ? "" : #","capture":false"#
        return #"{"payment_id":"\#(paymentID)","amount":\#(amount),"currency":"\#(currency)"\#(authorizeOnly),"envelope":\#(envelopeJSON)}"#
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
