import Foundation
import VaultCrypto

/// Where a token's CVC lives until its first authorization attempt or its TTL: the tokenizing
/// sidecar's memory, never the store (docs/threat-model.md, PCI DSS 3.3.1).
///
/// A database cannot forget: SQLite keeps an `UPDATE … SET cvc = NULL` victim in its WAL and free
/// pages, PostgreSQL in dead row versions until VACUUM, backups keep both. So the CVC is held
/// here, still sealed (the envelope's `fields.cvc`, XChaCha20-Poly1305 under the envelope's data
/// key), in locked memory that is wiped when dropped (`SecureRecords`: fixed-size records, not
/// an object per CVC, so a held CVC costs about 220 bytes). What this costs, on purpose: a sidecar
/// restart drops the CVCs it held, and a token made by one sidecar is paid without its CVC through
/// another (several sidecars on one PostgreSQL). Processors accept a card without a CVC; the CVC
/// is a first-payment check, and its TTL is minutes.
///
/// A held CVC belongs to one sealing of the envelope: it is given back only while the stored
/// envelope still has the same kid and sealed data key (a rewrap in between seals a new data key,
/// which the old CVC field does not open under: it is then dropped, never sent with a mismatch).
public final class HeldCVCs: @unchecked Sendable {
    /// A token as a fixed 32-byte key (tokens are ASCII and at most 30 bytes; zero padding cannot
    /// collide with a token's own bytes). A longer id is keyed by its BLAKE2b-256 with the first
    /// byte set to 0xFF, which no ASCII token starts with.
    struct Key: Hashable {
        var a: UInt64 = 0, b: UInt64 = 0, c: UInt64 = 0, d: UInt64 = 0

        init(_ token: String) {
            var token = token
            token.withUTF8 { bytes in
                withUnsafeMutableBytes(of: &self) { out in
                    if bytes.count <= out.count {
                        out.copyMemory(from: UnsafeRawBufferPointer(bytes))
                    } else {
                        Hash.blake2b256(UnsafeRawBufferPointer(bytes), into: out)
                        out[0] = 0xFF
                    }
                }
            }
        }
    }

    /// What is known of one held CVC besides its bytes: 64 bytes a slot.
    struct Slot {
        var key: Key
        /// The first 16 bytes of BLAKE2b-256 of the envelope's sealed data key when the CVC was held.
        var sealing: (UInt64, UInt64)
        var expiresAt: Double
        /// Bumped whenever the slot is freed, so stale eviction-order entries are skipped.
        var generation: UInt32
        var live: Bool
    }

    /// At most this many CVCs are held; past it the oldest are dropped first (counted).
    public let capacity: Int
    private let lock = NSLock()
    private var index: [Key: Int32] = [:]
    private var slots: [Slot] = []
    private var freeSlots: [Int32] = []
    /// Slot `i`'s CVC field, in locked and wiped memory (the sealed `fields.cvc` is 60 bytes of
    /// base64 for a 3- or 4-digit CVC, and tokenize refuses a caller's envelope with a longer
    /// one); `overflow` holds a longer field should one be held all the same.
    let records = SecureRecords(valueBytes: fieldBytes)
    /// The longest CVC field held in a record: a 4-digit CVC's is 60 characters.
    public static let fieldBytes = 63
    private var overflow: [Int32: SecureBytes] = [:]
    /// Insertion order, for eviction past `capacity` and the TTL sweep.
    private var order: [(slot: Int32, generation: UInt32)] = []
    private var orderStart = 0
    private var evicted = 0

    /// The default `capacity` (setting `sidecar.held_cvcs_max`): about 220 MB when full.
    public static let defaultCapacity = 1_000_000

    public init(capacity: Int = defaultCapacity) { self.capacity = max(1, capacity) }

    /// Holds `field` (the sealed `fields.cvc`) for `token` until `expiresAt`.
    public func hold(_ field: String, token: String, sealedKey: String, expiresAt: Date) {
        let key = Key(token)
        let sealing = Self.sealing(sealedKey)
        var field = field
        lock.lock()
        defer { lock.unlock() }
        if let old = index[key] { free(old) }
        let slot: Int32
        if let reused = freeSlots.popLast() {
            slot = reused
            slots[Int(slot)].key = key
            slots[Int(slot)].sealing = sealing
            slots[Int(slot)].expiresAt = expiresAt.timeIntervalSinceReferenceDate
            slots[Int(slot)].live = true
        } else {
            slot = Int32(slots.count)
            slots.append(Slot(key: key, sealing: sealing, expiresAt: expiresAt.timeIntervalSinceReferenceDate, generation: 0, live: true))
        }
        let fits = field.withUTF8 { records.store(UnsafeRawBufferPointer($0), at: Int(slot)) }
        if !fits { overflow[slot] = field.withUTF8 { SecureBytes(copying: UnsafeRawBufferPointer($0)) } }
        index[key] = slot
        order.append((slot, slots[Int(slot)].generation))
        while index.count > capacity, orderStart < order.count {
            let (s, g) = order[orderStart]
            if slots[Int(s)].live, slots[Int(s)].generation == g {
                free(s)
                evicted += 1
            }
            orderStart += 1
        }
        compactOrder()
    }

