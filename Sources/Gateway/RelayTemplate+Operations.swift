import Foundation
import GatewayAPI
import VaultCrypto

/// The relay template's capture, void and refund requests (docs/configuration.md "Relay
/// templates"): optional top-level sections `"capture"`, `"void"`, `"refund"`, each
///
/// ```json
/// "capture": {
///   "method": "POST",
///   "url": "{{env:RELAY_BASE_URL}}/v1/payment_intents/{{reference}}/capture",
///   "headers": [["Authorization", "Bearer {{env:KEY}}"], ["Idempotency-Key", "{{idempotency_key}}"]],
///   "form": [["amount_to_capture", "{{amount}}"]],
///   "response": {"status": "status", "succeeded": ["succeeded"], "pending": ["processing"], "failed": ["canceled"],
///                "failure_code": "failure_reason", "reference": "id",
///                "failed_http_statuses": [400, 402], "error_failure_code": "error.code"}
/// }
/// ```
///
/// The body is `form`, `json` or none. Placeholders: `{{reference}}` (the processor's reference of
/// the authorization, from the ledger), `{{payment_id}}`, `{{operation_id}}`,
/// `{{idempotency_key}}` (the operation id: unique per operation, stable across retries),
/// `{{amount}}` / `{{amount_major}}` (the amount to capture or refund; the authorized amount for
/// a void), `{{currency}}`, `{{currency_lower}}`, `{{env:NAME}}`; in `json`, `"{{#amount}}"` and
/// `"{{#amount_major}}"` become numbers. No card placeholder anywhere: an operation never needs
/// the card. The headers or the body carry `{{idempotency_key}}` or `{{operation_id}}` (a re-send
/// after an unknown outcome must not capture or refund twice), or the template does not load. Its
/// URL goes through the same destination check as the charge's (https, the charge URL's host or
/// `allowed_hosts`, never a redirect).
///
/// The answer: a 2xx whose `status` value is in `succeeded`, `pending` or `failed` is that
/// outcome (`failure_code` and `reference` read from the answer); a 4xx in `failed_http_statuses`
/// is `failed` with the code at `error_failure_code`; anything else (a 3xx, a 5xx, a 4xx not
/// listed, an unlisted status, an unreadable body, a timeout) is an unknown outcome, settled by
/// sending again under the same idempotency key.
public struct RelayOperationTemplate: Sendable {
    public struct Response: Sendable {
        public var statusPath: String
        public var succeeded: Set<String>
        public var pending: Set<String>
        public var failed: Set<String>
        public var failureCodePath: String?
        public var referencePath: String?
        public var failedHTTPStatuses: Set<Int>
        public var errorFailureCodePath: String?
    }

    public var method: String
    public var url: String
    public var headers: [(String, String)]
    /// Nil: the request has no body.
    public var body: RelayTemplate.Body?
    public var response: Response

    static let placeholders: Set<String> = [
        "reference", "payment_id", "operation_id", "idempotency_key", "amount", "amount_major", "currency", "currency_lower",
        "#amount", "#amount_major",
    ]
    static let keys: Set<String> = ["method", "url", "headers", "form", "json", "response"]
    static let responseKeys: Set<String> = [
        "status", "succeeded", "pending", "failed", "failure_code", "reference", "failed_http_statuses", "error_failure_code",
    ]

