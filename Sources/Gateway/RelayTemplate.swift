import Foundation
import GatewayAPI
import VaultCrypto

/// A relay template: how to reach a real processor's API by configuration (README "Payments").
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
/// `{{idempotency_key}}` (the payment id too: unique per payment, stable across retries; the
/// caller's own idempotency key is never sent), `{{capture_method}}` (`automatic`, or `manual`
/// for an authorization only) and `{{capture}}` (`true`/`false`), `{{env:NAME}}` (a secret from
/// the gateway's environment). `response.requires_capture` lists the status values of an
/// authorization held for a capture; `capture`, `void` and `refund` sections describe those
/// operations (`RelayOperationTemplate`; `authorizesWithoutCapture` says whether `capture: false`
/// may go through the template). Card fields may appear only in the body: never in the URL or a header. The
/// headers or the body carry `{{idempotency_key}}` or `{{payment_id}}` (the processor's
/// idempotency key), or the template does not load. Response paths are dotted
/// (`error.decline_code`).
///
/// Where it may send: `request.url` is `https` (its `{{env:…}}` parts are filled in when the
/// gateway starts); `http` only to a loopback host (127.0.0.0/8, ::1, localhost) and only with
/// `"allow_http_loopback": true` in `request` (development: a stand-in processor, a local TLS
/// proxy). The request goes only to the host of that URL or one listed in
/// `request.allowed_hosts`; a filled-in URL with another host is refused before anything is sent
/// (`RELAY_URL_NOT_ALLOWED`). Redirects are never followed: a 3xx answer is an unknown outcome.
///
/// Settlement (docs/configuration.md, docs/errors.md "Unknown outcomes"): how an unknown outcome (a
/// timeout, a 5xx, a dropped connection, a 3xx, an unreadable answer, a gateway that died mid-call)
/// is found out. Optional `"settle"` section:
///
/// ```json
/// "settle": {
///   "resend": true,
///   "status": {"method": "GET", "url": "{{env:RELAY_BASE_URL}}/v1/charges/{{idempotency_key}}",
///              "headers": [["Authorization", "Bearer {{env:KEY}}"]], "not_found_http_statuses": [404]},
///   "server_errors": "unknown",
///   "retry_within_seconds": 10,
///   "deadline_seconds": 86400
/// }
/// ```
///
/// - `resend` (default false): re-sending the same request with the same processor idempotency
///   key is safe: the processor answers the first result and charges once. Only then does the
///   gateway send a payment id again (in the call, and when the sidecar re-posts the envelope).
/// - `status` (optional): a query of the payment by payment id / idempotency key. No card
///   placeholders (`{{pan}}`, `{{cvc}}`, …) anywhere in it, no body; its URL goes through the same
///   destination check as the charge URL (https, the template's host or `allowed_hosts`, never a
///   redirect). Its answer is read with the template's `response` mapping; a status in
///   `not_found_http_statuses` (4xx, default `[404]`) means the processor never received the
///   payment id. The gateway asks it in the call and, in the background, for rows left unknown.
/// - `server_errors` (default `unknown`): what a 5xx answer to the first send means for this
///   processor. `not_charged` (processors that document "5xx = nothing was charged"): the ledger
///   row is released and the answer is 503, as for a connection never made. `unknown`: the
///   outcome is unknown, like a timeout.
/// - `retry_within_seconds` (default 0, at most 25): how long the call keeps trying (status query,
///   re-send) with exponential backoff and full jitter while the opened card is in hand. The
///   whole call stays under 25 s, inside the sidecar's 30 s gateway timeout.
/// - `deadline_seconds` (default 86400, 60 to 2592000): after this long from the first send an
///   outcome still unknown is reported `unknown` (an operator settles it: `vault payments
///   settle`). With `resend`, keep it below the processor's idempotency-key lifetime (Stripe
///   keeps keys 24 h: a re-send after that would be a new charge).
///
/// Without a `settle` section an unknown outcome is never re-sent nor asked about: it stays
/// unknown until the deadline, then is reported.
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
        /// Status values of an authorization held for a later capture (`capture: false`).
        public var requiresCapture: Set<String>
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
    /// Hosts besides the URL's own that a filled-in URL may name (`request.allowed_hosts`), lower case.
    public var allowedHosts: Set<String>
    /// `request.allow_http_loopback`: `http` to a loopback host is allowed (development only).
    public var allowHTTPLoopback: Bool
    /// How unknown outcomes are settled (the `settle` section; defaults without one).
    public var settle: Settlement
    /// The capture, void and refund requests the template has (`RelayOperationTemplate`).
    public var operations: [OperationRequest.Kind: RelayOperationTemplate] = [:]

    /// The `settle` section (see the type's documentation).
    public struct Settlement: Sendable {
        /// What a 5xx answer means.
        public enum ServerErrors: String, Sendable { case unknown, notCharged = "not_charged" }

        /// A status query: no body, no card fields.
        public struct StatusQuery: Sendable {
            public var method: String
            public var url: String
            public var headers: [(String, String)]
            /// 4xx statuses that mean "the processor never received this payment id".
            public var notFoundHTTPStatuses: Set<Int>
        }

        public var resend = false
        public var status: StatusQuery?
        public var serverErrors = ServerErrors.unknown
        public var retryWithin: Double = 0
        public var deadline: Double = 86400

        /// The longest a call may keep retrying (the whole call stays inside the sidecar's 30 s).
        public static let maxRetryWithin: Double = 25
        public static let deadlineRange: ClosedRange<Double> = 60...(30 * 86400)

        public init() {}
    }

    public struct Invalid: Error, CustomStringConvertible, Sendable {
        /// `RELAY_TEMPLATE_INVALID`, or `RELAY_URL_NOT_ALLOWED` for a URL the relay may not send to.
        public let code: ErrorCode
        public let message: String
        public init(code: ErrorCode = .relayTemplateInvalid, message: String) {
            self.code = code
            self.message = message
        }
        public var description: String { "\(code): \(message)" }
    }

    static let cardPlaceholders: Set<String> = ["pan", "cvc", "exp_month", "exp_year", "exp_year2", "name"]
    static let otherPlaceholders: Set<String> = ["amount", "amount_major", "currency", "currency_lower", "payment_id", "idempotency_key", "capture_method", "capture"]

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
        // The URL may start with {{env:NAME}} (a base URL per environment): then it is checked
        // when the gateway starts (`destination(environment:)`), and again when sent.
        guard let url = request["url"] as? String, !url.isEmpty else {
            throw Invalid(message: "request.url is an https URL")
        }
        self.url = url
        allowHTTPLoopback = request["allow_http_loopback"] as? Bool ?? false
        if let extra = request["allowed_hosts"] {
            guard let list = extra as? [String],
                  list.allSatisfy({ h in !h.isEmpty && h.utf8.allSatisfy { Self.isHostByte($0) } })
            else { throw Invalid(message: "request.allowed_hosts is a list of host names (no scheme, port or path)") }
            allowedHosts = Set(list.map { $0.lowercased() })
        } else {
            allowedHosts = []
        }
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
            requiresCapture: set("requires_capture"),
            declineCodePath: response["decline_code"] as? String, referencePath: response["reference"] as? String,
            declinedHTTPStatuses: Set(response["declined_http_statuses"] as? [Int] ?? []),
            errorDeclineCodePath: response["error_decline_code"] as? String)
        guard !self.response.succeeded.isEmpty else { throw Invalid(message: "response.succeeded lists at least one status value") }
        // Only a 4xx may mean "declined": a 3xx or 5xx is never a clear outcome.
        guard self.response.declinedHTTPStatuses.allSatisfy({ (400..<500).contains($0) }) else {
            throw Invalid(message: "response.declined_http_statuses lists 4xx statuses only")
        }
        settle = try Self.settlement(root["settle"], response: self.response)
        operations = try Self.operations(root)
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
        // The processor deduplicates retries by this key: without it a retry may charge twice.
        let carried = (headers.map(\.1) + Self.bodyTexts(body)).flatMap { Self.placeholders(in: $0) }
        guard carried.contains("idempotency_key") || carried.contains("payment_id") else {
            throw Invalid(message: "the headers or the body carry {{idempotency_key}} or {{payment_id}} (the processor's idempotency key)")
        }
        // A URL with an `{{env:…}}` part is checked when the gateway starts, with its environment.
        let urls = [url] + [settle.status?.url].compactMap { $0 } + operations.values.map(\.url)
        if !urls.contains(where: { $0.contains("{{env:") }) { _ = try destination(environment: [:]) }
    }

    /// Parses and checks the `settle` section.
    static func settlement(_ value: Any?, response: ResponseMapping) throws(Invalid) -> Settlement {
        var s = Settlement()
        guard let value else { return s }
        guard let root = value as? [String: Any] else { throw Invalid(message: "settle is an object") }
        let known: Set<String> = ["resend", "status", "server_errors", "retry_within_seconds", "deadline_seconds"]
        if let extra = Set(root.keys).subtracting(known).sorted().first {
            throw Invalid(message: "settle has no \"\(extra)\" (it has \(known.sorted().joined(separator: ", ")))")
        }
        if let resend = root["resend"] {
            guard let b = resend as? Bool else { throw Invalid(message: "settle.resend is true or false") }
            s.resend = b
        }
        if let errors = root["server_errors"] {
            guard let text = errors as? String, let e = Settlement.ServerErrors(rawValue: text) else {
                throw Invalid(message: "settle.server_errors is \"unknown\" or \"not_charged\"")
            }
            s.serverErrors = e
        }
        func seconds(_ key: String, _ range: ClosedRange<Double>) throws(Invalid) -> Double? {
            guard let v = root[key] else { return nil }
            guard let n = (v as? NSNumber)?.doubleValue, n.isFinite, range.contains(n) else {
                throw Invalid(message: "settle.\(key) is a number of seconds from \(Int(range.lowerBound)) to \(Int(range.upperBound))")
            }
            return n
        }
        s.retryWithin = try seconds("retry_within_seconds", 0...Settlement.maxRetryWithin) ?? 0
        s.deadline = try seconds("deadline_seconds", Settlement.deadlineRange) ?? s.deadline
        if let status = root["status"] {
            guard let q = status as? [String: Any] else { throw Invalid(message: "settle.status is an object") }
            let knownQuery: Set<String> = ["method", "url", "headers", "not_found_http_statuses"]
            if let extra = Set(q.keys).subtracting(knownQuery).sorted().first {
                throw Invalid(message: "settle.status has no \"\(extra)\" (it has \(knownQuery.sorted().joined(separator: ", ")); a status query has no body)")
            }
            guard let url = q["url"] as? String, !url.isEmpty else { throw Invalid(message: "settle.status.url is an https URL") }
            let method = (q["method"] as? String ?? "GET").uppercased()
            guard ["GET", "POST"].contains(method) else { throw Invalid(message: "settle.status.method is GET or POST") }
            var headers: [(String, String)] = []
            if let h = q["headers"] {
                guard let list = h as? [[String]], list.allSatisfy({ $0.count == 2 }) else {
                    throw Invalid(message: "settle.status.headers is a list of [name, value] pairs")
                }
                headers = list.map { ($0[0], $0[1]) }
            }
            var notFound: Set<Int> = [404]
            if let n = q["not_found_http_statuses"] {
                guard let list = n as? [Int], !list.isEmpty, list.allSatisfy({ (400..<500).contains($0) }) else {
                    throw Invalid(message: "settle.status.not_found_http_statuses lists 4xx statuses")
                }
                notFound = Set(list)
            }
            if !notFound.isDisjoint(with: response.declinedHTTPStatuses) {
                throw Invalid(message: "settle.status.not_found_http_statuses and response.declined_http_statuses share a status")
            }
            // A status query never carries card data: it is not the charge, and a URL or header
            // may end up in a proxy's or processor's logs.
            for text in [url] + headers.map(\.1) {
                for p in placeholders(in: text) {
                    guard otherPlaceholders.contains(p) || p.hasPrefix("env:") else {
                        throw Invalid(message: cardPlaceholders.contains(p)
                            ? "settle.status uses {{\(p)}}: a status query carries no card data"
                            : "unknown placeholder {{\(p)}} in settle.status")
                    }
                }
            }
            s.status = Settlement.StatusQuery(method: method, url: url, headers: headers, notFoundHTTPStatuses: notFound)
        }
        return s
    }

    /// Where this template may send, its `{{env:…}}` URL parts filled in from `environment`.
    /// - Throws: `RELAY_URL_NOT_ALLOWED` (not https; http not to loopback or not allowed; no host),
    ///   `RELAY_TEMPLATE_INVALID` (a variable of the URL is not set).
    /// The status query's URL (`settle.status.url`) and the capture, void and refund URLs are
    /// checked the same way and may name only those hosts.
    public func destination(environment: [String: String]) throws(Invalid) -> Destination {
        let charge = try destination(of: url, "request.url", environment: environment)
        var others = settle.status.map { [("settle.status.url", $0.url)] } ?? []
        others += operations.sorted { $0.key.rawValue < $1.key.rawValue }.map { ("\($0.key.rawValue).url", $0.value.url) }
        for (what, other) in others {
            let query = try destination(of: other, what, environment: environment)
            guard query.hosts.isSubset(of: charge.hosts) else {
                throw Invalid(code: .relayURLNotAllowed, message: "\(what) names a host that is not request.url's nor in allowed_hosts")
            }
        }
        return charge
    }

    func destination(of url: String, _ what: String, environment: [String: String]) throws(Invalid) -> Destination {
        // Fill in {{env:…}}; any other placeholder becomes a neutral "0" (it is percent-encoded
        // when sent, so it cannot add a scheme or an authority where there was none).
        var filled = ""
        var rest = Substring(url)
        while let open = rest.range(of: "{{"), let close = rest.range(of: "}}", range: open.upperBound..<rest.endIndex) {
            filled += rest[..<open.lowerBound]
            let name = String(rest[open.upperBound..<close.lowerBound])
            if name.hasPrefix("env:") {
                guard let value = environment[String(name.dropFirst(4))] else {
                    throw Invalid(message: "\(what) needs $\(name.dropFirst(4)), which is not set")
                }
                filled += value
            } else {
                filled += "\u{1}"
            }
            rest = rest[close.upperBound...]
        }
        filled += rest
        // A placeholder in the scheme or the host: the host is known only per payment, so it must
        // be one of allowed_hosts.
        let schemeEnd = filled.range(of: "://")
        let authority = schemeEnd.map { filled[$0.upperBound...].prefix { !"/?#".contains($0) } } ?? ""
        if filled[..<(schemeEnd?.lowerBound ?? filled.endIndex)].contains("\u{1}") {
            throw Invalid(code: .relayURLNotAllowed, message: "\(what) has a placeholder in its scheme")
        }
        if authority.contains("\u{1}") {
            guard !allowedHosts.isEmpty else {
                throw Invalid(code: .relayURLNotAllowed, message: "\(what) has a placeholder in its host: list the hosts it may name in request.allowed_hosts")
            }
            let scheme = String(filled[..<schemeEnd!.lowerBound]).lowercased()
            guard scheme == "https" || (scheme == "http" && allowHTTPLoopback && allowedHosts.allSatisfy(Self.isLoopback)) else {
                throw Invalid(code: .relayURLNotAllowed, message: "\(what) is an https URL")
            }
            return Destination(hosts: allowedHosts, allowHTTPLoopback: allowHTTPLoopback)
        }
        let host = try Self.checkedHost(filled.replacingOccurrences(of: "\u{1}", with: "0"), allowHTTPLoopback: allowHTTPLoopback)
        return Destination(hosts: allowedHosts.union([host]), allowHTTPLoopback: allowHTTPLoopback)
    }

    /// The hosts a relay may send to and whether http to loopback is allowed.
    public struct Destination: Sendable, Equatable {
        public var hosts: Set<String>
        public var allowHTTPLoopback: Bool

        /// Checks a filled-in URL before anything is sent.
        /// - Throws: `RELAY_URL_NOT_ALLOWED`.
        public func check(_ url: String) throws(Invalid) {
            let host = try RelayTemplate.checkedHost(url, allowHTTPLoopback: allowHTTPLoopback)
            guard hosts.contains(host) else {
                throw Invalid(code: .relayURLNotAllowed, message: "the filled-in relay URL names a host that is not the template's nor in allowed_hosts")
            }
        }
    }

    /// The lower-case host of an https URL (or an http URL to loopback when allowed).
    /// - Throws: `RELAY_URL_NOT_ALLOWED`.
    static func checkedHost(_ text: String, allowHTTPLoopback: Bool) throws(Invalid) -> String {
        guard let u = URL(string: text), let scheme = u.scheme?.lowercased(), var host = u.host?.lowercased(), !host.isEmpty else {
            throw Invalid(code: .relayURLNotAllowed, message: "request.url is not a URL with a host")
        }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard u.user == nil, u.password == nil else {
            throw Invalid(code: .relayURLNotAllowed, message: "request.url has user information")
        }
        switch scheme {
        case "https": return host
        case "http":
            guard isLoopback(host) else {
                throw Invalid(code: .relayURLNotAllowed, message: "request.url is http to a host that is not loopback: card data goes over https only")
            }
            guard allowHTTPLoopback else {
                throw Invalid(
                    code: .relayURLNotAllowed,
                    message: "request.url is http to a loopback host: allowed only with \"allow_http_loopback\": true in request (development only)")
            }
            return host
        default:
            throw Invalid(code: .relayURLNotAllowed, message: "request.url is an https URL")
        }
    }

    /// localhost, ::1 or an IPv4 address in 127.0.0.0/8.
    static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "::1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts.allSatisfy({ p in !p.isEmpty && p.count <= 3 && p.allSatisfy(\.isASCII) && p.allSatisfy(\.isNumber) && Int(p)! <= 255 })
        else { return false }
        return parts[0] == "127"
    }

    static func isHostByte(_ b: UInt8) -> Bool {
        (48...57).contains(b) || (65...90).contains(b) || (97...122).contains(b) || b == 45 || b == 46
    }

    static func bodyTexts(_ body: Body) -> [String] {
        switch body {
        case .form(let pairs): pairs.flatMap { [$0.0, $0.1] }
        case .json(let text): [text]
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
