import Foundation
import Hummingbird
import NIOCore

/// Who is on the other end of a Unix-socket connection: `SO_PEERCRED`, read once per connection.
public struct PeerCredentials: Sendable, Equatable, CustomStringConvertible {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
    public var description: String { "pid \(pid) uid \(uid) gid \(gid)" }
}

/// The kernel's `struct ucred` (Glibc hides it without _GNU_SOURCE): pid, uid, gid.
private struct UCred {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}

/// Peer credentials of open connections, keyed by channel; filled when a connection's pipeline is
/// set up (on its event loop) and removed when it closes.
public final class PeerRegistry: @unchecked Sendable {
    public static let shared = PeerRegistry()
    private let lock = NSLock()
    private var peers: [ObjectIdentifier: PeerCredentials] = [:]

    public func set(_ channel: any Channel, _ peer: PeerCredentials?) {
        lock.withLock { peers[ObjectIdentifier(channel)] = peer }
    }

    public func get(_ channel: any Channel) -> PeerCredentials? {
        lock.withLock { peers[ObjectIdentifier(channel)] }
    }
}

/// Reads `SO_PEERCRED` when added to a connection's pipeline; passes all traffic through.
public final class PeerCredentialsHandler: ChannelInboundHandler, RemovableChannelHandler, Sendable {
    public typealias InboundIn = ByteBuffer

    public init() {}

    /// `SO_PEERCRED` on Linux (x86_64 and arm64).
    static let soPeerCred: Int32 = 17

    public func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel
        guard let provider = channel as? any SocketOptionProvider else { return }
        let future: EventLoopFuture<UCred> = provider.unsafeGetSocketOption(
            level: NIOBSDSocket.OptionLevel(rawValue: SOL_SOCKET), name: NIOBSDSocket.Option(rawValue: Self.soPeerCred))
        future.whenSuccess { cred in
            PeerRegistry.shared.set(channel, PeerCredentials(pid: cred.pid, uid: cred.uid, gid: cred.gid))
        }
        channel.closeFuture.whenComplete { _ in PeerRegistry.shared.set(channel, nil) }
    }
}

/// The request context of the sidecar and the gateway: Hummingbird's core plus the peer's credentials.
public struct VaultRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The connection's peer, nil if it could not be read (then nothing is allowed).
    public let peer: PeerCredentials?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        peer = PeerRegistry.shared.get(source.channel)
    }
}