    init(_ value: Any, kind: OperationRequest.Kind) throws(RelayTemplate.Invalid) {
        let at = kind.rawValue
        typealias Invalid = RelayTemplate.Invalid
        guard let root = value as? [String: Any] else { throw Invalid(message: "\(at) is an object") }
        if let extra = Set(root.keys).subtracting(Self.keys).sorted().first {
            throw Invalid(message: "\(at) has no \"\(extra)\" (it has \(Self.keys.sorted().joined(separator: ", ")))")
        }
        method = (root["method"] as? String ?? "POST").uppercased()
        guard ["POST", "PUT", "PATCH", "DELETE"].contains(method) else { throw Invalid(message: "\(at).method is POST, PUT, PATCH or DELETE") }
        guard let url = root["url"] as? String, !url.isEmpty else { throw Invalid(message: "\(at).url is an https URL") }
        self.url = url
        if let h = root["headers"] {
            guard let list = h as? [[String]], list.allSatisfy({ $0.count == 2 }) else {
                throw Invalid(message: "\(at).headers is a list of [name, value] pairs")
            }
            headers = list.map { ($0[0], $0[1]) }
        } else {
            headers = []
        }
        if root["form"] != nil, root["json"] != nil { throw Invalid(message: "\(at) has form or json, not both") }
        if let form = root["form"] {
            guard let list = form as? [[String]], list.allSatisfy({ $0.count == 2 }) else {
                throw Invalid(message: "\(at).form is a list of [name, value] pairs")
            }
            body = .form(list.map { ($0[0], $0[1]) })
        } else if let json = root["json"] {
            guard JSONSerialization.isValidJSONObject(json),
                  let data = try? JSONSerialization.data(withJSONObject: json, options: [.sortedKeys, .withoutEscapingSlashes])
            else { throw Invalid(message: "\(at).json is a JSON object or array") }
            body = .json(String(decoding: data, as: UTF8.self))
        } else {
            body = nil
        }
        guard let r = root["response"] as? [String: Any] else { throw Invalid(message: "\(at).response maps the processor's answer") }
        if let extra = Set(r.keys).subtracting(Self.responseKeys).sorted().first {
            throw Invalid(message: "\(at).response has no \"\(extra)\"")
        }
        guard let statusPath = r["status"] as? String, !statusPath.isEmpty else { throw Invalid(message: "\(at).response.status names the status field") }
        func set(_ key: String) throws(Invalid) -> Set<String> {
            guard let v = r[key] else { return [] }
            guard let list = v as? [String] else { throw Invalid(message: "\(at).response.\(key) is a list of status values") }
            return Set(list)
        }
        let failedStatuses: Set<Int>
        if let v = r["failed_http_statuses"] {
            guard let list = v as? [Int], list.allSatisfy({ (400..<500).contains($0) }) else {
                throw Invalid(message: "\(at).response.failed_http_statuses lists 4xx statuses only")
            }
            failedStatuses = Set(list)
        } else {
            failedStatuses = []
        }
        response = Response(
            statusPath: statusPath, succeeded: try set("succeeded"), pending: try set("pending"), failed: try set("failed"),
            failureCodePath: r["failure_code"] as? String, referencePath: r["reference"] as? String,
            failedHTTPStatuses: failedStatuses, errorFailureCodePath: r["error_failure_code"] as? String)
        guard !response.succeeded.isEmpty else { throw Invalid(message: "\(at).response.succeeded lists at least one status value") }
        let lists = [response.succeeded, response.pending, response.failed]
        guard lists[0].isDisjoint(with: lists[1]), lists[0].isDisjoint(with: lists[2]), lists[1].isDisjoint(with: lists[2]) else {
            throw Invalid(message: "\(at).response lists a status value under two outcomes")
        }
        // No card field anywhere, and only the operation's placeholders.
        var texts = [url] + headers.map(\.1)
        if let body { texts += RelayTemplate.bodyTexts(body) }
        let used = texts.flatMap { RelayTemplate.placeholders(in: $0) }
        for p in used where !(Self.placeholders.contains(p) || p.hasPrefix("env:")) {
            throw Invalid(message: RelayTemplate.cardPlaceholders.contains(p)
                ? "\(at) uses {{\(p)}}: a \(at) never carries card data"
                : "unknown placeholder {{\(p)}} in \(at)")
        }
        // The processor deduplicates a re-send by this key: without it a retry may act twice.
        let carried = (headers.map(\.1) + (body.map(RelayTemplate.bodyTexts) ?? [])).flatMap { RelayTemplate.placeholders(in: $0) }
        guard carried.contains("idempotency_key") || carried.contains("operation_id") else {
            throw Invalid(message: "\(at)'s headers or body carry {{idempotency_key}} or {{operation_id}} (the processor's idempotency key)")
        }
    }

    /// Maps the processor's answer: the outcome, or nil when it is not a clear one (an unknown
    /// outcome: a 3xx, a 5xx, an unlisted 4xx or status, an unreadable body).
    func outcome(httpStatus status: Int, body: Data) -> GatewayOperationOutcome? {
        let json = try? JSONSerialization.jsonObject(with: body)
        let m = response
        let reference = m.referencePath.flatMap { RelayProcessor.value(at: $0, in: json) }
        if m.failedHTTPStatuses.contains(status) {
            let code = m.errorFailureCodePath.flatMap { RelayProcessor.value(at: $0, in: json) } ?? "processor_refused"
            return GatewayOperationOutcome(status: "failed", failureCode: RelayProcessor.code(code), reference: reference)
        }
        guard (200..<300).contains(status), let value = RelayProcessor.value(at: m.statusPath, in: json) else { return nil }
        if m.succeeded.contains(value) { return GatewayOperationOutcome(status: "succeeded", reference: reference) }
        if m.pending.contains(value) { return GatewayOperationOutcome(status: "pending", reference: reference) }
        if m.failed.contains(value) {
            let code = m.failureCodePath.flatMap { RelayProcessor.value(at: $0, in: json) } ?? "processor_refused"
            return GatewayOperationOutcome(status: "failed", failureCode: RelayProcessor.code(code), reference: reference)
        }
        return nil
    }
}

extension RelayTemplate {
    /// Parses the `capture`, `void` and `refund` sections.
    static func operations(_ root: [String: Any]) throws(Invalid) -> [OperationRequest.Kind: RelayOperationTemplate] {
        var out: [OperationRequest.Kind: RelayOperationTemplate] = [:]
        for kind in OperationRequest.Kind.allCases {
            if let section = root[kind.rawValue] { out[kind] = try RelayOperationTemplate(section, kind: kind) }
        }
        return out
    }

    /// Whether `capture: false` may be sent through this template: it has a capture section, its
    /// charge request says which capture it asks for (`{{capture_method}}` or `{{capture}}`) and
    /// its response lists the status values of a held authorization (`requires_capture`).
    public var authorizesWithoutCapture: Bool {
        guard operations[.capture] != nil, !response.requiresCapture.isEmpty else { return false }
        let used = ([url] + headers.map(\.1) + Self.bodyTexts(body)).flatMap { Self.placeholders(in: $0) }
        return used.contains("capture_method") || used.contains("capture")
    }
}
