import Foundation
import Logging
import Sidecar
import Store
import Testing
import VaultCrypto

/// Velocity rules and the limiter's windows over a real (SQLite) store, on a clock the test moves:
/// limits, `Retry-After`, sliding, declines apart from attempts, one event per bucket, pruning.
/// The end-to-end runs on both stores are VelocityCLITests.
struct VelocityTests {
    final class Clock: @unchecked Sendable {
        private let lock = NSLock()
        private var t: TimeInterval
        init(_ t: TimeInterval) { self.t = t }
        var now: Date { lock.withLock { Date(timeIntervalSince1970: t) } }
        func advance(_ s: TimeInterval) { lock.withLock { t += s } }
    }

    static func limiter(_ rules: [String], clock: Clock) async throws -> (VelocityLimiter, Database, String) {
        let path = NSTemporaryDirectory() + "velocity-" + UUID().uuidString + ".sqlite"
        let db = try await openSQLite(path)
        let limiter = VelocityLimiter(
            rules: try rules.map { try VelocityRule(parsing: $0) }, counters: VelocityCounters(database: db), metrics: SidecarMetrics(),
            logger: Logger(label: "test"), now: { clock.now })
        return (limiter, db, path)
    }

    static func refusal(_ body: () async throws(VaultError) -> Void) async -> VaultError? {
        do throws(VaultError) { try await body() } catch { return error }
        return nil
    }

    @Test func rulesParseAndPrint() throws {
        let r = try VelocityRule(parsing: "session:tokenize:attempts=10/10m")
        #expect(r.scope == .session && r.action == .tokenize && r.count == .attempts && r.limit == 10 && r.window == 600)
        #expect(r.bucketWidth == 60 && r.bucketCount == 10 && r.description == "session:tokenize:attempts=10/10m")
        #expect(try VelocityRule(parsing: "peer:validate:declines=5/90").description == "peer:validate:declines=5/90s")
        #expect(try VelocityRule(parsing: "bin:pay:declines=5/2s").bucketWidth == 1)
        for bad in ["", "off", "session:tokenize:attempts=10", "session:tokenize=10/1m", "x:tokenize:attempts=1/1m", "session:tokenize:attempts=0/1m",
                    "session:tokenize:attempts=1/0s", "session:tokenize:attempts=1/2d", "session:validate:attempts=1/1m", "fingerprint:tokenize:declines=1/1m",
                    "customer:validate:declines=1/1m", "session:tokenize:attempts=ten/1m"] {
            #expect(throws: VaultError.self, "\(bad)") { try VelocityRule(parsing: bad) }
        }
        #expect(try VelocityRule.rules([]) == VelocityRule.defaults)
        #expect(try VelocityRule.rules(["off"]).isEmpty)
        #expect(throws: VaultError.self) { try VelocityRule.rules(["off", "bin:pay:declines=1/1m"]) }
        #expect(throws: VaultError.self) { try VelocityRule.rules(["bin:pay:declines=1/1m", "bin:pay:declines=2/1m"]) }
        #expect(try VelocityRule.rules(["bin:pay:declines=1/1m", "bin:pay:declines=20/1h"]).count == 2)
    }

