import Foundation
import SocketHTTP
import Logging
import NIOCore
import ServiceLifecycle
import Tokenizer
import VaultCrypto

/// Fingerprints from the gateway, batched: a tokenize asks for one envelope's fingerprint, and
/// requests that arrive while earlier ones are on the wire go together in the next call (at most
/// `maxBatch` envelopes, `maxInFlight` calls at once). One hop serves many tokenizations under
/// load, and a lone request goes out at once (no timer to wait for).
///
/// When the gateway cannot answer (down, slow past `timeout`, no fingerprint key), the answer is
/// `unavailable`: the token is stored without a fingerprint and `FingerprintFiller` fills it in.
/// After such a failure, tokenizations do not ask again for `retryAfter` (they answer
/// `unavailable` at once), so a sidecar whose gateway is down tokenizes at full speed.
public final class GatewayFingerprinter: Fingerprinter, @unchecked Sendable {
    typealias Waiter = CheckedContinuation<Result<FingerprintAnswer, FingerprintFailure>, Never>

    let client: GatewayClient
    let maxBatch: Int
    let maxInFlight: Int
    private let lock = NSLock()
    private var queue: [(json: String, waiter: Waiter)] = []
    private var inFlight = 0
    private var downUntil: ContinuousClock.Instant?
    let retryAfter: Duration

    /// A fingerprinter over the gateway's socket; one call waits at most `timeout`.
    public init(
        gatewaySocket: String, timeout: TimeAmount = .seconds(2), maxBatch: Int = 64, maxInFlight: Int = 2, retryAfter: Duration = .seconds(2)
    ) {
        self.retryAfter = retryAfter
        var client = GatewayClient(socketPath: gatewaySocket)
        client.timeout = timeout
        self.client = client
        self.maxBatch = max(1, maxBatch)
        self.maxInFlight = max(1, maxInFlight)
    }

    public func fingerprints(of envelopes: [CardEnvelope]) async throws(FingerprintFailure) -> [FingerprintAnswer] {
        guard envelopes.count == 1 else {
            // A whole batch already (the filler): one call of its own.
            var out: [FingerprintAnswer] = []
            var at = 0
            while at < envelopes.count {
                let part = envelopes[at..<min(at + maxBatch, envelopes.count)]
                out += try await call(part.map(\.json))
                at += part.count
            }
            return out
        }
        if isDown() { throw .unavailable("the gateway did not answer a moment ago") }
        let json = envelopes[0].json
        let result = await withCheckedContinuation { (waiter: Waiter) in
            lock.lock()
            queue.append((json, waiter))
            let start = inFlight < maxInFlight
            if start { inFlight += 1 }
            lock.unlock()
            // The drain serves other requests too: it carries no request's id into its log lines.
            if start { Task { await RequestScope.$requestID.withValue(nil) { await self.drain() } } }
        }
        return [try result.get()]
    }

    /// Sends what is queued, batch after batch, until the queue is empty.
    private func drain() async {
        while true {
            guard let batch = nextBatch() else { return }
            do throws(FingerprintFailure) {
                let answers = try await call(batch.map(\.json))
                for (entry, answer) in zip(batch, answers) { entry.waiter.resume(returning: .success(answer)) }
            } catch {
                for entry in batch { entry.waiter.resume(returning: .failure(error)) }
            }
        }
    }

    /// The next batch, or nil (and this drainer ends) when nothing waits.
    private func nextBatch() -> [(json: String, waiter: Waiter)]? {
        lock.withLock {
            guard !queue.isEmpty else {
                inFlight -= 1
                return nil
            }
            let n = min(queue.count, maxBatch)
            let batch = Array(queue.prefix(n))
            queue.removeFirst(n)
            return batch
        }
    }

    private func isDown() -> Bool {
        lock.withLock {
            guard let until = downUntil else { return false }
            if ContinuousClock.now < until { return true }
            downUntil = nil
            return false
        }
    }

    private func call(_ envelopes: [String]) async throws(FingerprintFailure) -> [FingerprintAnswer] {
        do throws(GatewayClient.Failure) {
            return try await client.fingerprints(ofEnvelopes: envelopes)
        } catch {
            let until = ContinuousClock.now + retryAfter
            lock.withLock { downUntil = until }
            switch error {
            case .refused(let code, let message): throw .unavailable("\(code): \(message)")
            default: throw .unavailable(error.reason)
            }
        }
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
