#if canImport(Glibc)
import Glibc
#endif

/// A small mutex for the input component's state. The `pthread_mutex_t` is allocated on the heap:
/// one stored in a class and passed with `&` has no stable address in Swift. A pthread mutex and
/// not `Synchronization.Mutex`, because ThreadSanitizer (`scripts/test --long`) models the first
/// and misreads the second on Linux (as Audit's `PThreadMutex`).
final class Lock: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` holding the lock.
    func withLock<R>(_ body: () throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}
