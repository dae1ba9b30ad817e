import Prometheus

/// The gateway's Prometheus metrics, at `GET /metrics` on its socket: envelopes opened (by
/// outcome: `ok` or the refusal code), authorizations by status, and processor latency. Labels come
/// from fixed sets only; nothing from a card can become a label.
public final class GatewayMetrics: Sendable {
    public let registry = PrometheusCollectorRegistry()

    public init() {}

    /// An envelope opened (`ok`) or refused (its code: KEY_RETIRED, ENVELOPE_FIELD_CORRUPT, …).
    func opened(_ outcome: String) {
        registry.makeCounter(
            descriptor: .init(namespace: "vault", metricName: "gateway_opens", unitName: "total", helpText: "Envelopes opened (ok) or refused, by code."),
            labels: [("outcome", outcome)]
        ).increment()
    }

    /// Fingerprints answered to the sidecar (`POST /v1/fingerprints`). Each is an answer about a
    /// card the caller sealed: alert when it grows well past tokenizations (a sidecar testing
    /// candidate card numbers against stored fingerprints; docs/threat-model.md).
    func fingerprinted(_ count: Int) {
        registry.makeCounter(
            descriptor: .init(namespace: "vault", metricName: "gateway_fingerprints", unitName: "total", helpText: "Fingerprints answered to the sidecar."))
            .increment(by: Int64(count))
    }

    /// An authorization answered by the processor.
    func authorized(status: String, duration: Duration) {
        registry.makeCounter(
            descriptor: .init(namespace: "vault", metricName: "gateway_authorizations", unitName: "total", helpText: "Authorizations, by outcome status."),
            labels: [("status", status)]
        ).increment()
        registry.makeDurationHistogram(
            descriptor: .init(namespace: "vault", metricName: "gateway_processor_duration", unitName: "seconds", helpText: "Time the processor took to answer."),
            buckets: [.milliseconds(1), .milliseconds(5), .milliseconds(25), .milliseconds(100), .milliseconds(500), .seconds(2), .seconds(10)]
        ).record(duration)
    }

    /// A processor call whose outcome is unknown or that could not be sent.
    func processorFailed(_ kind: String) {
        registry.makeCounter(
            descriptor: .init(namespace: "vault", metricName: "gateway_processor_failures", unitName: "total", helpText: "Processor calls that failed, by kind (unknown, unavailable)."),
            labels: [("kind", kind)]
        ).increment()
    }

    public func exposition() -> [UInt8] { registry.emitToBuffer() }
}
