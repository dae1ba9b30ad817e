import Dispatch
import Foundation
import Logging
import ServiceLifecycle

/// Runs `reload` each time the process gets SIGHUP, until graceful shutdown. The server keeps
/// serving meanwhile: a reload swaps what it reads (keys, the key ring) and drops no connection.
/// A reload that fails keeps the previous state (the closure logs why).
public struct ReloadOnHangup: Service {
    let reload: @Sendable () async -> Void

    public init(_ reload: @escaping @Sendable () async -> Void) { self.reload = reload }

    public func run() async throws {
        // The default action of SIGHUP ends the process: ignore it, and take it from a source.
        signal(SIGHUP, SIG_IGN)
        let (hangups, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .global())
        source.setEventHandler { continuation.yield() }
        source.resume()
        defer { source.cancel() }
        await cancelWhenGracefulShutdown {
            for await _ in hangups { await reload() }
        }
    }
}
