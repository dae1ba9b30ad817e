import Foundation
import SocketHTTP
import Prometheus
import Payments
import Tokenizer

/// The sidecar's Prometheus metrics, served at `GET /metrics` (text exposition format 0.0.4;
/// every family in docs/metrics.md): those both servers export (`ServerMetrics`: build info,
/// requests, errors, key reloads, the primary key's age, audit write failures) and the sidecar's
/// own (tokens, payments, the payment backlog by state, the sweeper).
///
/// Labels carry only values from fixed sets: the matched route template (never the request
/// path), the method (one of the known ones, else `OTHER`), the status code and the stable error
/// code. Nothing a caller sends (a token, a card field) can become a label.
public final class SidecarMetrics: Sendable {
    /// What both servers export, on this registry.
    public let server: ServerMetrics
    /// The registry behind `GET /metrics`.
    public var registry: PrometheusCollectorRegistry { server.registry }

    private let byState: [PaymentRecord.Status: Gauge]
    private let oldestProcessing: Gauge
    /// Counted on every tokenize: made once (a registry lookup per request cost a lock and the
    /// help text's checks, about 1% of a tokenize's CPU).
    private let seals: Counter
    private let tokensBySource: [String: Counter]
    private let tokensReused: Counter

    public init(now: @escaping @Sendable () -> Date = Date.init) {
        server = ServerMetrics(component: "sidecar", now: now)
        let registry = server.registry
        var byState: [PaymentRecord.Status: Gauge] = [:]
        for status in PaymentRecord.Status.allCases {
            byState[status] = registry.makeGauge(
                descriptor: .init(
                    namespace: "vault", metricName: "payments_by_state", unitName: "",
                    helpText: "Payments in the store by state (store-wide; processing and unknown, the backlog, counted every 30 s, the others every 5 minutes)."),
                labels: [("state", status.rawValue)])
        }
        self.byState = byState
        oldestProcessing = registry.makeGauge(descriptor: .init(
            namespace: "vault", metricName: "payments_oldest_processing_age", unitName: "seconds",
            helpText: "Age of the oldest payment still processing (store-wide; 0 when none)."))
        seals = registry.makeCounter(descriptor: .init(namespace: "vault", metricName: "seals", unitName: "total", helpText: "Cards sealed at the door (one crypto_box_seal each)."))
        var tokensBySource: [String: Counter] = [:]
        for source in ["card", "envelope"] {
            tokensBySource[source] = registry.makeCounter(
                descriptor: .init(namespace: "vault", metricName: "tokens_created", unitName: "total", helpText: "Tokens created, by input (card sealed at the door, or envelope sealed by the caller)."),
                labels: [("source", source)])
        }
        self.tokensBySource = tokensBySource
        tokensReused = registry.makeCounter(descriptor: .init(
            namespace: "vault", metricName: "tokens_reused", unitName: "total",
            helpText: "Tokenize requests with dedupe answered an existing reusable token of the same card (docs/dedupe.md)."))
        // Counters of fixed label sets start at zero, so alerts see a series from the start.
        for how in ["reconciled", "resent", "not_received"] { settledCounter(how) }
        unknownCounter()
        sweepFailureCounter()
        fingerprintsFilledCounter()
        for rule in VelocityRule.Scope.allCases.flatMap({ s in VelocityRule.Action.allCases.filter { VelocityRule.applies(s, $0) }.map { (s, $0) } }) {
            velocityRefusalCounter(scope: rule.0.rawValue, action: rule.1.rawValue)
        }
    }

    /// The payments of the store by state, as `PaymentBacklog` last counted them (the states
    /// not counted keep their values).
    public func paymentStates(_ counts: PaymentStateCounts, now: Date) {
        for (status, count) in counts.byStatus { byState[status]?.set(Double(count)) }
        oldestProcessing.set(counts.oldestProcessing.map { max(0, now.timeIntervalSince($0)).rounded(.down) } ?? 0)
    }

    /// A request answered (see `ServerMetrics.request`).
    public func request(route: String?, method: String, status: Int, duration: Duration, errorCode: String? = nil) {
        server.request(route: route, method: method, status: status, duration: duration, errorCode: errorCode)
    }

