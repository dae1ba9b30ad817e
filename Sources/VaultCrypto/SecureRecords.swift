internal import CSodium

/// Many small sensitive values held at once, in fixed-size records of locked, wiped memory,
/// without an object per value: what the sidecar's held CVCs live in (`HeldCVCs`).
///
/// A `SecureBytes` per value costs its object (about 64 bytes of ordinary heap) plus a pool slot;
/// at a million held values that object alone is 64 MB. Here records are carved out of 64 KiB
/// pages that come from `SecurePool` (each its own `sodium_malloc`: guard pages, `mlock`,
/// `MADV_DONTDUMP`). Record `i` holds one length byte and up to `valueBytes` bytes; it is wiped
/// (`sodium_memzero`) when removed or overwritten, and every page is wiped when released.
///
/// Not thread-safe: the owner serialises access (`HeldCVCs` holds a lock around every call).
public final class SecureRecords: @unchecked Sendable {
    /// The longest value a record holds.
    public let valueBytes: Int
    private let recordBytes: Int
    private let perPage: Int
    private var pages: [SecurePool.Allocation] = []

    /// Records of up to `valueBytes` bytes (at most 255), in pages of `pageBytes`.
    public init(valueBytes: Int = 63, pageBytes: Int = 64 * 1024) {
        precondition(valueBytes > 0 && valueBytes < 256, "a record's length is one byte")
        self.valueBytes = valueBytes
        recordBytes = valueBytes + 1
        perPage = max(1, pageBytes / recordBytes)
    }

    /// How many records the pages allocated so far hold.
    public var capacity: Int { pages.count * perPage }

    /// Bytes of locked memory held by the pages.
    public var lockedBytes: Int { pages.reduce(0) { $0 + $1.size } }

    /// Stores `bytes` in record `index` (allocating pages up to it), replacing what it held.
    /// False, and nothing stored, when `bytes` is longer than `valueBytes`.
    @discardableResult
    public func store(_ bytes: UnsafeRawBufferPointer, at index: Int) -> Bool {
        precondition(index >= 0, "a record index is not negative")
        guard bytes.count <= valueBytes else { return false }
        while index >= capacity {
            pages.append(SecurePool.allocate(perPage * recordBytes))
        }
        let record = address(of: index)
        sodium_memzero(record, recordBytes)
        record.storeBytes(of: UInt8(bytes.count), as: UInt8.self)
        if let base = bytes.baseAddress, !bytes.isEmpty { (record + 1).copyMemory(from: base, byteCount: bytes.count) }
        return true
    }

    /// Calls `body` with the bytes of record `index` (empty if it was never stored or was wiped).
    /// Do not let the pointer escape.
    public func withValue<R>(at index: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        guard index >= 0, index < capacity else { return body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        let record = address(of: index)
        let count = Int(record.load(as: UInt8.self))
        return body(UnsafeRawBufferPointer(start: record + 1, count: count))
    }

    /// Wipes record `index`.
    public func wipe(at index: Int) {
        guard index >= 0, index < capacity else { return }
        sodium_memzero(address(of: index), recordBytes)
    }

    /// Wipes and releases every page (records read as empty afterwards).
    public func removeAll() {
        for page in pages { SecurePool.release(page) }
        pages.removeAll()
    }

    deinit { removeAll() }

    private func address(of index: Int) -> UnsafeMutableRawPointer {
        pages[index / perPage].pointer + (index % perPage) * recordBytes
    }
}
