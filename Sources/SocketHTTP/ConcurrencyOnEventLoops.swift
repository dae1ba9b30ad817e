import NIOCore
import NIOPosix

/// Runs Swift concurrency's jobs on the event loops that serve the socket
/// (`MultiThreadedEventLoopGroup.singleton`), instead of a second pool of threads: a request read
/// on an event loop is handled, and its answer written, without a thread switch between NIO and
/// the concurrency pool (each switch is a futex wake-up and a context switch; on 2 cores they
/// were the largest kernel cost of a tokenize). Blocking work (SQLite writes and their fsync) stays
/// on the store's own queue.
public enum ConcurrencyOnEventLoops {
    /// Installs the hook; call once, from the main thread, before any task runs. False when
    /// the platform or runtime does not allow it (the default pool is used then).
    @discardableResult
    public static func install() -> Bool {
        NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
    }
}
