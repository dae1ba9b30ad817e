import Foundation
import GatewayAPI
import Logging
import ServiceLifecycle
import Tokenizer
import VaultClient
import VaultCrypto

/// Fingerprints from the gateway, batched: a tokenize asks for one envelope's fingerprint, and
/// requests that arrive while earlier ones are on the wire go together in the next call (at most
/// `maxBatch` envelopes, `maxInFlight` calls at once). One hop serves many tokenizations under
/// load, and a lone request goes out at once (no timer to wait for).
///
/// The calls are made by up to `maxInFlight` threads of the fingerprinter's own, each on a
/// kept-alive connection to the gateway's socket (blocking HTTP/1.1, `VaultClient`): a request
/// wakes an idle thread, or joins the next batch of a busy one. Issue 16 measured this hop as the
/// largest cost of a tokenize after the seal; the threads spare it the general HTTP client's
/// per-call work and an event-loop hop each way. One call at a time by default: what arrives
/// meanwhile makes the next batch larger, and the gateway's cost per call (HTTP, routing, JSON)
/// is shared by more envelopes. A thread idle for `idleExit` ends (the next request starts one
/// again).
///
/// When the gateway cannot answer (down, slow past `timeout`, no fingerprint key), the answer is
/// `unavailable`: the token is stored without a fingerprint and `FingerprintFiller` fills it in.
/// After such a failure, tokenizations do not ask again for `retryAfter` (they answer
/// `unavailable` at once, and so do those that queued during the failed call), so a sidecar whose
/// gateway is down or hung tokenizes at full speed.
public final class GatewayFingerprinter: Fingerprinter, @unchecked Sendable {
    typealias Waiter = CheckedContinuation<Result<[FingerprintAnswer], FingerprintFailure>, Never>

    let client: SidecarClient
    let maxBatch: Int
    /// The calling threads' name, as `top -H` shows it.
    static let threadName = "vault-fprints"
    let maxInFlight: Int
    let retryAfter: Duration
    let idleExit: TimeInterval
    /// Guards everything below; idle threads wait on it.
    private let condition = NSCondition()
    /// Requests waiting, in arrival order: a tokenize's one envelope (`tokenize`: answered
    /// `unavailable` without asking while the gateway is down), or a filler's batch.
    private var queue: [(envelopes: [String], tokenize: Bool, waiter: Waiter)] = []
    private var threads = 0
    /// Threads waiting for work, and the wake-ups sent to them that no thread has taken yet.
    private var waiting = 0, wakeups = 0
    private var downUntil: ContinuousClock.Instant?

    /// Requests queued and not yet sent (tests).
    var queued: Int { condition.withLock { queue.count } }
    /// Calling threads running (tests).
    var running: Int { condition.withLock { threads } }

    /// A fingerprinter over the gateway's socket; one call waits at most `timeout` for each
    /// read or write.
    public init(
        gatewaySocket: String, timeout: Duration = .seconds(2), maxBatch: Int = 64, maxInFlight: Int = 1, retryAfter: Duration = .seconds(2),
        idleExit: TimeInterval = 10
    ) {
        self.retryAfter = retryAfter
        let c = timeout.components
        var client = SidecarClient(socketPath: gatewaySocket, timeout: Double(c.seconds) + Double(c.attoseconds) / 1e18, maxIdleConnections: max(1, maxInFlight))
        client.serverName = "the gateway"
        self.client = client
        self.maxBatch = max(1, maxBatch)
        self.maxInFlight = max(1, maxInFlight)
        self.idleExit = idleExit
    }

    public func fingerprints(of envelopes: [CardEnvelope]) async throws(FingerprintFailure) -> [FingerprintAnswer] {
        guard !envelopes.isEmpty else { return [] }
        // A tokenize does not wait on a gateway that just failed; the filler (a whole batch) asks anyway.
        if envelopes.count == 1, isDown() { throw .unavailable("the gateway did not answer a moment ago") }
        var answers: [FingerprintAnswer] = []
        var at = 0
        while at < envelopes.count {
            let part = envelopes[at..<min(at + maxBatch, envelopes.count)].map(\.json)
            let tokenize = envelopes.count == 1
            let result = await withCheckedContinuation { (waiter: Waiter) in submit(part, tokenize: tokenize, waiter) }
            answers += try result.get()
            at += part.count
        }
        return answers
    }

    /// Queues a request and wakes an idle thread, or starts one while fewer than `maxInFlight` run.
    private func submit(_ envelopes: [String], tokenize: Bool, _ waiter: Waiter) {
        condition.lock()
        queue.append((envelopes, tokenize, waiter))
        var start = false
        if waiting > wakeups {
            wakeups += 1
            condition.signal()
        } else if threads < maxInFlight {
            threads += 1
            start = true
        }
        condition.unlock()
        if start {
            let thread = Thread { [self] in
                // Named from the thread itself: `Thread.name` does not reach the kernel on Linux
                // (`top -H`, `perf` and /proc show this name; 15 bytes at most).
                try? Self.threadName.write(toFile: "/proc/thread-self/comm", atomically: false, encoding: .utf8)
                work()
            }
            thread.name = Self.threadName
            thread.start()
        }
    }

