import Foundation
import Hummingbird
import VaultCrypto

/// An error answer of the HTTP API (docs/errors.md): status + `{"error":{"code","message","field"}}`.
/// The code is one of the catalogue (`ErrorCode`, docs/errors.md), which gives its status; the
/// message never contains card data.
public struct APIError: HTTPResponseError, Sendable {
    public let code: ErrorCode
    public let status: HTTPResponse.Status
    public let message: String
    public let field: String?
    /// `Retry-After` seconds of a 429 or 503 (nil: `ConventionsMiddleware.retryAfterSeconds`).
    public var retryAfter: Int?

    /// An error answer with the catalogue's status for `code`.
    public init(_ code: ErrorCode, _ message: String, field: String? = nil) {
        self.code = code
        self.status = HTTPResponse.Status(code: code.status)
        self.message = message
        self.field = field
    }

    /// An error answer with the other status the catalogue gives `code` (e.g. 504 for
    /// `GATEWAY_UNAVAILABLE` when the outcome is unknown). Any other status is a programming error.
    public init(_ code: ErrorCode, status: Int, _ message: String, field: String? = nil) {
        precondition(status == code.status || status == code.entry.otherStatus, "\(code) does not answer \(status) (ErrorCode.entry)")
        self.code = code
        self.status = HTTPResponse.Status(code: status)
        self.message = message
        self.field = field
    }

    /// A vault error with the status its code calls for.
    public init(_ error: VaultError) {
        self.init(error.code, error.message, field: error.field)
        retryAfter = error.retryAfter
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var response = JSONOut.response(status, AnswerJSON.encode(Body(error: .init(code: code.rawValue, message: message, field: field))))
        if let retryAfter { response.headers[.retryAfter] = String(retryAfter) }
        return response
    }

    /// The `Error` schema: `{"error":{"code","message","field"?}}`.
    struct Body: Encodable, Sendable {
        struct Detail: Encodable, Sendable { let code: String, message: String, field: String? }
        let error: Detail
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

    /// `2026-11-23T12:50:59Z` (UTC, whole seconds).
    public static func iso(_ d: Date) -> String { JSONText.iso(d) }

    public static func response(_ status: HTTPResponse.Status, _ body: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
    }
}

extension Response {
    /// Prometheus metrics as `GET /metrics` answers them (text exposition format 0.0.4).
    public static func prometheus(_ exposition: [UInt8]) -> Response {
        Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: exposition)))
    }
}
