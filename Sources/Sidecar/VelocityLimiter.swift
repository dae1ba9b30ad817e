import CardRules
import Foundation
import Logging
import SocketHTTP
import Store
import VaultCrypto

/// Velocity limits (docs/velocity.md): before a tokenize, validate or payment does any work, the
/// windows of the rules whose scope the request has a key for are read (one statement); over a
/// limit, 429 `VELOCITY_LIMIT` with `Retry-After`, a metric and (once per rule, key and bucket) a
/// `velocity.limited` event, nothing else stored. Under every limit, the attempt is counted at
/// once (one statement) and, when the outcome is a decline, the decline after it.
///
/// Approximate by design: concurrent requests read the window before any of them is counted, so
/// at most the requests in flight at once may pass a limit that has one place left.
public struct VelocityLimiter: Sendable {
    /// What a request is counted by (nil: it has no such key).
    public struct Keys: Sendable {
        public var session: String?, bin: String?, fingerprint: String?, customer: String?, peer: UInt32?
        public init(session: String? = nil, bin: String? = nil, fingerprint: String? = nil, customer: String? = nil, peer: UInt32? = Caller.current?.uid) {
            self.session = session
            self.bin = bin.map { String($0.prefix(6)) }
            self.fingerprint = fingerprint
            self.customer = customer
            self.peer = peer
        }

        func key(_ scope: VelocityRule.Scope) -> String? {
            switch scope {
            case .session: session
            case .bin: bin
            case .fingerprint: fingerprint
            case .customer: customer
            case .peer: peer.map(String.init)
            }
        }
    }

    /// A request let through: the counters its decline adds to.
    public struct Ticket: Sendable {
        let declines: [VelocityCounters.Counter]
        public static let none = Ticket(declines: [])
    }

    public let rules: [VelocityRule]
    let counters: VelocityCounters
    let metrics: SidecarMetrics?
    let logger: Logger
    let now: @Sendable () -> Date
    /// The buckets this process has refused in already: a refusal after the first of its rule, key
    /// and bucket costs no write (under attack, a 429 costs one read).
    let refused = RefusedBuckets()

    public init(rules: [VelocityRule], counters: VelocityCounters, metrics: SidecarMetrics?, logger: Logger, now: @escaping @Sendable () -> Date = Date.init) {
        self.rules = rules
        self.counters = counters
        self.metrics = metrics
        self.logger = logger
        self.now = now
    }

    func counter(_ rule: VelocityRule, _ key: String, kind: String? = nil) -> VelocityCounters.Counter {
        .init(scope: rule.scope.rawValue, key: key, action: rule.action.rawValue, kind: kind ?? rule.count.rawValue, width: rule.bucketWidth)
    }

    /// Checks the request against the rules of `action`, and counts it as an attempt (unless
    /// `count` is false: a check ahead of the request, which is counted when it is made).
    /// - Throws: `VELOCITY_LIMIT` (with `retryAfter`) over a limit; store codes.
    public func admit(_ action: VelocityRule.Action, _ keys: Keys, count: Bool = true) async throws(VaultError) -> Ticket {
        let applicable = rules.compactMap { r in r.action == action ? keys.key(r.scope).map { (r, $0) } : nil }
        guard !applicable.isEmpty else { return .none }
        let t = Int64(now().timeIntervalSince1970.rounded(.down))
        var since: [VelocityCounters.Counter: Int64] = [:]
        for (rule, key) in applicable {
            let from = VelocityCounters.bucket(t, width: rule.bucketWidth) - Int64((rule.bucketCount - 1) * rule.bucketWidth)
            since[counter(rule, key)] = min(since[counter(rule, key)] ?? from, from)
        }
        let buckets: [VelocityCounters.Counter: [(bucket: Int64, count: Int)]]
        do throws(StoreError) { buckets = try await counters.buckets(since) } catch { throw VaultError(store: error) }
        // Over several limits at once: refused by the one that lets a request through last, so
        // that a client retrying after `Retry-After` is not refused by another.
        var over: (rule: VelocityRule, key: String, window: [(bucket: Int64, count: Int)], total: Int, retry: Int)?
        for (rule, key) in applicable {
            let from = VelocityCounters.bucket(t, width: rule.bucketWidth) - Int64((rule.bucketCount - 1) * rule.bucketWidth)
            let window = (buckets[counter(rule, key)] ?? []).filter { $0.bucket >= from }.sorted { $0.bucket < $1.bucket }
            let total = window.reduce(0) { $0 + $1.count }
            guard total >= rule.limit else { continue }
            let retry = Self.retryAfter(rule, window: window, total: total, now: t)
            if retry > over?.retry ?? 0 { over = (rule, key, window, total, retry) }
        }
        if let over { try await refuse(over.rule, key: over.key, window: over.window, total: over.total, now: t) }
        var attempts: [VelocityCounters.Counter] = [], declines: [VelocityCounters.Counter] = []
        for (rule, key) in applicable {
            if rule.count == .attempts { attempts.append(counter(rule, key)) } else { declines.append(counter(rule, key)) }
        }
        if count, !attempts.isEmpty {
            do throws(StoreError) { try await counters.add(attempts, now: t) } catch { throw VaultError(store: error) }
        }
        return Ticket(declines: declines)
    }