    /// A token was created from a raw card (`card`, sealed at the door) or a caller's envelope.
    public func tokenCreated(source: String) {
        if source == "card" { seals.increment() }
        tokensBySource[source]?.increment()
    }

    /// A tokenize with `dedupe` answered an existing token (`card`: the card was sealed at the
    /// door all the same).
    public func tokenReused(source: String) {
        if source == "card" { seals.increment() }
        tokensReused.increment()
    }

    /// A payment answered (a replay is counted apart: it charged nothing).
    public func payment(status: String, replayed: Bool) {
        registry.makeCounter(
            descriptor: .init(namespace: "vault", metricName: "payments", unitName: "total", helpText: "Payments answered, by status; replays of an idempotency key are counted apart."),
            labels: [("status", status), ("replayed", replayed ? "true" : "false")]
        ).increment()
    }

    /// A payment whose outcome was not known got one from the gateway (`how`: `reconciled`
    /// when the gateway had it, `resent` when a re-post settled it, `not_received` when nothing
    /// was charged and the intent was dropped).
    public func paymentSettled(how: String) {
        settledCounter(how).increment()
    }

    @discardableResult
    private func settledCounter(_ how: String) -> Counter {
        registry.makeCounter(
            descriptor: .init(namespace: "vault", metricName: "payments_settled", unitName: "total", helpText: "Payments whose unknown outcome was settled later, by how."),
            labels: [("how", how)])
    }

    /// A payment whose outcome is still not known at the gateway's settlement deadline: now
    /// `unknown`, for an operator (`vault payments settle`). Alert on any increase.
    public func paymentUnknown() { unknownCounter().increment() }

    @discardableResult
    private func unknownCounter() -> Counter {
        registry.makeCounter(
            descriptor: .init(namespace: "vault", metricName: "payments_unknown", unitName: "total", helpText: "Payments reported unknown at the settlement deadline (an operator settles them)."))
    }

    /// What a sweep removed.
    public func purged(_ result: PurgeResult) {
        registry.makeCounter(descriptor: .init(namespace: "vault", metricName: "sweeper_tokens_deleted", unitName: "total", helpText: "Expired tokens deleted by the sweeper."))
            .increment(by: Int64(result.tokensDeleted))
        registry.makeCounter(descriptor: .init(namespace: "vault", metricName: "sweeper_cvcs_dropped", unitName: "total", helpText: "CVCs dropped by the sweeper: past their TTL, or the oldest past sidecar.held_cvcs_max."))
            .increment(by: Int64(result.cvcsDropped))
    }

    /// Fingerprints filled in after the gateway was unreachable at tokenize time.
    public func fingerprintsFilled(_ n: Int) { fingerprintsFilledCounter().increment(by: Int64(n)) }

    @discardableResult
    private func fingerprintsFilledCounter() -> Counter {
        registry.makeCounter(
            descriptor: .init(namespace: "vault", metricName: "fingerprints_filled", unitName: "total", helpText: "Token fingerprints filled in after tokenize."))
    }

    /// A request refused by a velocity limit (`VELOCITY_LIMIT`), by the limit's scope and action.
    public func velocityRefused(scope: String, action: String) { velocityRefusalCounter(scope: scope, action: action).increment() }

    @discardableResult
    private func velocityRefusalCounter(scope: String, action: String) -> Counter {
        registry.makeCounter(
            descriptor: .init(namespace: "vault", metricName: "velocity_refusals", unitName: "total", helpText: "Requests refused by a velocity limit (VELOCITY_LIMIT), by the limit's scope and action."),
            labels: [("scope", scope), ("action", action)])
    }

    /// A sweep that failed (store unreachable).
    public func sweepFailed() { sweepFailureCounter().increment() }

    @discardableResult
    private func sweepFailureCounter() -> Counter {
        registry.makeCounter(descriptor: .init(namespace: "vault", metricName: "sweeper_failures", unitName: "total", helpText: "Sweeps that failed."))
    }

    /// The exposition text (values read at scrape time brought up to date first).
    public func exposition() -> [UInt8] { server.exposition() }
}
