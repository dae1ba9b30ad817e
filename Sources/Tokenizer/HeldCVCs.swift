import Foundation
import VaultCrypto

/// Where a token's CVC lives until its first authorization attempt or its TTL: the tokenizing
/// sidecar's memory, never the store (docs/threat-model.md, PCI DSS 3.3.1).
///
/// A database cannot forget: SQLite keeps an `UPDATE … SET cvc = NULL` victim in its WAL and free
/// pages, PostgreSQL in dead row versions until VACUUM, backups keep both. So the CVC is held
/// here, still sealed (the envelope's `fields.cvc`, XChaCha20-Poly1305 under the envelope's data
/// key), in `SecureBytes` that are wiped when dropped. What this costs, on purpose: a sidecar
/// restart drops the CVCs it held, and a token made by one sidecar is paid without its CVC through
/// another (several sidecars on one PostgreSQL). Processors accept a card without a CVC; the CVC
/// is a first-payment check, and its TTL is minutes.
///
/// A held CVC belongs to one sealing of the envelope: it is given back only while the stored
/// envelope still has the same kid and sealed data key (a rewrap in between seals a new data key,
/// which the old CVC field does not open under: it is then dropped, never sent with a mismatch).
public final class HeldCVCs: @unchecked Sendable {
    struct Held {
        let field: SecureBytes
        /// The envelope's sealed data key when the CVC was held.
        let sealedKey: String
        let expiresAt: Date
    }

    /// At most this many CVCs are held; past it the oldest are dropped first (counted).
    public let capacity: Int
    private let lock = NSLock()
    private var held: [String: Held] = [:]
    /// Insertion order, for eviction past `capacity` and the TTL sweep.
    private var order: [(token: String, expiresAt: Date)] = []
    private var orderStart = 0
    private var evicted = 0

    public init(capacity: Int = 1_000_000) { self.capacity = max(1, capacity) }

    /// Holds `field` (the sealed `fields.cvc`) for `token` until `expiresAt`.
    public func hold(_ field: String, token: String, sealedKey: String, expiresAt: Date) {
        let bytes = SecureBytes(Array(field.utf8))
        lock.lock()
        defer { lock.unlock() }
        held[token] = Held(field: bytes, sealedKey: sealedKey, expiresAt: expiresAt)
        order.append((token, expiresAt))
        while held.count > capacity, orderStart < order.count {
            if held.removeValue(forKey: order[orderStart].token) != nil { evicted += 1 }
            orderStart += 1
        }
        compactOrder()
    }

    /// The held CVC field of `token` sealed with `sealedKey`, if it is live at `now`.
    public func field(for token: String, sealedKey: String, now: Date) -> (field: String, expiresAt: Date)? {
        lock.lock()
        defer { lock.unlock() }
        guard let h = held[token] else { return nil }
        guard h.expiresAt > now, h.sealedKey == sealedKey else {
            held[token] = nil
            return nil
        }
        return (h.field.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }, h.expiresAt)
    }

    /// Takes the held CVC field of `token` sealed with `sealedKey` (live at `now`) and forgets it,
    /// in one step: of two callers racing on one token, at most one gets it.
    public func take(_ token: String, sealedKey: String, now: Date) -> String? {
        lock.lock()
        defer { lock.unlock() }
        guard let h = held.removeValue(forKey: token), h.expiresAt > now, h.sealedKey == sealedKey else { return nil }
        return h.field.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }

    /// Drops the CVC of `token`; false when none was held.
    @discardableResult
    public func drop(_ token: String) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return held.removeValue(forKey: token) != nil
    }

    /// Drops every CVC past its TTL at `now` (and those evicted for room); returns how many.
    public func purge(now: Date) -> Int {
        lock.lock()
        defer { lock.unlock() }
        var n = evicted
        evicted = 0
        for (token, h) in held where h.expiresAt <= now {
            held[token] = nil
            n += 1
        }
        if held.isEmpty {
            order.removeAll(keepingCapacity: false)
            orderStart = 0
        } else {
            while orderStart < order.count, held[order[orderStart].token] == nil || order[orderStart].expiresAt <= now {
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
        return held.count
    }

    private func compactOrder() {
        if orderStart > 4096, orderStart * 2 > order.count {
            order.removeFirst(orderStart)
            orderStart = 0
        }
    }
}
