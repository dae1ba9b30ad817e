import AsyncHTTPClient
import CardRules
import Foundation
import GRDB
import Money
import NIOCore
import NIOPosix
import VaultCrypto
import VaultOpen

/// The outbound adapter: fills a `RelayTemplate` with the opened card and sends it to a real
/// processor's API, then maps the answer back (DESIGN §7).
///
/// The request body is built in `SecureBytes`; the copy handed to the HTTP client is zeroed when
/// the call returns (NIO's own buffers are outside our reach: see docs/threat-model.md). The
/// processor's idempotency key is the payment id (`{{idempotency_key}}`, `{{payment_id}}`); the
/// caller's own idempotency key is never sent. A ledger row claims each payment id before it is
/// sent (an atomic insert: only the call that made the row sends): a final outcome is returned
/// again for the same id without a second call, and a row still `sent` answers
/// `PaymentInProgress` (504 `AUTHORIZATION_IN_PROGRESS`), never a second send.
///
/// Where it sends: only to the template's host (or its `allowed_hosts`), over https (http to
/// loopback only when the template allows it), and never where a redirect points: redirects are
/// not followed, and a 3xx answer is an unknown outcome like a 5xx.
///
/// Errors: a connection that could not be made is `ProcessorUnavailable` (503: nothing was
/// sent, nothing charged). Once the request is sent, anything but a clear outcome (a timeout, a
/// lost connection, a 5xx, an unreadable answer) is `ProcessorOutcomeUnknown` (504: the payment
/// stays open; retries carry the same idempotency key to the processor).
public final class RelayProcessor: PaymentProcessor {
    public var name: String { "relay:" + template.name }
    let template: RelayTemplate
    let environment: [String: String]
    /// The hosts the template may send to (checked on every filled-in URL before sending).
    let destination: RelayTemplate.Destination
    private let ledger: DatabaseQueue
    private let http: HTTPClient

    /// - Throws: `RelayTemplate.Invalid` (the template's URL may not be sent to, its variables
    ///   filled in from `environment`), or an error opening the ledger.
    public init(template: RelayTemplate, ledgerPath: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        self.template = template
        self.environment = environment
        destination = try template.destination(environment: environment)
        var config = Configuration()
        // WAL: one fsync per commit instead of a rollback journal's several; FULL: durable on return.
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        ledger = try DatabaseQueue(path: ledgerPath, configuration: config)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("relay-v1") { db in
            try db.execute(sql: """
                CREATE TABLE relay_charges (
                    payment_id TEXT PRIMARY KEY NOT NULL,
                    amount INTEGER NOT NULL,
                    currency TEXT NOT NULL,
                    envelope_id TEXT NOT NULL,
                    state TEXT NOT NULL,
                    status TEXT,
                    decline_code TEXT,
                    reference TEXT,
                    created_at INTEGER NOT NULL
                )
                """)
        }
        try migrator.migrate(ledger)
        // Never follow a redirect: a 307/308 would re-post the card (and the template's secrets)
        // wherever the processor, or whoever answers in its name, points. A 3xx is returned as it is.
        var configuration = HTTPClient.Configuration(timeout: .init(connect: .seconds(5), read: .milliseconds(Int64(template.timeout * 1000))))
        configuration.redirectConfiguration = .disallow
        http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    deinit { try? http.syncShutdown() }

    /// What claiming a payment id found.
    enum Claim: Sendable {
        /// This call made the ledger row: it (and only it) sends.
        case claimed
        /// The row was there: its outcome when final, nil while it is still `sent`.
        case existing(outcome: AuthorizationOutcome?)
        /// The row is there for another amount, currency or card.
        case reused
    }

    public func authorize(_ request: AuthorizationRequest, card: OpenedCard) async throws -> AuthorizationOutcome {
        // Claim the payment id: the INSERT and the read of what was there are one transaction, so
        // of two concurrent calls exactly one makes the row, and only that one sends.
        let now = Int64(Date().timeIntervalSince1970)
        let claim: Claim = try await write { db in
            try db.execute(
                sql: """
                    INSERT INTO relay_charges (payment_id, amount, currency, envelope_id, state, created_at) VALUES (?, ?, ?, ?, 'sent', ?)
                    ON CONFLICT(payment_id) DO NOTHING
                    """,
                arguments: [request.paymentID, request.amount, request.currency.code, card.envelopeID, now])
            if db.changesCount == 1 { return .claimed }
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM relay_charges WHERE payment_id = ?", arguments: [request.paymentID]) else {
                throw ProcessorUnavailable("the relay ledger lost a row")
            }
            let amount: Int = row["amount"], currency: String = row["currency"], env: String = row["envelope_id"]
            guard amount == request.amount, currency == request.currency.code, env == card.envelopeID else { return .reused }
            return .existing(outcome: Self.outcome(row))
        }
        switch claim {
        case .claimed: break
        case .reused: throw PaymentIDReused()
        case .existing(let outcome?): return outcome
        case .existing(nil):
            // Sent by another call (in flight now, or its answer was lost): never send it again.
            throw PaymentInProgress()
        }
        let (status, body): (Int, ByteBuffer)
        do {
            (status, body) = try await send(request, card: card)
        } catch let error as ProcessorUnavailable {
            // Never connected: nothing was sent, so nothing can have been charged.
            try? await write { db in try db.execute(sql: "DELETE FROM relay_charges WHERE payment_id = ? AND state = 'sent'", arguments: [request.paymentID]) }
            throw error
        } catch let error as ProcessorRefusal {
            // Refused before sending (a URL the template may not send to): nothing was sent.
            try? await write { db in try db.execute(sql: "DELETE FROM relay_charges WHERE payment_id = ? AND state = 'sent'", arguments: [request.paymentID]) }
            throw error
        }
        // Sent: from here on, an answer that is not a clear outcome (5xx, unreadable) may follow
        // a charge. The row stays 'sent' and the outcome is unknown (504), never "nothing charged".
        let outcome: AuthorizationOutcome
        do {
            outcome = try map(status: status, body: body)
        } catch let error as ProcessorUnavailable {
            throw ProcessorOutcomeUnknown(error.reason)
        }
        let (s, code, reference) = Self.columns(outcome)
        do {
            try await write { db in
                try db.execute(
                    sql: "UPDATE relay_charges SET state = 'done', status = ?, decline_code = ?, reference = ? WHERE payment_id = ?",
                    arguments: [s, code, reference, request.paymentID])
            }
        } catch {
            throw ProcessorOutcomeUnknown("the processor answered but its outcome could not be recorded")
        }
        return outcome
    }