    /// A calling thread: sends what is queued, batch after batch; ends after `idleExit` with nothing to send.
    private func work() {
        while let (batch, refused) = nextBatch() {
            for entry in refused { entry.waiter.resume(returning: .failure(.unavailable("the gateway did not answer a moment ago"))) }
            guard !batch.isEmpty else { continue }
            let counts = batch.map(\.envelopes.count)
            switch call(batch.flatMap(\.envelopes)) {
            case .success(let answers):
                var at = 0
                for (entry, n) in zip(batch, counts) {
                    entry.waiter.resume(returning: .success(Array(answers[at..<(at + n)])))
                    at += n
                }
            case .failure(let failure):
                for entry in batch { entry.waiter.resume(returning: .failure(failure)) }
            }
        }
    }

    /// The next batch (whole requests, at most `maxBatch` envelopes but at least one request), and
    /// the tokenizes to answer `unavailable` at once (the gateway failed a moment ago: those that
    /// queued during the failed call are not sent); nil when nothing came for `idleExit` (the
    /// thread ends).
    private func nextBatch() -> (batch: [(envelopes: [String], tokenize: Bool, waiter: Waiter)], refused: [(envelopes: [String], tokenize: Bool, waiter: Waiter)])? {
        condition.lock()
        defer { condition.unlock() }
        while queue.isEmpty {
            waiting += 1
            let woken = condition.wait(until: Date(timeIntervalSinceNow: idleExit))
            waiting -= 1
            // Whatever woke it (a signal, the time-out, a spurious wake-up), a wake-up owed is paid.
            if wakeups > 0 { wakeups -= 1 }
            if !woken, queue.isEmpty {
                threads -= 1
                return nil
            }
        }
        if let until = downUntil, ContinuousClock.now < until {
            let refused = queue.filter(\.tokenize)
            queue.removeAll(where: \.tokenize)
            if queue.isEmpty { return ([], refused) }
            return (take(), refused)
        }
        return (take(), [])
    }

    /// Takes the next batch off the queue (under the lock; the queue is not empty).
    private func take() -> [(envelopes: [String], tokenize: Bool, waiter: Waiter)] {
        var n = 1, envelopes = queue[0].envelopes.count
        while n < queue.count, envelopes + queue[n].envelopes.count <= maxBatch {
            envelopes += queue[n].envelopes.count
            n += 1
        }
        let batch = Array(queue.prefix(n))
        queue.removeFirst(n)
        return batch
    }

    private func isDown() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard let until = downUntil else { return false }
        if ContinuousClock.now < until { return true }
        downUntil = nil
        return false
    }

    /// One `POST /v1/fingerprints` on this thread; a failure marks the gateway down for `retryAfter`.
    private func call(_ envelopes: [String]) -> Result<[FingerprintAnswer], FingerprintFailure> {
        let failure: String
        do throws(VaultError) {
            let answer = try client.post("/v1/fingerprints", json: FingerprintBatch.json(envelopeJSON: envelopes))
            do throws(GatewayClient.Failure) {
                return .success(try GatewayClient.fingerprintAnswers(status: answer.status, text: answer.body, count: envelopes.count))
            } catch {
                failure = error.reason
            }
        } catch {
            failure = error.message
        }
        let until = ContinuousClock.now + retryAfter
        condition.lock()
        downUntil = until
        condition.unlock()
        return .failure(.unavailable(failure))
    }
}

/// Fills in the fingerprints of tokens stored while the gateway could not answer, every
/// `interval`, until shutdown.
public struct FingerprintFiller: Service {
    let tokenizer: Tokenizer
    let interval: Duration
    let logger: Logger
    let metrics: SidecarMetrics?

    public init(tokenizer: Tokenizer, interval: Duration = .seconds(30), logger: Logger, metrics: SidecarMetrics? = nil) {
        self.tokenizer = tokenizer
        self.interval = interval
        self.logger = logger
        self.metrics = metrics
    }

    /// One pass; returns the fingerprints stored.
    @discardableResult
    public func fill() async -> Int {
        do throws(VaultError) {
            let r = try await tokenizer.fillFingerprints()
            if r.filled > 0 { logger.info("fingerprints filled in", metadata: ["tokens": "\(r.filled)"]) }
            if r.refused > 0 { logger.warning("the gateway refused stored envelopes", metadata: ["tokens": "\(r.refused)"]) }
            metrics?.fingerprintsFilled(r.filled)
            return r.filled
        } catch {
            logger.warning("fingerprint fill failed", metadata: ["error": "\(error.code)"])
            return 0
        }
    }

    public func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await fill()
                try await Task.sleep(for: interval)
            }
        }
    }
}