    /// The decline counters of a request of `action` with `keys` that was let through earlier (a
    /// payment declined at `confirm`, after its 3-D Secure challenge): nothing is checked or
    /// counted here; `declined` counts them.
    public func ticket(_ action: VelocityRule.Action, _ keys: Keys) -> Ticket {
        Ticket(declines: rules.compactMap { r in
            r.action == action && r.count == .declines ? keys.key(r.scope).map { counter(r, $0) } : nil
        })
    }

    /// Counts a declined request (a card refused as invalid, a processor decline). A store error is
    /// logged, not answered: the request's own outcome stands.
    public func declined(_ ticket: Ticket) async {
        guard !ticket.declines.isEmpty else { return }
        do throws(StoreError) { try await counters.add(ticket.declines, now: Int64(now().timeIntervalSince1970.rounded(.down))) } catch {
            logger.warning("velocity: a decline could not be counted", metadata: ["error": "\(error.code)"])
        }
    }

    /// Whether a refused tokenize or validate counts as a decline: the card was refused by the card rules.
    public static func isCardDecline(_ code: ErrorCode) -> Bool {
        switch code {
        case .nonDigitCharacters, .cardNumberEmpty, .cardNumberTooShort, .cardNumberTooLong, .unknownCardBrand, .invalidCardLength,
             .luhnCheckFailed, .brandNotAccepted, .expiryMalformed, .invalidExpiryMonth, .cardExpired, .expiryTooFar, .cvcMalformed,
             .invalidCVCLength, .envelopeMetadataInvalid:
            true
        default: false
        }
    }

    /// Runs `body` (a tokenize or validate) as a request of `action` with `keys`: admitted first,
    /// a card-rule refusal counted as a decline.
    public func guarded<T>(_ action: VelocityRule.Action, _ keys: Keys, _ body: () async throws(VaultError) -> T) async throws(VaultError) -> T {
        let ticket = try await admit(action, keys)
        do throws(VaultError) { return try await body() } catch {
            if Self.isCardDecline(error.code) { await declined(ticket) }
            throw error
        }
    }

    /// `guarded` when there are limits; `body` alone when not.
    public static func guarded<T>(
        _ limiter: VelocityLimiter?, _ action: VelocityRule.Action, _ keys: Keys, _ body: () async throws(VaultError) -> T
    ) async throws(VaultError) -> T {
        guard let limiter else { return try await body() }
        return try await limiter.guarded(action, keys, body)
    }

    /// The visible prefix of a card number as typed (spaces and dashes skipped): min(6, length −
    /// 10) digits (DESIGN §1: what a `bin` key may hold); nil for a number of fewer than 12 digits
    /// or with other characters.
    public static func bin(of number: UnsafeRawBufferPointer) -> String? {
        // Counted first, then only the prefix copied: no copy of the whole number is made.
        var length = 0
        for b in number {
            if b >= 48, b <= 57 { length += 1 } else if b != 32, b != 45 { return nil }
        }
        guard length >= CardNumberInfo.minimumDisplayLength, length <= 19 else { return nil }
        var prefix: [UInt8] = []
        for b in number where b >= 48 && b <= 57 && prefix.count < CardNumberInfo.binLength(forLength: length) { prefix.append(b) }
        return String(decoding: prefix, as: UTF8.self)
    }

