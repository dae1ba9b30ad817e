import Foundation
import Hummingbird
import Payments
import SocketHTTP
import VaultCrypto

/// Which local users may do what over the socket (checked on every request from `SO_PEERCRED`).
///
/// Roles: `tokenize` (POST /v1/tokens, POST /v1/validate, GET /v1/tokens/{t}, reading and paying a
/// checkout session it is given, the sandbox challenge page), `pay` (payments, customers and their
/// instruments and mandates, sessions, their lists, POST /v1/tokens (to save a card, with `dedupe`),
/// GET /v1/tokens/{t} and GET /v1/tokens), `admin` (everything, DELETE
/// /v1/tokens/{t} included). `GET /v1/health` and `GET /v1/health/ready` need only to be listed,
/// and are also answered to the sidecar's own uid and to root, listed or not, so that a probe
/// (`vault health`) run as the service's user works whoever the allow list names. A peer that is not listed, or asks for what its roles do not allow, gets
/// `403 PEER_NOT_ALLOWED` and nothing happens. `GET /metrics` and `GET /openapi.json`, like health,
/// need only to be listed (metrics carry counts and route templates, never request data).
public struct PeerPolicy: Sendable, Equatable {
    public enum Role: String, Sendable, CaseIterable { case tokenize, pay, admin }
    public enum Subject: Sendable, Hashable { case uid(UInt32), gid(UInt32) }

    public var entries: [Subject: Set<Role>]

    public init(entries: [Subject: Set<Role>]) { self.entries = entries }

    /// The default: the sidecar's own uid, with every role.
    public static var ownerOnly: PeerPolicy { PeerPolicy(entries: [.uid(getuid()): Set(Role.allCases)]) }

    /// Parses `--allow` values: `uid:1000=tokenize,pay`, `gid:50=tokenize`, `uid:0=admin`.
    /// - Throws: `PEER_POLICY_INVALID`.
    public init(parsing values: [String]) throws(VaultError) {
        var entries: [Subject: Set<Role>] = [:]
        for value in values {
            let parts = value.split(separator: "=", maxSplits: 1)
            let who = parts.first?.split(separator: ":") ?? []
            guard parts.count == 2, who.count == 2, let id = UInt32(who[1]), who[0] == "uid" || who[0] == "gid" else {
                throw VaultError(.peerPolicyInvalid, "--allow is uid:N=role[,role] or gid:N=role[,role] (roles: tokenize, pay, admin)")
            }
            var roles: Set<Role> = []
            for r in parts[1].split(separator: ",") {
                guard let role = Role(rawValue: String(r)) else {
                    throw VaultError(.peerPolicyInvalid, "unknown role \(JSONReader.printable(String(r))) (roles: tokenize, pay, admin)")
                }
                roles.insert(role)
            }
            let subject: Subject = who[0] == "uid" ? .uid(id) : .gid(id)
            entries[subject, default: []].formUnion(roles)
        }
        self.entries = entries
    }

    /// The roles of a peer (its uid's and its primary gid's).
    public func roles(of peer: PeerCredentials) -> Set<Role> {
        (entries[.uid(peer.uid)] ?? []).union(entries[.gid(peer.gid)] ?? [])
    }

    /// The roles a request needs, from the route table (`SidecarRoutes.table`): the matched
    /// route's (`template` is Hummingbird's `endpointPath`); nil means "any listed peer"
    /// (health, metrics, the spec). A request no route matches needs admin.
    /// Whether `peer` is the server's own uid or root asking a health route.
    static func mayProbe(_ peer: PeerCredentials, method: HTTPRequest.Method, template: String?) -> Bool {
        guard method == .get, let template, Readiness.probePaths.contains(template) else { return false }
        return peer.uid == getuid() || peer.uid == 0
    }

    static func requiredRoles(method: HTTPRequest.Method, template: String?) -> Set<Role>? {
        guard let route = SidecarRoutes.table.route(method, template: template) else { return [.admin] }
        return route.access
    }
}

/// Refuses requests whose peer is not allowed (403 `PEER_NOT_ALLOWED`), before any handler runs.
public struct PeerAuthorizationMiddleware: RouterMiddleware {
    public typealias Context = VaultRequestContext
    let policy: PeerPolicy

    public init(policy: PeerPolicy) { self.policy = policy }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let peer = context.peer else {
            throw APIError(.peerNotAllowed, "the peer's credentials could not be read")
        }
        let roles = policy.roles(of: peer)
        let allowed: Bool
        if let needed = PeerPolicy.requiredRoles(method: request.method, template: context.endpointPath) {
            allowed = !roles.isDisjoint(with: needed)
        } else {
            allowed = !roles.isEmpty || PeerPolicy.mayProbe(peer, method: request.method, template: context.endpointPath)
        }
        guard allowed else {
            // The path may carry anything a caller typed: log it with digits dropped.
            context.logger.notice("peer refused", metadata: [
                "uid": "\(peer.uid)", "gid": "\(peer.gid)", "path": "\(JSONReader.printable(String(request.uri.path.prefix(128))))",
            ])
            throw APIError(.peerNotAllowed, "uid \(peer.uid) may not do this on this vault")
        }
        // The handler learns who calls: idempotency keys are scoped by uid, and a tokenize-only
        // caller sees generic decline codes.
        return try await Caller.$current.withValue(Caller(uid: peer.uid, roles: roles)) { try await next(request, context) }
    }
}

/// The peer of the request being handled and its roles, set by `PeerAuthorizationMiddleware`
/// (nil when routes are served without it, as in route tests: the sidecar never does that).
public struct Caller: Sendable, Equatable {
    public var uid: UInt32
    public var roles: Set<PeerPolicy.Role>

    public init(uid: UInt32, roles: Set<PeerPolicy.Role>) {
        self.uid = uid
        self.roles = roles
    }

    @TaskLocal public static var current: Caller?

    /// A caller with the tokenize role only (a checkout page's server): it sees generic decline
    /// codes, never the precise reason, so it cannot use sessions to test cards.
    public var isTokenizeOnly: Bool { roles.isDisjoint(with: [.pay, .admin]) }

    /// The idempotency scope of this caller's own payments (`POST /v1/payments`).
    static var paymentScope: String { current.map { PaymentScope.peer(uid: $0.uid) } ?? PaymentScope.unknownPeer }
}
