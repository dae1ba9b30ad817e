internal import CSodium

/// The one home of sensitive bytes: PANs, CVCs, names, secret keys, data keys.
///
/// Backed by locked memory excluded from core dumps (`sodium_malloc`, directly for large buffers,
/// through slabs for small ones: see `SecurePool`), wiped with `sodium_memzero` when released. It is not `Codable`, prints as
/// `<redacted>`, compares in constant time, and its bytes are reachable only inside a closure.
/// Its contents are fixed once the initialiser returns, which is what makes it `Sendable`.
public final class SecureBytes: @unchecked Sendable {
    private let allocation: SecurePool.Allocation
    private var pointer: UnsafeMutableRawPointer { allocation.pointer }
    private let capacity: Int
    /// Number of bytes held.
    public let count: Int

    /// Allocates `capacity` bytes, lets `fill` write into them and return how many it used.
    ///
    /// The unused tail is wiped. If `fill` throws, everything is wiped and the error rethrown.
    public init<E: Error>(capacity: Int, fill: (UnsafeMutableRawBufferPointer) throws(E) -> Int) throws(E) {
        // A zeroed canary follows the usable bytes; a write past them is caught on release.
        let a = SecurePool.allocate(capacity + SecurePool.canaryBytes)
        let buffer = UnsafeMutableRawBufferPointer(start: a.pointer, count: capacity)
        let used: Int
        do throws(E) {
            used = try fill(buffer)
        } catch {
            SecurePool.release(a)
            throw error
        }
        precondition(used >= 0 && used <= capacity, "SecureBytes fill reported a bad length")
        if used < capacity { sodium_memzero(a.pointer + used, capacity - used) }
        self.allocation = a
        self.capacity = capacity
        self.count = used
    }

    /// A copy of `bytes` (wipe the source yourself if it was sensitive).
    public convenience init(copying bytes: UnsafeRawBufferPointer) {
        self.init(capacity: bytes.count) { out in
            if let base = bytes.baseAddress, !bytes.isEmpty { out.baseAddress!.copyMemory(from: base, byteCount: bytes.count) }
            return bytes.count
        }
    }

    /// A copy of `bytes` (for tests and literals; real card data never passes through an Array).
    public convenience init(_ bytes: some Collection<UInt8>) {
        self.init(capacity: bytes.count) { out in
            var i = 0
            for b in bytes { out[i] = b; i += 1 }
            return i
        }
    }

    /// `count` bytes from libsodium's CSPRNG.
    public static func random(count: Int) -> SecureBytes {
        Sodium.ensureInitialised()
        return SecureBytes(capacity: count) { out in
            if count > 0 { randombytes_buf(out.baseAddress!, count) }
            return count
        }
    }

    deinit {
        let canary = UnsafeRawBufferPointer(start: pointer + capacity, count: SecurePool.canaryBytes)
        if canary.contains(where: { $0 != 0 }) {
            fatalError("SecureBytes: a write ran past the end of a sensitive buffer")
        }
        // Wiped (sodium_memzero) before the memory is reused or unmapped.
        SecurePool.release(allocation)
    }

    /// Calls `body` with the bytes. Do not let the pointer escape, and do not copy the bytes into a `String`.
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// True when both hold the same bytes; constant time in the length (`sodium_memcmp`).
    public func constantTimeEquals(_ other: SecureBytes) -> Bool {
        guard count == other.count else { return false }
        if count == 0 { return true }
        return sodium_memcmp(pointer, other.pointer, count) == 0
    }

    /// True when the bytes equal `bytes`; constant time in the length.
    public func constantTimeEquals(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard count == bytes.count else { return false }
        if count == 0 { return true }
        return sodium_memcmp(pointer, bytes.baseAddress!, count) == 0
    }
}

extension SecureBytes: Equatable {
    /// Constant-time comparison of contents.
    public static func == (lhs: SecureBytes, rhs: SecureBytes) -> Bool { lhs.constantTimeEquals(rhs) }
}

extension SecureBytes: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Always `<redacted>`.
    public var description: String { "<redacted>" }
    /// Always `SecureBytes(<redacted>)`.
    public var debugDescription: String { "SecureBytes(<redacted>)" }
    /// Hides the storage from `dump` and debuggers' mirrors.
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}

/// Wipes a temporary buffer (stack or heap) that held sensitive bytes.
@inline(__always)
func wipe(_ buffer: UnsafeMutableRawBufferPointer) {
    if let base = buffer.baseAddress, !buffer.isEmpty { sodium_memzero(base, buffer.count) }
}

/// Runs `body` with an uninitialised temporary buffer that is wiped afterwards, whatever happens.
@inline(__always)
func withWipedTemporary<R>(
    byteCount: Int, _ body: (UnsafeMutableRawBufferPointer) throws -> R
) rethrows -> R {
    try withUnsafeTemporaryAllocation(byteCount: max(byteCount, 1), alignment: 16) { buffer in
        defer { wipe(buffer) }
        return try body(buffer)
    }
}