    public func confirm(paymentID: String, threeDSResult: String) async throws -> AuthorizationOutcome {
        throw ProcessorRefusal(status: 409, code: "PAYMENT_NOT_AWAITING_ACTION", message: "the relay does not run 3-D Secure challenges")
    }

    public func outcome(of paymentID: String) async throws(ProcessorUnavailable) -> AuthorizationOutcome? {
        let row: Row?
        do {
            row = try await ledger.read { db in try Row.fetchOne(db, sql: "SELECT * FROM relay_charges WHERE payment_id = ?", arguments: [paymentID]) }
        } catch {
            throw ProcessorUnavailable("the relay ledger failed")
        }
        guard let row else { return nil }
        guard let outcome = Self.outcome(row) else {
            // Sent, answer never read: only the processor knows. Leave the payment open.
            throw ProcessorUnavailable("the processor's answer for this payment was never received")
        }
        return outcome
    }

    // MARK: - Sending

    func send(_ request: AuthorizationRequest, card: OpenedCard) async throws -> (Int, ByteBuffer) {
        let url = try render(template.url, request, percentEncode: true)
        // Only the template's host (or its allowed_hosts), over https: checked before anything is sent.
        do throws(RelayTemplate.Invalid) { try destination.check(url) } catch {
            throw ProcessorRefusal(status: 422, code: error.code, message: error.message)
        }
        var outbound = HTTPClientRequest(url: url)
        outbound.method = .init(rawValue: template.method)
        for (name, value) in template.headers { outbound.headers.add(name: name, value: try render(value, request)) }
        let body = try renderBody(request, card: card)
        var buffer = body.withUnsafeBytes { ByteBuffer(bytes: $0) }
        switch template.body {
        case .form: outbound.headers.replaceOrAdd(name: "Content-Type", value: "application/x-www-form-urlencoded")
        case .json: outbound.headers.replaceOrAdd(name: "Content-Type", value: "application/json")
        }
        outbound.body = .bytes(buffer)
        defer {
            // Best effort: our reference to the request bytes is zeroed once the call is over.
            outbound.body = nil
            buffer.withUnsafeMutableReadableBytes { raw in if let base = raw.baseAddress { memset(base, 0, raw.count) } }
        }
        do {
            let response = try await http.execute(outbound, timeout: .milliseconds(Int64(template.timeout * 1000)))
            let data = try await response.body.collect(upTo: 256 * 1024)
            return (Int(response.status.code), data)
        } catch let error as HTTPClientError where error == .connectTimeout {
            throw ProcessorUnavailable("connecting to the processor timed out")
        } catch let error as IOError where [ECONNREFUSED, ENETUNREACH, EHOSTUNREACH, ENOENT].contains(error.errnoCode) {
            throw ProcessorUnavailable("the processor refused the connection")
        } catch is NIOConnectionError {
            throw ProcessorUnavailable("the processor cannot be reached")
        } catch {
            throw ProcessorOutcomeUnknown("the processor call failed after sending (\(type(of: error)))")
        }
    }

