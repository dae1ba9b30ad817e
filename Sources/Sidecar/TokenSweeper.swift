import Foundation
import Logging
import ServiceLifecycle
import Tokenizer

/// Purges expired tokens and drops CVCs past their TTL, every `interval`, until shutdown.
/// Readers already never see expired tokens or CVCs; the sweeper makes the ciphertext go away.
public struct TokenSweeper: Service {
    let tokenizer: Tokenizer
    let interval: Duration
    let logger: Logger
    let metrics: SidecarMetrics?
    /// Its counters' old buckets are pruned on every pass.
    public var velocity: VelocityLimiter?

    public init(
        tokenizer: Tokenizer, interval: Duration = .seconds(30), logger: Logger, metrics: SidecarMetrics? = nil
    ) {
        self.tokenizer = tokenizer
        self.metrics = metrics
        self.interval = interval
        self.logger = logger
    }

    /// One pass.
    @discardableResult
    public func sweep() async -> PurgeResult? {
        await velocity?.prune()
        do {
            let result = try await tokenizer.purgeExpired()
            metrics?.purged(result)
            if result.tokensDeleted + result.cvcsDropped > 0 {
                logger.info("purged", metadata: ["tokens": "\(result.tokensDeleted)", "cvcs": "\(result.cvcsDropped)"])
            }
            return result
        } catch {
            metrics?.sweepFailed()
            logger.warning("purge failed", metadata: ["error": "\(error.code)"])
            return nil
        }
    }

    /// Sweeps every `interval`; a graceful shutdown cancels the wait at once.
    public func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await sweep()
                try await Task.sleep(for: interval)
            }
        }
    }
}