    /// The held CVC field of `token` sealed with `sealedKey`, if it is live at `now`.
    public func field(for token: String, sealedKey: String, now: Date) -> (field: String, expiresAt: Date)? {
        let key = Key(token)
        let sealing = Self.sealing(sealedKey)
        lock.lock()
        defer { lock.unlock() }
        guard let slot = index[key] else { return nil }
        guard let (field, expiresAt) = liveField(slot, sealing: sealing, now: now) else {
            free(slot)
            return nil
        }
        return (field, expiresAt)
    }

    /// Takes the held CVC field of `token` sealed with `sealedKey` (live at `now`) and forgets it,
    /// in one step: of two callers racing on one token, at most one gets it.
    public func take(_ token: String, sealedKey: String, now: Date) -> String? {
        let key = Key(token)
        let sealing = Self.sealing(sealedKey)
        lock.lock()
        defer { lock.unlock() }
        guard let slot = index[key] else { return nil }
        let found = liveField(slot, sealing: sealing, now: now)
        free(slot)
        return found?.field
    }

    /// Drops the CVC of `token`; false when none was held.
    @discardableResult
    public func drop(_ token: String) -> Bool {
        let key = Key(token)
        lock.lock()
        defer { lock.unlock() }
        guard let slot = index[key] else { return false }
        free(slot)
        return true
    }

    /// Drops every CVC past its TTL at `now` (and those evicted for room); returns how many.
    public func purge(now: Date) -> Int {
        let t = now.timeIntervalSinceReferenceDate
        lock.lock()
        defer { lock.unlock() }
        var n = evicted
        evicted = 0
        for s in slots.indices where slots[s].live && slots[s].expiresAt <= t {
            free(Int32(s))
            n += 1
        }
        if index.isEmpty {
            // Nothing held: give the memory back (the records' pages are wiped as they go; a
            // dictionary keeps its buckets when emptied, so it is replaced).
            index = [:]
            order = []
            orderStart = 0
            slots = []
            freeSlots = []
            overflow = [:]
            records.removeAll()
        } else {
            while orderStart < order.count {
                let (s, g) = order[orderStart]
                guard !slots[Int(s)].live || slots[Int(s)].generation != g else { break }
                orderStart += 1
            }
            compactOrder()
        }
        return n
    }

    /// How many CVCs are held now.
    public var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return index.count
    }

    /// The field in `slot` if it is live at `now` and was held for the same sealing.
    private func liveField(_ slot: Int32, sealing: (UInt64, UInt64), now: Date) -> (field: String, expiresAt: Date)? {
        let s = slots[Int(slot)]
        guard s.expiresAt > now.timeIntervalSinceReferenceDate, s.sealing == sealing else { return nil }
        let field: String
        if let long = overflow[slot] {
            field = long.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        } else {
            field = records.withValue(at: Int(slot)) { String(decoding: $0, as: UTF8.self) }
        }
        return (field, Date(timeIntervalSinceReferenceDate: s.expiresAt))
    }

    /// Forgets `slot`: its index entry, its wiped bytes; the slot goes back on the free list.
    private func free(_ slot: Int32) {
        let i = Int(slot)
        guard slots[i].live else { return }
        index[slots[i].key] = nil
        records.wipe(at: i)
        overflow[slot] = nil
        slots[i].live = false
        slots[i].generation &+= 1
        freeSlots.append(slot)
    }

    private static func sealing(_ sealedKey: String) -> (UInt64, UInt64) {
        var text = sealedKey
        var digest: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        text.withUTF8 { bytes in
            withUnsafeMutableBytes(of: &digest) { Hash.blake2b256(UnsafeRawBufferPointer(bytes), into: $0) }
        }
        return (digest.0, digest.1)
    }

    private func compactOrder() {
        if orderStart > 4096, orderStart * 2 > order.count {
            order.removeFirst(orderStart)
            orderStart = 0
        }
    }
}
