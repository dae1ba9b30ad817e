import Foundation
import VaultCrypto

/// The gateway's answer to an authorization: `succeeded`, `declined`, `requires_action`, or
/// `unknown` when settlement gave up at its deadline.
/// `{"status","decline_code","reference","next_action":{…},"reason"}`.
public struct GatewayOutcome: Sendable, Equatable {
    public var status: String
    public var declineCode: String?
    public var reference: String?
    /// The `next_action` object, as JSON text.
    public var nextAction: String?
    /// Why the outcome is `unknown`.
    public var reason: String?

    public init(status: String, declineCode: String? = nil, reference: String? = nil, nextAction: String? = nil, reason: String? = nil) {
        self.status = status
        self.declineCode = declineCode
        self.reference = reference
        self.nextAction = nextAction
        self.reason = reason
    }

    /// A 3-D Secure challenge as `next_action`.
    public static func challenge(transactionID: String, payload: String, challengeURL: String) -> String {
        var out = "{\"type\":\"three_ds_challenge\",\"transaction_id\":"
        JSONText.appendString(transactionID, to: &out)
        out += ",\"payload\":"
        JSONText.appendString(payload, to: &out)
        out += ",\"challenge_url\":"
        JSONText.appendString(challengeURL, to: &out)
        return out + "}"
    }

    /// The answer's JSON (`status`, then `decline_code`, `reference`, `next_action` when set).
    public var json: String {
        var out = "{\"status\":"
        JSONText.appendString(status, to: &out)
        if let declineCode {
            out += ",\"decline_code\":"
            JSONText.appendString(declineCode, to: &out)
        }
        if let reference {
            out += ",\"reference\":"
            JSONText.appendString(reference, to: &out)
        }
        if let nextAction { out += ",\"next_action\":" + nextAction }
        return out + "}"
    }

    /// An outcome still unknown at the settlement deadline.
    public static func unknownJSON(reason: String, attempts: Int, deadline: Date) -> String {
        var out = "{\"status\":\"unknown\",\"reason\":"
        JSONText.appendString(reason, to: &out)
        return out + ",\"attempts\":\(attempts),\"deadline_at\":\"\(JSONText.iso(deadline))\"}"
    }

    /// Reads an answer; nil when it is not an outcome. `next_action` comes back with sorted keys.
    public init?(json text: String) {
        guard let json = GatewayJSON.object(text), let status = json["status"] as? String,
              ["succeeded", "declined", "requires_action", "requires_capture", "unknown"].contains(status)
        else { return nil }
        var next: String?
        if let action = json["next_action"], let data = try? JSONSerialization.data(withJSONObject: action, options: [.sortedKeys, .withoutEscapingSlashes]) {
            next = String(decoding: data, as: UTF8.self)
        }
        self.init(
            status: status, declineCode: json["decline_code"] as? String, reference: json["reference"] as? String, nextAction: next,
            reason: json["reason"] as? String)
    }
}

/// A payment id whose outcome is being settled (docs/errors.md "Unknown outcomes"): 409 to
/// `GET /v1/authorizations/{payment_id}`, 504 to a re-post.
/// `{"error":{"code":"AUTHORIZATION_PENDING","message"},"status":"pending","resend","status_query",
/// "in_flight","attempts","next_try_at","deadline_at","reason"}`.
public struct PendingAuthorization: Sendable, Equatable {
    /// Re-posting the payment (`POST /v1/authorize` with the same payment id, amount, currency and
    /// envelope) re-sends it with the same processor idempotency key, which the processor answers
    /// with its first result: how a payment without a status query settles.
    public var resend: Bool
    /// The gateway asks the processor's status query by itself (no re-post needed).
    public var statusQuery: Bool
    /// A call (on some gateway of the store) is sending it or asking about it right now.
    public var inFlight: Bool
    /// Sends so far.
    public var attempts: Int
    /// When it is worth asking (or re-posting) again.
    public var nextTryAt: Date
    /// After it, the outcome is reported `unknown`.
    public var deadlineAt: Date
    /// Why the outcome is not known (the last failure), for people.
    public var reason: String

