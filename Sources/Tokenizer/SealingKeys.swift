import Foundation
import VaultCrypto

/// The sidecar's sealing keys as one value that a reload (SIGHUP) swaps whole: requests in flight
/// keep the snapshot they read, new requests see the new one, and no connection is dropped.
public final class SealingKeys: @unchecked Sendable {
    /// One consistent view of the keys.
    public struct Snapshot: Sendable {
        /// The key new cards are sealed to (the ring's primary).
        public let primary: PublicKey
        /// The status of every kid the ring lists; an incoming envelope must be sealed to a kid
        /// that opens (primary or active).
        public let statuses: [KeyID: KeyRingFile.Status]

        public init(primary: PublicKey, statuses: [KeyID: KeyRingFile.Status]) {
            self.primary = primary
            var s = statuses
            s[primary.kid] = .primary
            self.statuses = s
        }

        /// A ring of one primary and other opening keys (no ring file: tests, one-key directories).
        public init(primary: PublicKey, others: [PublicKey] = []) {
            var s: [KeyID: KeyRingFile.Status] = [:]
            for k in others { s[k.kid] = .active }
            self.init(primary: primary, statuses: s)
        }
    }

    private let lock = NSLock()
    private var current: Snapshot

    public init(_ snapshot: Snapshot) { current = snapshot }

    /// The keys now.
    public var snapshot: Snapshot {
        lock.lock()
        defer { lock.unlock() }
        return current
    }

    /// Swaps in a new snapshot.
    public func replace(with snapshot: Snapshot) {
        lock.lock()
        current = snapshot
        lock.unlock()
    }
}
