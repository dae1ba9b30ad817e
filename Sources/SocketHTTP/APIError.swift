import Foundation
import Hummingbird
import VaultCrypto

/// An error answer of the HTTP API (docs/errors.md): status +
/// `{"error":{"code","message","field"}}`. The message never contains card data; codes are the
/// stable ones of docs/errors.md.
public struct APIError: HTTPResponseError, Sendable {
    public let status: HTTPResponse.Status
    public let code: String
    public let message: String
    public let field: String?

    /// An error answer.
    public init(_ status: HTTPResponse.Status, _ code: String, _ message: String, field: String? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.field = field
    }

    /// A vault error with the status its code calls for.
    public init(_ error: VaultError) {
        self.init(Self.status(for: error.code.rawValue), error.code.rawValue, error.message, field: error.field)
    }

    /// The status an error code answers with.
    public static func status(for code: String) -> HTTPResponse.Status {
        switch code {
        case "TOKEN_NOT_FOUND", "PAYMENT_NOT_FOUND", "AUTHORIZATION_NOT_FOUND", "THREE_DS_TRANSACTION_NOT_FOUND", "CUSTOMER_NOT_FOUND",
             "INSTRUMENT_NOT_FOUND", "SESSION_NOT_FOUND", "MANDATE_NOT_FOUND": .notFound
        case "SESSION_EXPIRED", "MANDATE_EXPIRED": .gone
        case "INPUT_TOO_LARGE", "BODY_TOO_LARGE": .contentTooLarge
        case "STORE_UNAVAILABLE", "STORE_ROW_CORRUPT", "GATEWAY_UNAVAILABLE": .serviceUnavailable
        case "TOKEN_EXISTS", "TOKEN_IN_USE", "IDEMPOTENCY_KEY_REUSED", "PAYMENT_IN_PROGRESS", "PAYMENT_ID_REUSED",
             "PAYMENT_NOT_AWAITING_ACTION", "THREE_DS_JWT_REPLAYED", "SESSION_USED", "SESSION_ATTEMPTS_EXCEEDED",
             "MANDATE_CANCELLED": .conflict
        case "PEER_NOT_ALLOWED": .forbidden
        case "REQUEST_MALFORMED": .badRequest
        default: .unprocessableContent
        }
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var body = "{\"error\":{\"code\":"
        JSONOut.string(code, into: &body)
        body += ",\"message\":"
        JSONOut.string(message, into: &body)
        if let field {
            body += ",\"field\":"
            JSONOut.string(field, into: &body)
        }
        body += "}}"
        return JSONOut.response(status, body)
    }
}

/// Writing JSON answers (metadata only).
public enum JSONOut {
    public static func string(_ s: String, into out: inout String) {
        out += "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where u.value < 0x20: out += "\\u" + String(repeating: "0", count: 4 - String(u.value, radix: 16).count) + String(u.value, radix: 16)
            default: out.unicodeScalars.append(u)
            }
        }
        out += "\""
    }

    /// `2026-11-23T12:50:59Z` (UTC, whole seconds), without Foundation's formatter machinery.
    public static func iso(_ d: Date) -> String {
        var t = time_t(d.timeIntervalSince1970.rounded(.down))
        var tm = tm()
        gmtime_r(&t, &tm)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(tm.tm_year + 1900)-\(two(tm.tm_mon + 1))-\(two(tm.tm_mday))T\(two(tm.tm_hour)):\(two(tm.tm_min)):\(two(tm.tm_sec))Z"
    }

    public static func response(_ status: HTTPResponse.Status, _ body: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
    }
}
