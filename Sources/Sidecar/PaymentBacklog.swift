import Foundation
import Logging
import Payments
import ServiceLifecycle
import Store

/// Counts the store's payments by state for `vault_payments_by_state` and
/// `vault_payments_oldest_processing_age_seconds`, at start and then every `interval`, off the
/// request path: a scrape only reads the last counts, so a slow or unreachable store never holds
/// up `GET /metrics` (the gauges keep their last values; a failed count is logged once per
/// outage).
public struct PaymentBacklog: Service {
    let payments: any PaymentStore
    let metrics: SidecarMetrics
    let interval: Duration
    let logger: Logger
    let now: @Sendable () -> Date

    public init(
        payments: any PaymentStore, metrics: SidecarMetrics, interval: Duration = .seconds(30), logger: Logger,
        now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.payments = payments
        self.metrics = metrics
        self.interval = interval
        self.logger = logger
        self.now = now
    }

    /// One count into the gauges.
    /// - Throws: `STORE_UNAVAILABLE` and the store's other codes (the gauges keep their values).
    public func refresh() async throws(StoreError) {
        let counts = try await payments.stateCounts()
        metrics.paymentStates(counts, now: now())
    }

    public func run() async throws {
        try? await cancelWhenGracefulShutdown {
            var failing = false
            while !Task.isCancelled {
                do throws(StoreError) {
                    try await refresh()
                    if failing { logger.notice("counting payments by state works again") }
                    failing = false
                } catch {
                    if !failing {
                        logger.warning("counting payments by state failed; the metrics keep the last counts", metadata: ["error": "\(error.code)"])
                    }
                    failing = true
                }
                try await Task.sleep(for: interval)
            }
        }
    }
}
