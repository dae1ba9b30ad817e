import Hummingbird
import VaultCrypto

/// One route of a server's table: its method and path template, the audit log's action (nil: not
/// audited), and who may call it (`Access`: the sidecar's roles; the gateway has none per route).
///
/// The path is in OpenAPI notation (`/v1/tokens/{token}`), which is also how Hummingbird names the
/// matched route (`context.endpointPath`): the metrics label, the audit middleware's key and the
/// documented route are all this one string.
public struct Route<Access: Sendable>: Sendable {
    public let method: HTTPRequest.Method
    public let path: String
    public let action: String?
    public let access: Access

    public init(_ method: HTTPRequest.Method, _ path: String, action: String? = nil, access: Access) {
        self.method = method
        self.path = path
        self.action = action
        self.access = access
    }

    /// `METHOD /path/{param}`, as documented (openapi.json) and as the audit middleware keys it.
    public var documented: String { "\(method.rawValue) \(path)" }

    /// The `route` label of the request metrics (the matched template, never the request path).
    public var metricsLabel: String { path }
}

extension Route where Access == Void {
    public init(_ method: HTTPRequest.Method, _ path: String, action: String? = nil) {
        self.init(method, path, action: action, access: ())
    }
}

extension Array {
    /// Every route as `METHOD /path`.
    public func documentedRoutes<Access>() -> [String] where Element == Route<Access> { map(\.documented) }

    /// `METHOD /path` → audit action, for the audited routes.
    public func auditedActions<Access>() -> [String: String] where Element == Route<Access> {
        Dictionary(uniqueKeysWithValues: compactMap { r in r.action.map { (r.documented, $0) } })
    }

    /// The route matched as `template` (`context.endpointPath`) for `method`, if any.
    public func route<Access>(_ method: HTTPRequest.Method, template: String?) -> Route<Access>? where Element == Route<Access> {
        guard let template else { return nil }
        return first { $0.method == method && $0.path == template }
    }
}

/// A route and the controller method that answers it. A controller lists its endpoints once;
/// `addRoutes(to:)` registers exactly those, and the server's route table is made of them.
public struct Endpoint<Controller: Sendable, Access: Sendable>: Sendable {
    public let route: Route<Access>
    let handler: @Sendable (Controller, Request, any RequestContext) async throws -> Response

    public init(
        _ route: Route<Access>, _ handler: @escaping @Sendable (Controller, Request, any RequestContext) async throws -> Response
    ) {
        self.route = route
        self.handler = handler
    }
}

extension RouterMethods {
    /// Registers `endpoints` answered by `controller`. A domain error (`VaultError`) a handler
    /// throws becomes its coded HTTP answer (`APIError`: the catalogue's status).
    public func add<Controller: Sendable, Access: Sendable>(_ endpoints: [Endpoint<Controller, Access>], controller: Controller) {
        for endpoint in endpoints {
            let handler = endpoint.handler
            on(RouterPath(endpoint.route.path), method: endpoint.route.method) { request, context in
                do { return try await handler(controller, request, context) } catch let error as VaultError { throw APIError(error) }
            }
        }
    }
}
