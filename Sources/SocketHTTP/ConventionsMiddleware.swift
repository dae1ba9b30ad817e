import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOHTTP1
import VaultCrypto

/// The conventions every answer of an HTTP API follows (README "Conventions"), as the outermost
/// middleware:
///
/// - `Request-Id` on every answer: Hummingbird's id of the request (`context.id`, hex digits),
///   the one its logger carries (`hb.request.id`) and the request log line writes as
///   `request_id`, as does every other line logged while the request is handled
///   (`RequestScope`). A caller's own `Request-Id` or `X-Request-Id` is not echoed: it is free text
///   that could hold anything (a card number too); callers correlate with the id answered.
/// - `Retry-After` (seconds) on every 429 and 503 answer.
/// - A coded JSON error body on every error answer, also for a path no route has (404
///   `ROUTE_NOT_FOUND`) and for a method the path's route does not take (405
///   `METHOD_NOT_ALLOWED`, with `Allow` listing the methods it takes).
public struct ConventionsMiddleware<Context: RequestContext>: RouterMiddleware {
    /// The routes served, as method and path template (OpenAPI notation, `{param}` for a segment).
    let routes: [(method: HTTPRequest.Method, path: String)]
    /// Whether each request gets a log line (`--log-requests`).
    let logRequests: Bool
    /// Seconds a caller should wait before retrying a 429 or 503.
    public static var retryAfterSeconds: Int { 2 }

    public init(routes: [(method: HTTPRequest.Method, path: String)], logRequests: Bool = false) {
        self.routes = routes
        self.logRequests = logRequests
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        var response: Response
        var code: String?
        var matched = true
        let id = Self.requestID(context)
        do {
            // Every line logged while the handler runs carries the id (`RequestScope`).
            response = try await RequestScope.$requestID.withValue(id) { try await next(request, context) }
        } catch let error as HTTPError where error.status == .notFound {
            // Only the router throws HTTPError (handlers throw APIError): no route took the
            // request, for its path or its method.
            let unmatched = unmatched(request)
            code = unmatched.code.rawValue
            matched = false
            response = try unmatched.response(from: request, context: context)
            let allowed = allowedMethods(request.uri.path)
            if !allowed.isEmpty { response.headers[.allow] = allowed.map(\.rawValue).joined(separator: ", ") }
        } catch let error as any HTTPResponseError {
            code = (error as? APIError)?.code.rawValue
            response = try error.response(from: request, context: context)
        } catch let error as HTTPParserError {
            // The body's framing was malformed (a bad chunk size): the server answers 400
            // REQUEST_MALFORMED itself (`ParserRefusalBodyHandler`) and closes the connection.
            if logRequests { log(request, context: context, matched: matched, status: 400, code: ErrorCode.requestMalformed.rawValue, since: start) }
            throw error
        } catch {
            if logRequests { log(request, context: context, matched: matched, status: 500, code: "INTERNAL", since: start) }
            throw error
        }
        response.headers[.requestID] = id
        if response.status == .serviceUnavailable || response.status == .tooManyRequests, response.headers[.retryAfter] == nil {
            response.headers[.retryAfter] = String(Self.retryAfterSeconds)
        }
        if logRequests { log(request, context: context, matched: matched, status: Int(response.status.code), code: code, since: start) }
        return response
    }

    /// The request line (`--log-requests`): method, route template (never the path, so no id or
    /// card digit), status, the error code answered, duration, peer uid and the `Request-Id`
    /// answered (`route` is `-` when no route took the request). Errors (status 500 and up) at
    /// error level, others at info.
    func log(_ request: Request, context: Context, matched: Bool, status: Int, code: String?, since start: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - start
        let ms = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        var metadata: Logger.Metadata = [
            "method": "\(MethodLabel.label(request.method.rawValue))", "route": "\(matched ? context.endpointPath ?? "-" : "-")", "status": "\(status)",
            "ms": "\((ms * 1000).rounded() / 1000)", "request_id": "\(Self.requestID(context))",
        ]
        if let peer = (context as? VaultRequestContext)?.peer { metadata["uid"] = "\(peer.uid)" }
        if let code { metadata["code"] = "\(code)" }
        context.logger.log(level: status >= 500 ? .error : .info, "request", metadata: metadata)
    }

    /// The id of the request (`context.id`, or a fresh one where no server gave it one).
    public static func requestID(_ context: some RequestContext) -> String {
        context.logger[metadataKey: "hb.request.id"]?.description ?? UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
    }

    /// The coded error for a request no route answered: 405 when the path has routes, else 404.
    func unmatched(_ request: Request) -> APIError {
        let allowed = allowedMethods(request.uri.path)
        guard allowed.isEmpty else {
            return APIError(.methodNotAllowed, "this path takes \(allowed.map(\.rawValue).joined(separator: ", "))")
        }
        return APIError(.routeNotFound, "no route has this path")
    }

    /// The methods of the routes whose template matches `path`.
    func allowedMethods(_ path: String) -> [HTTPRequest.Method] {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        var methods: [HTTPRequest.Method] = []
        for route in routes where !methods.contains(route.method) {
            let template = route.path.split(separator: "/", omittingEmptySubsequences: false)
            guard template.count == segments.count else { continue }
            if zip(template, segments).allSatisfy({ t, s in t == s || (t.hasPrefix("{") && t.hasSuffix("}") && !s.isEmpty) }) {
                methods.append(route.method)
            }
        }
        return methods
    }
}

extension Array {
    /// Method and path of every route, for `ConventionsMiddleware`.
    public func methodsAndPaths<Access>() -> [(method: HTTPRequest.Method, path: String)] where Element == Route<Access> {
        map { ($0.method, $0.path) }
    }
}

extension HTTPField.Name {
    /// The id of the request, on every answer (`ConventionsMiddleware`).
    public static let requestID = Self("Request-Id")!
}
