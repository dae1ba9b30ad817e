internal import CSodium
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where `SecureBytes` get their memory: locked (`mlock`), excluded from core dumps, wiped on
/// release.
///
/// `sodium_malloc` gives each allocation its own guard pages, which costs about six system calls
/// (≈ 30 µs here) per allocation and free: more than sealing a card. So small buffers (≤ 4 KiB,
/// every PAN, CVC, name, key and request-sized buffer) come from 64 KiB slabs that are themselves
/// `sodium_malloc`ed (guard pages around the slab, locked, `MADV_DONTDUMP`), carved into
/// fixed-size slots per size class. A released slot is wiped with `sodium_memzero` before it goes
/// back on its free list. Larger buffers use `sodium_malloc` directly. Slabs are kept for reuse,
/// so the pool's size is the peak of what was live at once.
enum SecurePool {
    /// Slot sizes; anything larger is its own `sodium_malloc`.
    static let classes = [32, 64, 128, 256, 512, 1024, 2048, 4096]
    static let slabBytes = 64 * 1024
    /// Zero bytes kept after every SecureBytes' usable bytes and checked on release.
    static let canaryBytes = 16

    /// Free slots per class, as addresses, behind a pthread mutex.
    private static let state = FreeLists(classes: classes.count)

    /// An allocation: the pointer, its usable size, and the size class (nil: direct sodium_malloc).
    struct Allocation {
        let pointer: UnsafeMutableRawPointer
        let size: Int
        let sizeClass: Int?
    }

    /// Zeroed memory of at least `count` bytes.
    static func allocate(_ count: Int) -> Allocation {
        Sodium.ensureInitialised()
        guard let c = classes.firstIndex(where: { $0 >= count }) else {
            let size = max(count, 1)
            guard let p = sodium_malloc(size) else { fatalError("sodium_malloc failed: out of locked memory") }
            sodium_memzero(p, size)
            return Allocation(pointer: p, size: size, sizeClass: nil)
        }
        let address = state.withLock { free -> UInt in
            if let p = free[c].popLast() { return p }
            let size = classes[c]
            guard let slab = sodium_malloc(slabBytes) else { fatalError("sodium_malloc failed: out of locked memory") }
            sodium_memzero(slab, slabBytes)
            let slots = slabBytes / size
            free[c].reserveCapacity(free[c].count + slots)
            let base = UInt(bitPattern: slab)
            for i in stride(from: slots - 1, to: 0, by: -1) { free[c].append(base + UInt(i * size)) }
            return base
        }
        let slot = UnsafeMutableRawPointer(bitPattern: address)!
        return Allocation(pointer: slot, size: classes[c], sizeClass: c)
    }

    /// Wipes and releases an allocation.
    static func release(_ a: Allocation) {
        guard let c = a.sizeClass else {
            sodium_free(a.pointer)  // wipes before unmapping
            return
        }
        sodium_memzero(a.pointer, a.size)
        let address = UInt(bitPattern: a.pointer)
        state.withLock { $0[c].append(address) }
    }
}

/// The pool's free lists (addresses, per size class) behind a pthread mutex. ThreadSanitizer
/// models pthread mutexes; it does not see the futex path of `Synchronization.Mutex` on Linux and
/// reported false races on the pool under it.
private final class FreeLists: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var free: [[UInt]]

    init(classes: Int) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        free = Array(repeating: [], count: classes)
    }

    func withLock<R>(_ body: (inout [[UInt]]) -> R) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body(&free)
    }
}
