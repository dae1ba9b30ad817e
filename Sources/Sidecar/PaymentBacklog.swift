import Foundation
import Logging
import Payments
import ServiceLifecycle
import Store

/// Counts the store's payments by state for `vault_payments_by_state` and
/// `vault_payments_oldest_processing_age_seconds`, off the request path: a scrape only reads the
/// last counts, so a slow or unreachable store never holds up `GET /metrics` (the gauges keep
/// their last values; a failed count is logged once per outage). Every `interval` it counts the
/// backlog (`processing`, `unknown`: a partial index, cheap whatever the table's size); at start
/// and every `fullEvery` intervals every state (a scan of the table: about 1–2 s per million
/// payments on SQLite, measured on a 2-core machine).
public struct PaymentBacklog: Service {
    let payments: any PaymentStore
    let metrics: SidecarMetrics
    let interval: Duration
    let fullEvery: Int
    let logger: Logger
    let now: @Sendable () -> Date

    public init(
        payments: any PaymentStore, metrics: SidecarMetrics, interval: Duration = .seconds(30), fullEvery: Int = 10, logger: Logger,
        now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.payments = payments
        self.metrics = metrics
        self.interval = interval
        self.fullEvery = max(1, fullEvery)
        self.logger = logger
        self.now = now
    }

    /// One count into the gauges: every state (`all`) or the backlog's.
    /// - Throws: `STORE_UNAVAILABLE` and the store's other codes (the gauges keep their values).
    public func refresh(all: Bool = true) async throws(StoreError) {
        let counts = try await payments.stateCounts(all: all)
        metrics.paymentStates(counts, now: now())
    }

    public func run() async throws {
        try? await cancelWhenGracefulShutdown {
            var failing = false, round = 0, fullDone = false
            while !Task.isCancelled {
                do throws(StoreError) {
                    // Every state at start (again after a failure) and every `fullEvery` rounds.
                    let all = !fullDone || round % fullEvery == 0
                    try await refresh(all: all)
                    if all { fullDone = true; round = 0 }
                    if failing { logger.notice("counting payments by state works again") }
                    failing = false
                } catch {
                    if !failing {
                        logger.warning("counting payments by state failed; the metrics keep the last counts", metadata: ["error": "\(error.code)"])
                    }
                    failing = true
                    fullDone = false
                }
                round += 1
                try await Task.sleep(for: interval)
            }
        }
    }
}