    /// Seconds until enough of the window's oldest buckets have left it to let one more request through (1 at least).
    static func retryAfter(_ rule: VelocityRule, window: [(bucket: Int64, count: Int)], total: Int, now t: Int64) -> Int {
        var left = total, retry = Int64(rule.window)
        for b in window {
            left -= b.count
            if left < rule.limit {
                retry = b.bucket + Int64(rule.bucketCount * rule.bucketWidth) - t
                break
            }
        }
        return Int(max(1, retry))
    }

    /// 429: the metric, the event once per rule, key and bucket, and the error with its `Retry-After`
    /// (seconds until enough of the window's oldest buckets have left it to let one more request through).
    func refuse(_ rule: VelocityRule, key: String, window: [(bucket: Int64, count: Int)], total: Int, now t: Int64) async throws(VaultError) -> Never {
        metrics?.velocityRefused(scope: rule.scope.rawValue, action: rule.action.rawValue)
        let retryAfter = Self.retryAfter(rule, window: window, total: total, now: t)
        // The event: once per rule, key and bucket across sidecars (the store's count of refusals
        // decides), asked once per process.
        let firstHere = refused.first("\(rule)|\(key)|\(VelocityCounters.bucket(t, width: rule.bucketWidth))")
        var refusals: [VelocityCounters.Counter: Int]?
        if firstHere { refusals = try? await counters.add([counter(rule, key, kind: "refusals:\(rule.count.rawValue):\(rule.window)")], now: t) }
        if refusals?.values.first == 1 {
            let id = RandomID.make(prefix: "vel_")
            let data = AnswerJSON.encode(LimitedEvent(
                id: id, scope: rule.scope.rawValue, key: key, action: rule.action.rawValue, count: rule.count.rawValue, limit: rule.limit,
                windowSeconds: rule.window, retryAfter: retryAfter))
            do throws(StoreError) {
                try await counters.limitedEvent(id: id, data: data, now: now())
            } catch {
                logger.warning("velocity: the velocity.limited event could not be written", metadata: ["error": "\(error.code)"])
            }
            logger.notice("velocity limit reached", metadata: ["rule": "\(rule)", "scope": "\(rule.scope.rawValue)", "retry_after": "\(retryAfter)"])
        }
        throw VaultError(
            .velocityLimit,
            "too many \(rule.count.rawValue) of \(rule.action.rawValue) for this \(rule.scope.rawValue): at most \(rule.limit) in \(VelocityRule.windowText(rule.window)); retry after \(retryAfter) s",
            retryAfter: retryAfter)
    }

    /// The object of a `velocity.limited` event (docs/events.md).
    struct LimitedEvent: Encodable {
        let id: String, object = "velocity", scope: String, key: String, action: String, count: String, limit: Int
        let windowSeconds: Int, retryAfter: Int
        enum CodingKeys: String, CodingKey {
            case id, object, scope, key, action, count, limit
            case windowSeconds = "window_seconds", retryAfter = "retry_after"
        }
    }

    /// Deletes the buckets no rule's window reaches any more (the sweeper's, every pass).
    public func prune() async {
        guard !rules.isEmpty else { return }
        do throws(StoreError) { try await counters.prune(now: Int64(now().timeIntervalSince1970)) } catch {
            logger.warning("velocity: pruning failed", metadata: ["error": "\(error.code)"])
        }
    }
}

/// What `VelocityLimiter.refuse` has seen, in memory: at most 10,000 entries, forgotten all at once.
final class RefusedBuckets: @unchecked Sendable {
    private let lock = NSLock()
    private var seen = Set<String>()

    /// True the first time `id` is seen.
    func first(_ id: String) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if seen.count >= 10_000 { seen.removeAll() }
        return seen.insert(id).inserted
    }
}
