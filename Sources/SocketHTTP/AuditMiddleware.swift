import Audit
import VaultCrypto
import Hummingbird

/// What a handler adds to its request's audit line: the ids it made or used (a new token, a
/// payment). Set by `AuditMiddleware` for the request's task; handlers fill it through `current`.
public final class AuditNote: @unchecked Sendable {
    @TaskLocal public static var current: AuditNote?

    public var token: String?
    public var payment: String?
    public var customer: String?
    public var kid: String?
    public var envelope: String?
    /// Counters of the request (`POST /v1/fingerprints`: the envelopes it carried, those withheld).
    public var detail: [(String, Int)] = []

    public init() {}
}

/// Appends one audit line (docs/audit-log.md) per request to an audited route: time, peer uid,
/// the route's action, the ids from the path and from `AuditNote`, and the outcome (`ok` or the
/// error code). Never card data: the line's schema has no place for it.
public struct AuditMiddleware: RouterMiddleware {
    public typealias Context = VaultRequestContext
    let log: AuditLog
    /// `METHOD /path/{param}` (the route's template) → action.
    let actions: [String: String]

    public init(log: AuditLog, actions: [String: String]) {
        self.log = log
        self.actions = actions
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let template = context.endpointPath.map { Self.openAPIPath($0) } ?? ""
        guard let action = actions[request.method.rawValue + " " + template] else { return try await next(request, context) }
        let note = AuditNote()
        let outcome: String
        do {
            let response = try await AuditNote.$current.withValue(note) { try await next(request, context) }
            let ok = response.status.code < 400
            outcome = ok ? "ok" : "HTTP_\(response.status.code)"
            record(action, outcome, note, context, pathIDs: ok)
            return response
        } catch {
            outcome = (error as? APIError)?.code.rawValue ?? "HTTP_\((error as? any HTTPResponseError)?.status.code ?? 500)"
            record(action, outcome, note, context, pathIDs: false)
            throw error
        }
    }

    /// Ids from the path are written only when the request succeeded, so they name something the
    /// vault made (random ids): a failed lookup's path is whatever the caller typed, which could
    /// be card digits. An envelope id is written only in the form the vault makes.
    private func record(_ action: String, _ outcome: String, _ note: AuditNote, _ context: Context, pathIDs: Bool) {
        let p = context.parameters
        let envelope = note.envelope.flatMap { Self.isVaultEnvelopeID($0) ? $0 : nil }
        let event = AuditEvent(
            action: action, outcome: outcome, uid: context.peer?.uid,
            token: (note.token ?? (pathIDs ? p.get("token") : nil)).map(Self.auditTokenID), payment: note.payment ?? (pathIDs ? p.get("payment") : nil),
            customer: note.customer ?? (pathIDs ? p.get("customer") : nil), kid: note.kid, envelope: envelope, detail: note.detail)
        if !log.record(event) {
            context.logger.error("audit log write failed", metadata: ["error": "\(log.lastError.map(\.code.rawValue) ?? "?")"])
        }
    }

    /// A token as the audit log writes it: a card-shaped token (15 to 19 digits, docs/card-tokens.md)
    /// as `card_<digits>`, since an id of digits alone is refused as a card number (docs/audit-log.md).
    static func auditTokenID(_ token: String) -> String {
        (15...19).contains(token.utf8.count) && token.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) ? "card_" + token : token
    }

    /// `env_` and 32 lowercase hex characters, as `CardEnvelope.seal` makes them.
    static func isVaultEnvelopeID(_ id: String) -> Bool {
        let u = Array(id.utf8)
        return u.count == 36 && id.hasPrefix("env_") && u[4...].allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }
    }

    /// Hummingbird's `/v1/tokens/:token` as OpenAPI's `/v1/tokens/{token}`.
    static func openAPIPath(_ path: String) -> String {
        path.split(separator: "/", omittingEmptySubsequences: false).map { $0.hasPrefix(":") ? "{\($0.dropFirst())}" : String($0) }
            .joined(separator: "/")
    }
}

extension AuditLog {
    /// Opens (or resumes) an audit log for a server.
    /// - Throws: `AUDIT_LOG_UNAVAILABLE` and the other codes of `AuditError`, as a `VaultError`.
    public static func open(_ path: String, process: String) throws(VaultError) -> AuditLog {
        do throws(AuditError) { return try AuditLog(path: path, process: process) } catch {
            throw VaultError(error.code.code, error.message, field: path)
        }
    }
}

/// An HTTP method as a log field or metric label: one of the standard methods, else `OTHER`. A
/// caller chooses the method token freely (it could be card digits), so it is never written as sent.
public enum MethodLabel {
    static let known: Set<String> = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]

    public static func label(_ method: String) -> String { known.contains(method) ? method : "OTHER" }
}