    public init(resend: Bool, statusQuery: Bool, inFlight: Bool, attempts: Int, nextTryAt: Date, deadlineAt: Date, reason: String) {
        self.resend = resend
        self.statusQuery = statusQuery
        self.inFlight = inFlight
        self.attempts = attempts
        self.nextTryAt = nextTryAt
        self.deadlineAt = deadlineAt
        self.reason = reason
    }

    /// The answer's JSON.
    public var json: String {
        var out = "{\"error\":{\"code\":\"\(ErrorCode.authorizationPending.rawValue)\",\"message\":"
        JSONText.appendString(
            inFlight ? "this payment id is being sent or asked about now; its outcome is not known yet"
                : "this payment id was sent and its outcome is not known yet; it is being settled", to: &out)
        out += "},\"status\":\"pending\",\"resend\":\(resend),\"status_query\":\(statusQuery),\"in_flight\":\(inFlight)"
        out += ",\"attempts\":\(attempts),\"next_try_at\":\"\(JSONText.iso(nextTryAt))\",\"deadline_at\":\"\(JSONText.iso(deadlineAt))\",\"reason\":"
        JSONText.appendString(reason, to: &out)
        return out + "}"
    }
}

/// What the gateway knows of a payment id (`GET /v1/authorizations/{id}`).
public enum GatewayAuthorization: Sendable, Equatable {
    /// Settled (or, with status `unknown`, given up at the settlement deadline): 200.
    case outcome(GatewayOutcome)
    /// No ledger row: never sent, or the processor said it never received it. Nothing charged: 404.
    case notFound
    /// Sent, the outcome not known yet, being settled: 409. With `resend`, re-posting the payment
    /// once `nextTryAt` has passed (and nobody is `inFlight` with it) re-sends it under the
    /// same processor idempotency key: how templates without a status query settle.
    case pending(resend: Bool, inFlight: Bool, nextTryAt: Date?, reason: String)

    /// Reads the answer to `GET /v1/authorizations/{id}`; nil when it is none of these.
    public init?(status: Int, json text: String) {
        switch status {
        case 200:
            guard let outcome = GatewayOutcome(json: text) else { return nil }
            self = .outcome(outcome)
        case 404: self = .notFound
        case 409:
            // What the answer lacks reads as "in flight, no re-send, being settled".
            let json = GatewayJSON.object(text) ?? [:]
            self = .pending(
                resend: json["resend"] as? Bool ?? false, inFlight: json["in_flight"] as? Bool ?? true,
                nextTryAt: GatewayJSON.date(json["next_try_at"]), reason: json["reason"] as? String ?? "being settled")
        default: return nil
        }
    }
}

/// Reading the gateway's answers (JSON objects, metadata only).
public enum GatewayJSON {
    static func object(_ text: String) -> [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
    }

    static func date(_ value: Any?) -> Date? { (value as? String).flatMap { try? Date($0, strategy: .iso8601) } }

    /// The code and message of an `{"error":{"code","message"}}` answer.
    public static func error(_ text: String) -> (ErrorCode, String) {
        let e = object(text)?["error"] as? [String: Any]
        return (code(e?["code"]), e?["message"] as? String ?? "the gateway refused the request")
    }

    /// A code the gateway sent: one of the catalogue's, or `GATEWAY_ERROR` when it sent none this
    /// side knows (the gateway and the sidecar are one version: not expected).
    public static func code(_ value: Any?) -> ErrorCode {
        (value as? String).flatMap(ErrorCode.init(rawValue:)) ?? .gatewayError
    }

    /// The `three_ds_result` of a challenge page's answer.
    public static func threeDSResult(_ text: String) -> String? { object(text)?[ThreeDSResult.field] as? String }
}