    /// Maps the processor's answer; 5xx and unreadable answers are `ProcessorUnavailable`.
    func map(status: Int, body: ByteBuffer) throws -> AuthorizationOutcome {
        let m = template.response
        if status >= 500 { throw ProcessorUnavailable("the processor answered \(status)") }
        // Redirects are never followed, and a redirect is no outcome: unknown, like a 5xx.
        if (300..<400).contains(status) { throw ProcessorUnavailable("the processor answered a redirect (\(status)), not followed") }
        let json = try? JSONSerialization.jsonObject(with: Data(buffer: body))
        if m.declinedHTTPStatuses.contains(status) {
            let code = m.errorDeclineCodePath.flatMap { Self.value(at: $0, in: json) } ?? "generic_decline"
            return .declined(code: Self.code(code), reference: m.referencePath.flatMap { Self.value(at: $0, in: json) })
        }
        guard (200..<300).contains(status), let value = Self.value(at: m.statusPath, in: json) else {
            throw ProcessorUnavailable("the processor answered \(status) without a readable status")
        }
        let reference = m.referencePath.flatMap { Self.value(at: $0, in: json) }
        if m.succeeded.contains(value) { return .succeeded(reference: reference ?? "") }
        if m.declined.contains(value) {
            return .declined(code: Self.code(m.declineCodePath.flatMap { Self.value(at: $0, in: json) } ?? "generic_decline"), reference: reference)
        }
        if m.requiresAction.contains(value) {
            return .requiresAction(ThreeDSChallenge(transactionID: reference ?? "", payload: "", challengeURL: ""))
        }
        throw ProcessorUnavailable("the processor answered an unknown status")
    }

    /// Minor units as a decimal in major units: 1050, 2 → "10.50"; 1050, 0 → "1050".
    static func major(_ amount: Int, exponent: Int) -> String {
        guard exponent > 0 else { return String(amount) }
        var unit = 1
        for _ in 0..<exponent { unit *= 10 }
        let fraction = String(amount % unit)
        return "\(amount / unit)." + String(repeating: "0", count: exponent - fraction.count) + fraction
    }

    /// A decline code as the vault passes it on: lower-snake ASCII, at most 64 characters.
    static func code(_ raw: String) -> String {
        let cleaned = String(raw.lowercased().unicodeScalars.map { ("a"..."z").contains($0) || ("0"..."9").contains($0) ? Character($0) : "_" }.prefix(64))
        return cleaned.isEmpty ? "generic_decline" : cleaned
    }

    static func value(at path: String, in json: Any?) -> String? {
        var current = json
        for key in path.split(separator: ".") { current = (current as? [String: Any])?[String(key)] }
        switch current {
        case let s as String: return s
        case let n as NSNumber: return n.stringValue
        default: return nil
        }
    }

    // MARK: - Rendering

    /// URL and header values: no card fields (the template was checked on load). In a URL, values
    /// are percent-encoded (a base URL from `{{env:…}}` is taken as it is).
    func render(_ text: String, _ request: AuthorizationRequest, percentEncode: Bool = false) throws -> String {
        var out = ""
        var rest = Substring(text)
        while let open = rest.range(of: "{{"), let close = rest.range(of: "}}", range: open.upperBound..<rest.endIndex) {
            out += rest[..<open.lowerBound]
            let name = String(rest[open.upperBound..<close.lowerBound])
            let value = try plainValue(name, request)
            out += percentEncode && !name.hasPrefix("env:") ? String(decoding: Self.encode(Array(value.utf8), .form).map { $0 == 43 ? 0x20 : $0 }, as: UTF8.self)
                .replacingOccurrences(of: " ", with: "%20") : value
            rest = rest[close.upperBound...]
        }
        return out + rest
    }

