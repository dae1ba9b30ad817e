import Foundation
import Prometheus
import SocketHTTP

/// The gateway's Prometheus metrics, at `GET /metrics` on its socket (docs/metrics.md): those
/// both servers export (`ServerMetrics`), envelopes opened (by outcome: `ok` or the refusal code),
/// authorizations by status, processor latency and failures, and settlement (steps by result,
/// ledger rows unsettled and past their deadline). Labels come
/// from fixed sets only; nothing from a card can become a label.
public final class GatewayMetrics: Sendable {
    /// What both servers export (build info, requests, errors, key reloads, the primary key's
    /// age, audit write failures), on this registry.
    public let server: ServerMetrics
    public var registry: PrometheusCollectorRegistry { server.registry }

    /// Processor answer times, up to the gateway's 30 s timeout.
    static let processorBuckets: [Duration] = [
        .milliseconds(1), .milliseconds(5), .milliseconds(25), .milliseconds(100), .milliseconds(500), .seconds(1), .seconds(2),
        .seconds(5), .seconds(10), .seconds(30),
    ]

    /// The kinds of `vault_gateway_processor_failures_total` (`ProcessorAnswer.failed`).
    static let processorFailureKinds = ["unknown", "unavailable", "pending", "in_progress", "unknown_past_deadline", "refused"]

    /// The counters of every fingerprint and open, looked up once (not per envelope).
    private let openedOK: Counter
    private let fingerprints: Counter
    private let withheld: Counter

    public init(now: @escaping @Sendable () -> Date = Date.init) {
        server = ServerMetrics(component: "gateway", now: now)
        openedOK = Self.openCounter(server.registry, "ok")
        fingerprints = server.registry.makeCounter(
            descriptor: .init(namespace: "vault", metricName: "gateway_fingerprints", unitName: "total", helpText: "Fingerprints answered to the sidecar."))
        withheld = server.registry.makeCounter(
            descriptor: .init(
                namespace: "vault", metricName: "gateway_fingerprints_withheld", unitName: "total",
                helpText: "Fingerprints of new cards withheld by the guessing limit (a truncation group past its distinct cards in the window)."))
        // Fixed label sets start at zero, so alerts see a series from the start.
        for kind in Self.processorFailureKinds { processorFailureCounter(kind) }
        for result in ["settled", "unknown", "not_received", "resent"] { settleCounter(result) }
        processorHistogram()
        // 0 until the settler's first count (at start, then every `settleInterval`).
        ledger(unsettled: 0, pastDeadline: 0)
    }

    /// An envelope opened (`ok`) or refused (its code: KEY_RETIRED, ENVELOPE_FIELD_CORRUPT, …).
    func opened(_ outcome: String) {
        if outcome == "ok" { return openedOK.increment() }
        Self.openCounter(registry, outcome).increment()
    }

    private static func openCounter(_ registry: PrometheusCollectorRegistry, _ outcome: String) -> Counter {
        registry.makeCounter(
            descriptor: .init(namespace: "vault", metricName: "gateway_opens", unitName: "total", helpText: "Envelopes opened (ok) or refused, by code."),
            labels: [("outcome", outcome)])
    }

    /// Fingerprints answered to the sidecar (`POST /v1/fingerprints`). Each is an answer about a
    /// card the caller sealed: alert when it grows well past tokenizations (a sidecar testing
    /// candidate card numbers against stored fingerprints; docs/threat-model.md).
    func fingerprinted(_ count: Int) {
        fingerprints.increment(by: Int64(count))
    }

    /// Fingerprints withheld by the guessing limit (docs/threat-model.md "The fingerprint oracle").
    func withheld(_ count: Int) {
        withheld.increment(by: Int64(count))
    }

    /// An authorization answered by the processor.
    func authorized(status: String, duration: Duration) {
        registry.makeCounter(
            descriptor: .init(namespace: "vault", metricName: "gateway_authorizations", unitName: "total", helpText: "Authorizations, by outcome status."),
            labels: [("status", status)]
        ).increment()
        processorHistogram().record(duration)
    }

    @discardableResult
    private func processorHistogram() -> DurationHistogram {
        registry.makeDurationHistogram(
            descriptor: .init(namespace: "vault", metricName: "gateway_processor_duration", unitName: "seconds", helpText: "Time the processor took to answer."),
            buckets: Self.processorBuckets)
    }

    /// A processor call whose outcome is unknown or that could not be sent.
    func processorFailed(_ kind: String) {
        processorFailureCounter(kind).increment()
    }

    @discardableResult
    private func processorFailureCounter(_ kind: String) -> Counter {
        registry.makeCounter(
            descriptor: .init(namespace: "vault", metricName: "gateway_processor_failures", unitName: "total", helpText: "Processor calls without an outcome, by kind (unknown, unavailable, pending, in_progress, unknown_past_deadline, refused)."),
            labels: [("kind", kind)])
    }

    /// A step of settling an unknown outcome (in the call or in the background), by result:
    /// `resent` (the charge was sent again with the same idempotency key), `settled` (a status
    /// query or a re-send gave the outcome), `not_received` (the status query says the processor
    /// never got it: the ledger row is removed, nothing charged), `unknown` (still not known).
    /// A re-send counts twice: `resent`, then its result.
    func settled(_ result: String) {
        settleCounter(result).increment()
    }

    @discardableResult
    private func settleCounter(_ result: String) -> Counter {
        registry.makeCounter(
            descriptor: .init(
                namespace: "vault", metricName: "gateway_settle_attempts", unitName: "total",
                helpText: "Settlement steps of unknown outcomes, by result (settled, unknown, not_received, resent)."),
            labels: [("result", result)])
    }

    /// The ledger's rows not done, and those past their settlement deadline (reported `unknown`:
    /// alert on it). Store-wide: every gateway of a store reports the same figures.
    func ledger(unsettled: Int, pastDeadline: Int) {
        registry.makeGauge(descriptor: .init(
            namespace: "vault", metricName: "gateway_ledger_unsettled", unitName: "", helpText: "Ledger rows whose outcome is not recorded yet (store-wide)."))
            .set(Double(unsettled))
        registry.makeGauge(descriptor: .init(
            namespace: "vault", metricName: "gateway_ledger_unknown_past_deadline", unitName: "",
            helpText: "Ledger rows still unknown after their settlement deadline (store-wide): settle them by hand."))
            .set(Double(pastDeadline))
    }

    /// The exposition text (values read at scrape time brought up to date first).
    public func exposition() -> [UInt8] { server.exposition() }
}
