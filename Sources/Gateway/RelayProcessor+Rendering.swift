import Foundation
import NIOCore
import Money
import VaultCrypto
import VaultOpen

/// Filling a relay template in: the URL and headers (no card fields) as text, the body in
/// `SecureBytes` with the card fields copied straight from the opened card.
extension RelayProcessor {
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
    func render(_ text: String, _ request: AuthorizationRequest, percentEncode: Bool = false) throws(ProcessorError) -> String {
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

    func plainValue(_ name: String, _ request: AuthorizationRequest) throws(ProcessorError) -> String {
        switch name {
        case "amount", "#amount": return String(request.amount)
        case "amount_major", "#amount_major": return Self.major(request.amount, exponent: request.currency.exponent)
        case "currency": return request.currency.code
        case "currency_lower": return request.currency.code.lowercased()
        case "payment_id": return request.paymentID
        // Authorize only (`capture: false`) or charge: Stripe's `capture_method`, or a flag.
        case "capture_method": return request.capture ? "automatic" : "manual"
        case "capture": return request.capture ? "true" : "false"
        // The payment id: unique per payment and the same on every retry of it. The caller's
        // idempotency key is free text scoped to the caller and never leaves the vault.
        case "idempotency_key": return request.paymentID
        case _ where name.hasPrefix("env:"):
            guard let v = environment[String(name.dropFirst(4))] else {
                throw .unavailable("the relay template needs $\(name.dropFirst(4)), which is not set")
            }
            return v
        default: throw .unavailable("placeholder {{\(name)}} has no value here")
        }
    }

    enum Encoding { case form, json }

    /// A piece of the body: bytes in clear that are not card data, or a card field (copied from
    /// `SecureBytes` straight into the body's `SecureBytes`).
    enum Piece {
        case plain([UInt8])
        case secret(SecureBytes)
    }

    func renderBody(_ request: AuthorizationRequest, card: OpenedCard) throws(ProcessorError) -> SecureBytes {
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
    func segments(_ text: String, _ request: AuthorizationRequest, card: OpenedCard, encoding: Encoding, literalIsEncoded: Bool = false) throws(ProcessorError) -> [Piece] {
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

}

extension RelayTemplate {
    /// Maps a processor's answer with the `response` section: a clear outcome, or
    /// `ProcessorError.unavailable` for anything else (a 5xx, a 3xx — redirects are never followed —, a
    /// body without a readable status, a status value the template does not list). The caller
    /// decides what that means (before or after sending).
    public func outcome(httpStatus status: Int, body: ByteBuffer) throws(ProcessorError) -> AuthorizationOutcome {
        let m = response
        if status >= 500 { throw .unavailable("the processor answered \(status)") }
        if (300..<400).contains(status) { throw .unavailable("the processor answered a redirect (\(status)), not followed") }
        let json = try? JSONSerialization.jsonObject(with: Data(buffer: body))
        if m.declinedHTTPStatuses.contains(status) {
            let code = m.errorDeclineCodePath.flatMap { RelayProcessor.value(at: $0, in: json) } ?? "generic_decline"
            return .declined(code: RelayProcessor.code(code), reference: m.referencePath.flatMap { RelayProcessor.value(at: $0, in: json) })
        }
        guard (200..<300).contains(status), let value = RelayProcessor.value(at: m.statusPath, in: json) else {
            throw .unavailable("the processor answered \(status) without a readable status")
        }
        let reference = m.referencePath.flatMap { RelayProcessor.value(at: $0, in: json) }
        if m.succeeded.contains(value) { return .succeeded(reference: reference ?? "") }
        if m.declined.contains(value) {
            return .declined(code: RelayProcessor.code(m.declineCodePath.flatMap { RelayProcessor.value(at: $0, in: json) } ?? "generic_decline"), reference: reference)
        }
        if m.requiresCapture.contains(value) { return .authorized(reference: reference ?? "") }
        if m.requiresAction.contains(value) {
            return .requiresAction(ThreeDSChallenge(transactionID: reference ?? "", payload: "", challengeURL: ""))
        }
        throw .unavailable("the processor answered an unknown status")
    }
}