    func plainValue(_ name: String, _ request: AuthorizationRequest) throws -> String {
        switch name {
        case "amount", "#amount": return String(request.amount)
        case "amount_major", "#amount_major": return Self.major(request.amount, exponent: request.currency.exponent)
        case "currency": return request.currency.code
        case "currency_lower": return request.currency.code.lowercased()
        case "payment_id": return request.paymentID
        // The payment id: unique per payment and the same on every retry of it. The caller's
        // idempotency key is free text scoped to the caller and never leaves the vault.
        case "idempotency_key": return request.paymentID
        case _ where name.hasPrefix("env:"):
            guard let v = environment[String(name.dropFirst(4))] else {
                throw ProcessorUnavailable("the relay template needs $\(name.dropFirst(4)), which is not set")
            }
            return v
        default: throw ProcessorUnavailable("placeholder {{\(name)}} has no value here")
        }
    }

    enum Encoding { case form, json }

    /// A piece of the body: bytes in clear that are not card data, or a card field (copied from
    /// `SecureBytes` straight into the body's `SecureBytes`).
    enum Piece {
        case plain([UInt8])
        case secret(SecureBytes)
    }

    func renderBody(_ request: AuthorizationRequest, card: OpenedCard) throws -> SecureBytes {
        var pieces: [Piece] = []
        let encoding: Encoding
        switch template.body {
        case .form(let pairs):
            encoding = .form
            for (i, (key, value)) in pairs.enumerated() {
                pieces.append(.plain(Self.encode(Array((i == 0 ? "" : "&").utf8), .form, raw: true) + Self.encode(Array(key.utf8), .form) + [UInt8(ascii: "=")]))
                try pieces += segments(value, request, card: card, encoding: .form)
            }
        case .json(let text):
            encoding = .json
            // "{{#amount}}" (with its quotes) becomes a bare number.
            let numeric = text.replacingOccurrences(of: "\"{{#amount}}\"", with: String(request.amount))
                .replacingOccurrences(of: "\"{{#amount_major}}\"", with: Self.major(request.amount, exponent: request.currency.exponent))
                .replacingOccurrences(of: "\"{{#exp_month}}\"", with: String(card.card.expiry.month))
                .replacingOccurrences(of: "\"{{#exp_year}}\"", with: String(card.card.expiry.year))
            try pieces += segments(numeric, request, card: card, encoding: .json, literalIsEncoded: true)
        }
        _ = encoding
        let size = pieces.reduce(0) { n, p in
            switch p {
            case .plain(let b): n + b.count
            case .secret(let s): n + s.count
            }
        }
        return SecureBytes(capacity: max(size, 1)) { out in
            var at = 0
            for p in pieces {
                switch p {
                case .plain(let b):
                    b.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: out[at..<(at + b.count)]).copyMemory(from: $0) }
                    at += b.count
                case .secret(let s):
                    s.withUnsafeBytes { raw in
                        if raw.count > 0 { UnsafeMutableRawBufferPointer(rebasing: out[at..<(at + raw.count)]).copyMemory(from: raw) }
                    }
                    at += s.count
                }
            }
            return at
        }
    }

    /// Splits a template value into pieces; card placeholders become encoded `SecureBytes`.
    func segments(_ text: String, _ request: AuthorizationRequest, card: OpenedCard, encoding: Encoding, literalIsEncoded: Bool = false) throws -> [Piece] {
        var out: [Piece] = []
        var rest = Substring(text)
        func literal(_ s: Substring) {
            guard !s.isEmpty else { return }
            out.append(.plain(literalIsEncoded ? Array(s.utf8) : Self.encode(Array(s.utf8), encoding)))
        }
        while let open = rest.range(of: "{{"), let close = rest.range(of: "}}", range: open.upperBound..<rest.endIndex) {
            literal(rest[..<open.lowerBound])
            let name = String(rest[open.upperBound..<close.lowerBound])
            switch name {
            case "pan": out.append(.secret(Self.encodeSecret(card.card.number, encoding)))
            case "cvc": out.append(.secret(Self.encodeSecret(card.card.cvc ?? SecureBytes(capacity: 0) { _ in 0 }, encoding)))
            case "name": out.append(.secret(Self.encodeSecret(card.card.name ?? SecureBytes(capacity: 0) { _ in 0 }, encoding)))
            case "exp_month": out.append(.plain(Array((card.card.expiry.month < 10 ? "0" : "").utf8) + Array(String(card.card.expiry.month).utf8)))
            case "exp_year": out.append(.plain(Array(String(card.card.expiry.year).utf8)))
            case "exp_year2": out.append(.plain(Array(String(format: "%02d", card.card.expiry.year % 100).utf8)))
            default: out.append(.plain(Self.encode(Array(try plainValue(name, request).utf8), encoding)))
            }
            rest = rest[close.upperBound...]
        }
        literal(rest)
        return out
    }

    static func encodedCount(_ b: UInt8, _ e: Encoding) -> Int {
        switch e {
        case .form: return isUnreserved(b) || b == 32 ? 1 : 3
        case .json: return b == 0x22 || b == 0x5C ? 2 : (b < 0x20 ? 6 : 1)
        }
    }

    static func isUnreserved(_ b: UInt8) -> Bool {
        (48...57).contains(b) || (65...90).contains(b) || (97...122).contains(b) || b == 45 || b == 46 || b == 95 || b == 126
    }

    static let hex = Array("0123456789ABCDEF".utf8)

    static func encode(_ b: UInt8, _ e: Encoding, into out: UnsafeMutableRawBufferPointer, at i: inout Int) {
        switch e {
        case .form:
            if isUnreserved(b) { out[i] = b; i += 1 } else if b == 32 { out[i] = 43; i += 1 } else {
                out[i] = 37; out[i + 1] = hex[Int(b >> 4)]; out[i + 2] = hex[Int(b & 15)]; i += 3
            }
        case .json:
            if b == 0x22 || b == 0x5C { out[i] = 0x5C; out[i + 1] = b; i += 2 } else if b < 0x20 {
                for (k, c) in Array("\\u00".utf8).enumerated() { out[i + k] = c }
                out[i + 4] = hex[Int(b >> 4)]; out[i + 5] = hex[Int(b & 15)]; i += 6
            } else { out[i] = b; i += 1 }
        }
    }

    static func encode(_ bytes: [UInt8], _ e: Encoding, raw: Bool = false) -> [UInt8] {
        if raw { return bytes }
        var out = [UInt8](repeating: 0, count: bytes.reduce(0) { $0 + encodedCount($1, e) })
        out.withUnsafeMutableBytes { buf in
            var i = 0
            for b in bytes { encode(b, e, into: buf, at: &i) }
        }
        return out
    }

    static func encodeSecret(_ s: SecureBytes, _ e: Encoding) -> SecureBytes {
        s.withUnsafeBytes { raw in
            let n = raw.reduce(0) { $0 + encodedCount($1, e) }
            return SecureBytes(capacity: max(n, 1)) { out in
                var i = 0
                for b in raw { encode(b, e, into: out, at: &i) }
                return i
            }
        }
    }

    // MARK: - Ledger

    static func outcome(_ row: Row) -> AuthorizationOutcome? {
        let state: String = row["state"]
        guard state == "done", let status: String = row["status"] else { return nil }
        switch status {
        case "succeeded": return .succeeded(reference: row["reference"] ?? "")
        case "requires_action": return .requiresAction(ThreeDSChallenge(transactionID: row["reference"] ?? "", payload: "", challengeURL: ""))
        default: return .declined(code: row["decline_code"] ?? "generic_decline", reference: row["reference"])
        }
    }

    static func columns(_ o: AuthorizationOutcome) -> (String, String?, String?) {
        switch o {
        case .succeeded(let r): ("succeeded", nil, r)
        case .declined(let c, let r): ("declined", c, r)
        case .requiresAction(let ch): ("requires_action", nil, ch.transactionID)
        }
    }

    private func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        do { return try await ledger.write(body) } catch let error as ProcessorUnavailable { throw error } catch {
            throw ProcessorUnavailable("the relay ledger failed")
        }
    }
}

/// The processor may have acted but its answer was lost (timeout): 504, the payment stays open.
public struct ProcessorOutcomeUnknown: Error, Sendable, CustomStringConvertible {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { "GATEWAY_UNAVAILABLE (outcome unknown): \(reason)" }
}