    @Test func attemptsSlideOutOfTheWindow() async throws {
        let clock = Clock(1_800_000_000)
        let (limiter, db, path) = try await Self.limiter(["session:tokenize:attempts=3/10s"], clock: clock)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let keys = VelocityLimiter.Keys(session: "sess_a", peer: 501)
        for _ in 0..<3 {
            _ = try await limiter.admit(.tokenize, keys)
            clock.advance(1)
        }
        // t = 3 s: 3 attempts in the window (t = 0, 1, 2). The one at 0 leaves it at 10 s.
        let refused = await Self.refusal { () throws(VaultError) in _ = try await limiter.admit(.tokenize, keys) }
        #expect(refused?.code == .velocityLimit && refused?.retryAfter == 7, "\(String(describing: refused))")
        #expect(refused.map { !$0.message.contains("sess_a") } == true)
        // Another session, and another action, are not limited by it.
        _ = try await limiter.admit(.tokenize, .init(session: "sess_b"))
        _ = try await limiter.admit(.pay, keys)
        clock.advance(6)
        #expect(await Self.refusal { () throws(VaultError) in _ = try await limiter.admit(.tokenize, keys) }?.retryAfter == 1)
        clock.advance(1)
        _ = try await limiter.admit(.tokenize, keys)
        #expect(await Self.refusal { () throws(VaultError) in _ = try await limiter.admit(.tokenize, keys) }?.code == .velocityLimit)
        // One event for the refusals of one bucket, then one per bucket refusing again.
        let events = try await db.query("SELECT object_type, data FROM vault_events WHERE type = 'velocity.limited' ORDER BY seq")
        #expect(events.count == 3)
        let data = try events[0].string(1)
        #expect(try events[0].string(0) == "velocity" && data.contains(#""scope":"session""#) && data.contains(#""key":"sess_a""#)
            && data.contains(#""limit":3"#) && data.contains(#""window_seconds":10"#) && data.contains(#""retry_after":7"#), "\(data)")
    }

    @Test func declinesAreCountedApartFromAttempts() async throws {
        let clock = Clock(1_800_000_000)
        let (limiter, _, path) = try await Self.limiter(["bin:tokenize:declines=2/1h", "bin:tokenize:attempts=100/1h"], clock: clock)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let keys = VelocityLimiter.Keys(bin: "41111111")
        for _ in 0..<10 { _ = try await limiter.admit(.tokenize, keys) }   // good cards: attempts only
        for _ in 0..<2 {
            let failed = await Self.refusal { () throws(VaultError) in
                _ = try await limiter.guarded(.tokenize, keys) { () throws(VaultError) -> Int in throw VaultError(.luhnCheckFailed, "bad") }
            }
            #expect(failed?.code == .luhnCheckFailed)
        }
        // A refusal that is not the card's (a store error, a bad request) is no decline.
        _ = await Self.refusal { () throws(VaultError) in
            _ = try await limiter.guarded(.tokenize, .init(bin: "555555")) { () throws(VaultError) -> Int in throw VaultError(.requestFieldUnknown, "x") }
        }
        let refused = await Self.refusal { () throws(VaultError) in _ = try await limiter.admit(.tokenize, keys) }
        #expect(refused?.code == .velocityLimit && refused?.message.contains("declines") == true, "\(String(describing: refused))")
        _ = try await limiter.admit(.tokenize, .init(bin: "555555"))   // the first 6 digits are the key: 411111 only
        #expect(await Self.refusal { () throws(VaultError) in _ = try await limiter.admit(.tokenize, .init(bin: "411111")) }?.code == .velocityLimit)
    }

    /// Over two limits at once, the answer is the later `Retry-After` (a client waiting the first
    /// would be refused by the second).
    @Test func severalLimitsAnswerTheLongestWait() async throws {
        let clock = Clock(1_800_000_000)
        let (limiter, _, path) = try await Self.limiter(["peer:validate:attempts=1/10s", "peer:validate:declines=1/20s"], clock: clock)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let keys = VelocityLimiter.Keys(peer: 7)
        await limiter.declined(try await limiter.admit(.validate, keys))   // t = 0: an attempt, declined
        clock.advance(5)
        // Attempts free a place at 10 s (5 s from now), declines at 20 s (15 s): 15 s, the declines rule.
        let refused = await Self.refusal { () throws(VaultError) in _ = try await limiter.admit(.validate, keys) }
        #expect(refused?.retryAfter == 15 && refused?.message.contains("declines") == true, "\(String(describing: refused))")
    }

    /// Each rule writes its own `velocity.limited` event, also when two rules count the same
    /// scope, action and bucket width and refuse in the same bucket.
    @Test func eachRuleWritesItsOwnEvent() async throws {
        let clock = Clock(1_800_000_000)
        let (limiter, db, path) = try await Self.limiter(["peer:validate:declines=1/100s", "peer:validate:attempts=2/100s"], clock: clock)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let keys = VelocityLimiter.Keys(peer: 7)
        let first = try await limiter.admit(.validate, keys)
        _ = try await limiter.admit(.validate, keys)
        clock.advance(1)
        #expect(await Self.refusal { () throws(VaultError) in _ = try await limiter.admit(.validate, keys) }?.message.contains("attempts") == true)
        await limiter.declined(first)
        clock.advance(1)
        // Both over now, with the same wait: the first rule listed (declines) answers, and writes its event.
        #expect(await Self.refusal { () throws(VaultError) in _ = try await limiter.admit(.validate, keys) }?.message.contains("declines") == true)
        let events = try await db.query("SELECT data FROM vault_events WHERE type = 'velocity.limited' ORDER BY seq").map { try $0.string(0) }
        #expect(events.count == 2 && events[0].contains(#""count":"attempts""#) && events[1].contains(#""count":"declines""#), "\(events)")
    }

    @Test func oldBucketsArePruned() async throws {
        let clock = Clock(1_800_000_000)
        let (limiter, db, path) = try await Self.limiter(["peer:validate:attempts=5/1m"], clock: clock)
        defer { try? FileManager.default.removeItem(atPath: path) }
        _ = try await limiter.admit(.validate, .init(peer: 1))
        await limiter.prune()
        #expect(try await db.query("SELECT COUNT(*) FROM vault_velocity")[0].int(0) == 1)
        clock.advance(120)
        await limiter.prune()
        #expect(try await db.query("SELECT COUNT(*) FROM vault_velocity")[0].int(0) == 0)
    }

    /// A sidecar prunes by each bucket's own width: another sidecar's longer windows on the same
    /// store keep their counts.
    @Test func pruningKeepsAnotherSidecarsLongerWindows() async throws {
        let clock = Clock(1_800_000_000)
        let (short, db, path) = try await Self.limiter(["peer:validate:attempts=5/1m"], clock: clock)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let long = VelocityLimiter(
            rules: [try VelocityRule(parsing: "peer:validate:attempts=5/1h")], counters: VelocityCounters(database: db), metrics: nil,
            logger: Logger(label: "test"), now: { clock.now })
        _ = try await long.admit(.validate, .init(peer: 1))
        clock.advance(600)
        await short.prune()
        #expect(try await db.query("SELECT COUNT(*) FROM vault_velocity")[0].int(0) == 1)
        clock.advance(3600)
        await short.prune()
        #expect(try await db.query("SELECT COUNT(*) FROM vault_velocity")[0].int(0) == 0)
    }

    @Test func binOfATypedNumber() {
        func bin(_ s: String) -> String? { Array(s.utf8).withUnsafeBytes { VelocityLimiter.bin(of: $0) } }
        // The visible prefix of the whole number (min(6, length − 10), DESIGN §1), never more.
        #expect(bin("4242 4242 4242 4242") == "424242" && bin("4242-4242-4242-4242") == "424242" && bin("42424") == nil && bin("42x4242") == nil)
        #expect(bin("6759 0000 0007") == "67" && bin("378282246310005") == "37828" && bin("4242-42") == nil)
    }
}
