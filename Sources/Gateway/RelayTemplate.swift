import Foundation
import VaultCrypto

/// A relay template: how to reach a real processor's API by configuration (DESIGN §7).
///
/// ```json
/// {
///   "name": "stripe-style",
///   "request": {
///     "method": "POST", "url": "https://api.example.com/v1/charges",
///     "headers": [["Authorization", "Bearer {{env:PROCESSOR_KEY}}"], ["Idempotency-Key", "{{idempotency_key}}"]],
///     "form": [["amount", "{{amount}}"], ["currency", "{{currency_lower}}"], ["card[number]", "{{pan}}"]]
///   },
///   "timeout_seconds": 30,
///   "response": {
///     "status": "status", "succeeded": ["succeeded"], "declined": ["failed"], "requires_action": ["requires_action"],
///     "decline_code": "failure_code", "reference": "id", "declined_http_statuses": [402],
///     "error_decline_code": "error.decline_code"
///   }
/// }
/// ```
///
/// The body is `form` (pairs, `application/x-www-form-urlencoded`) or `json` (any JSON value whose
/// strings may hold placeholders; a string that is exactly `"{{#amount}}"`, `"{{#amount_major}}"`,
/// `"{{#exp_month}}"` or `"{{#exp_year}}"` becomes a number).
/// Placeholders: `{{pan}}`, `{{cvc}}`, `{{exp_month}}`, `{{exp_year}}`, `{{exp_year2}}`,
/// `{{name}}`, `{{amount}}` (minor units), `{{amount_major}}` (`10.50`: with the currency's
/// decimals), `{{currency}}`, `{{currency_lower}}`, `{{payment_id}}`,
/// `{{idempotency_key}}`, `{{env:NAME}}` (a secret from the gateway's environment). Card fields
/// may appear only in the body: never in the URL or a header. Response paths are dotted
/// (`error.decline_code`).
public struct RelayTemplate: Sendable {
    public enum Body: Sendable {
        case form([(String, String)])
        case json(String)
    }

    public struct ResponseMapping: Sendable {
        public var statusPath: String
        public var succeeded: Set<String>
        public var declined: Set<String>
        public var requiresAction: Set<String>
        public var declineCodePath: String?
        public var referencePath: String?
        /// HTTP statuses that mean "declined" (an error body), e.g. 402.
        public var declinedHTTPStatuses: Set<Int>
        /// Where the decline code is in such an error body.
        public var errorDeclineCodePath: String?
    }

    public var name: String
    public var method: String
    public var url: String
    public var headers: [(String, String)]
    public var body: Body
    public var timeout: Double
    public var response: ResponseMapping

    public struct Invalid: Error, CustomStringConvertible, Sendable {
        public let message: String
        public var description: String { "RELAY_TEMPLATE_INVALID: \(message)" }
    }

    static let cardPlaceholders: Set<String> = ["pan", "cvc", "exp_month", "exp_year", "exp_year2", "name"]
    static let otherPlaceholders: Set<String> = ["amount", "amount_major", "currency", "currency_lower", "payment_id", "idempotency_key"]

    /// Loads a template file.
    public init(path: String) throws(Invalid) {
        guard let data = FileManager.default.contents(atPath: path) else { throw Invalid(message: "cannot read \(path)") }
        guard let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { throw Invalid(message: "\(path) is not a JSON object") }
        try self.init(root: root)
    }

    init(root: [String: Any]) throws(Invalid) {
        guard let request = root["request"] as? [String: Any], let response = root["response"] as? [String: Any] else {
            throw Invalid(message: "a template has request and response")
        }
        name = root["name"] as? String ?? "relay"
        method = (request["method"] as? String ?? "POST").uppercased()
        // The URL may start with {{env:NAME}} (a base URL per environment); it is checked again when sent.
        guard let url = request["url"] as? String,
              url.hasPrefix("{{env:") || ["https", "http"].contains(URL(string: url)?.scheme ?? "")
        else {
            throw Invalid(message: "request.url is an http(s) URL")
        }
        self.url = url
        func pairs(_ value: Any?, _ what: String) throws(Invalid) -> [(String, String)] {
            guard let value else { return [] }
            guard let list = value as? [[String]], list.allSatisfy({ $0.count == 2 }) else {
                throw Invalid(message: "\(what) is a list of [name, value] pairs")
            }
            return list.map { ($0[0], $0[1]) }
        }
        headers = try pairs(request["headers"], "request.headers")
        if let form = request["form"] {
            body = .form(try pairs(form, "request.form"))
        } else if let json = request["json"] {
            guard JSONSerialization.isValidJSONObject(json),
                  let data = try? JSONSerialization.data(withJSONObject: json, options: [.sortedKeys, .withoutEscapingSlashes])
            else { throw Invalid(message: "request.json is a JSON object or array") }
            body = .json(String(decoding: data, as: UTF8.self))
        } else {
            throw Invalid(message: "request has form or json")
        }
        timeout = root["timeout_seconds"] as? Double ?? 30
        guard let statusPath = response["status"] as? String else { throw Invalid(message: "response.status names the status field") }
        func set(_ key: String) -> Set<String> { Set(response[key] as? [String] ?? []) }
        self.response = ResponseMapping(
            statusPath: statusPath, succeeded: set("succeeded"), declined: set("declined"), requiresAction: set("requires_action"),
            declineCodePath: response["decline_code"] as? String, referencePath: response["reference"] as? String,
            declinedHTTPStatuses: Set(response["declined_http_statuses"] as? [Int] ?? []),
            errorDeclineCodePath: response["error_decline_code"] as? String)
        guard !self.response.succeeded.isEmpty else { throw Invalid(message: "response.succeeded lists at least one status value") }
        // Card data only in the body: a URL or header may end up in a proxy's or processor's logs.
        for (where_, text) in [("request.url", url)] + headers.map({ ("request.headers \($0.0)", $0.1) }) {
            for p in Self.placeholders(in: text) where Self.cardPlaceholders.contains(p) {
                throw Invalid(message: "\(where_) uses {{\(p)}}: card fields go in the body only")
            }
        }
        for p in Self.allPlaceholders(self) {
            guard Self.cardPlaceholders.contains(p) || Self.otherPlaceholders.contains(p) || p.hasPrefix("env:") || p.hasPrefix("#") else {
                throw Invalid(message: "unknown placeholder {{\(p)}}")
            }
        }
    }

    static func placeholders(in text: String) -> [String] {
        var out: [String] = []
        var rest = Substring(text)
        while let open = rest.range(of: "{{"), let close = rest.range(of: "}}", range: open.upperBound..<rest.endIndex) {
            out.append(String(rest[open.upperBound..<close.lowerBound]))
            rest = rest[close.upperBound...]
        }
        return out
    }

    static func allPlaceholders(_ t: RelayTemplate) -> [String] {
        var texts = [t.url] + t.headers.map(\.1)
        switch t.body {
        case .form(let pairs): texts += pairs.map(\.1)
        case .json(let text): texts.append(text)
        }
        return texts.flatMap { placeholders(in: $0) }
    }
}
