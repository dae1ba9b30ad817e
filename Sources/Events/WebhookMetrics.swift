import Foundation
import Prometheus

/// The webhook families of the sidecar's `GET /metrics` (docs/metrics.md): the backlog of events
/// not delivered yet, the age of the oldest, attempts by outcome, and whether this sidecar holds
/// the store's delivery lease. Without a webhook the gauges stay 0.
public final class WebhookMetrics: Sendable {
    private let backlogGauge: Gauge
    private let oldestGauge: Gauge
    private let leaseGauge: Gauge
    private let delivered: Counter
    private let failed: Counter
    private let purged: Counter

    public init(registry: PrometheusCollectorRegistry) {
        backlogGauge = registry.makeGauge(descriptor: .init(
            namespace: "vault", metricName: "webhook_backlog", unitName: "events",
            helpText: "Events not yet delivered to the webhook (store-wide, counted every 5 s by the delivering sidecar; 0 without a webhook)."))
        oldestGauge = registry.makeGauge(descriptor: .init(
            namespace: "vault", metricName: "webhook_oldest_pending_age", unitName: "seconds",
            helpText: "Age of the oldest event not yet delivered (0 when none)."))
        leaseGauge = registry.makeGauge(descriptor: .init(
            namespace: "vault", metricName: "webhook_lease_held", unitName: "",
            helpText: "1 when this sidecar delivers the store's webhooks (it holds the lease), else 0."))
        let attempts = { (outcome: String) in
            registry.makeCounter(
                descriptor: .init(namespace: "vault", metricName: "webhook_attempts", unitName: "total", helpText: "Webhook delivery attempts, by outcome."),
                labels: [("outcome", outcome)])
        }
        delivered = attempts("delivered")
        failed = attempts("failed")
        purged = registry.makeCounter(descriptor: .init(
            namespace: "vault", metricName: "events_purged", unitName: "total", helpText: "Events deleted after the retention period."))
    }

    public func backlog(count: Int, oldest: Date?, now: Date) {
        backlogGauge.set(Double(count))
        oldestGauge.set(oldest.map { max(0, now.timeIntervalSince($0)).rounded(.down) } ?? 0)
    }

    public func leaseHeld(_ held: Bool) { leaseGauge.set(Double(held ? 1 : 0)) }

    public func attempt(delivered ok: Bool) { (ok ? delivered : failed).increment() }

    public func eventsPurged(_ n: Int) { purged.increment(by: Int64(n)) }
}
