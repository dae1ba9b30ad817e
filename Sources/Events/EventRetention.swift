import Foundation
import Logging
import ServiceLifecycle
import Store

/// Deletes events older than the retention (`sidecar.event_retention`, 30 days by default),
/// delivered or not, at start and every `interval`; with a webhook, counts the backlog for the
/// metrics every 5 s. Off the request path.
public struct EventRetention: Service {
    let events: EventStore
    let retention: TimeInterval
    let interval: Duration
    let metrics: WebhookMetrics?
    let countBacklog: Bool
    let logger: Logger

    public init(events: EventStore, retention: TimeInterval, interval: Duration = .seconds(3600), metrics: WebhookMetrics?, countBacklog: Bool, logger: Logger) {
        self.events = events
        self.retention = retention
        self.interval = interval
        self.metrics = metrics
        self.countBacklog = countBacklog
        self.logger = logger
    }

    /// One purge; how many events went.
    @discardableResult
    public func purge(now: Date = Date()) async throws(StoreError) -> Int {
        let n = try await events.purge(before: now.addingTimeInterval(-retention))
        metrics?.eventsPurged(n)
        if n > 0 { logger.info("events purged", metadata: ["events": "\(n)"]) }
        return n
    }

    public func run() async throws {
        try? await cancelWhenGracefulShutdown {
            var lastPurge = ContinuousClock.now - interval
            while !Task.isCancelled {
                if ContinuousClock.now - lastPurge >= interval {
                    do throws(StoreError) { try await purge() } catch {
                        logger.warning("purging old events failed", metadata: ["error": "\(error.code)"])
                    }
                    lastPurge = ContinuousClock.now
                }
                if countBacklog, let metrics {
                    if let b = try? await events.backlog() { metrics.backlog(count: b.count, oldest: b.oldest, now: Date()) }
                }
                try await Task.sleep(for: .seconds(5))
            }
        }
    }
}
