import Synchronization

/// A small mutex for the input component's state. `Synchronization.Mutex` keeps its lock at a
/// stable address (a `pthread_mutex_t` stored in a class and passed with `&` has none).
final class Lock: Sendable {
    private let mutex = Mutex(())

    /// Runs `body` holding the lock.
    func withLock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        try mutex.withLock { _ throws(E) -> R in try body() }
    }
}
