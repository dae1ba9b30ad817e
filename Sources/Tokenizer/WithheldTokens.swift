import Foundation

/// Tokens whose fingerprint the gateway's guessing limit withheld (docs/threat-model.md "The
/// fingerprint oracle"), and when the filler may ask about each again: after 5 minutes, then
/// twice as long each time it is withheld again, up to an hour. Without it the filler would ask
/// the gateway about every such token on every pass, and whoever makes many of them (a guesser)
/// would have the gateway open all their envelopes every `sweep_interval`. In this sidecar's
/// memory only: a restart asks about them all once more, and another sidecar of the store keeps
/// its own.
public final class WithheldTokens: @unchecked Sendable {
    public static let firstWait: TimeInterval = 300, maxWait: TimeInterval = 3600

    private let lock = NSLock()
    private var entries: [String: (due: Date, wait: TimeInterval)] = [:]

    public init() {}

    /// The gateway withheld `token`'s fingerprint at `now`.
    public func withheld(_ token: String, now: Date) {
        lock.withLock {
            let wait = entries[token].map { min(Self.maxWait, $0.wait * 2) } ?? Self.firstWait
            entries[token] = (now.addingTimeInterval(wait), wait)
        }
    }

    /// Whether the filler may ask about `token` at `now`.
    public func isDue(_ token: String, now: Date) -> Bool {
        lock.withLock { entries[token].map { $0.due <= now } ?? true }
    }

    /// Forgets `token` (its fingerprint came, or it is gone).
    public func forget(_ token: String) {
        _ = lock.withLock { entries.removeValue(forKey: token) }
    }

    /// Forgets every entry due before `before` (tokens long gone); the number held after.
    @discardableResult
    public func purge(dueBefore before: Date) -> Int {
        lock.withLock {
            entries = entries.filter { $0.value.due >= before }
            return entries.count
        }
    }

    public var count: Int { lock.withLock { entries.count } }
}
