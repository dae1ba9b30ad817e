import Foundation
import Hummingbird
import SocketHTTP
import Prometheus
import Synchronization
import Tokenizer

/// The sidecar's Prometheus metrics, served at `GET /metrics` (text exposition format 0.0.4).
///
/// Labels carry only values from fixed sets: the matched route template (never the request
/// path), the method (one of the known ones, else `OTHER`), the status code and the stable error
/// code. Nothing a caller sends (a token, a card field) can become a label.
public final class SidecarMetrics: Sendable {
    /// The registry behind `GET /metrics`.
    public let registry = PrometheusCollectorRegistry()

    private static let durationBuckets: [Duration] = [
        .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5),
        .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
        .milliseconds(500), .seconds(1), .seconds(2.5),
    ]

    public init() {}

    /// The request counter and latency histogram of one route/method/status, made once.
    private struct RequestMetrics: Sendable {
        let counter: Counter
        let duration: DurationHistogram
    }
    private let cache = Mutex<[String: RequestMetrics]>([:])

    /// A request answered with `status` after `duration`, and its error code if it failed.
    public func request(route: String?, method: String, status: Int, duration: Duration, errorCode: String? = nil) {
        let route = route ?? "unmatched"
        let method = MethodLabel.label(method)
        let key = "\(route) \(method) \(status)"
        let metrics = cache.withLock { cache in
            if let m = cache[key] { return m }
            let m = RequestMetrics(
                counter: registry.makeCounter(
                    descriptor: .init(namespace: "vault", metricName: "http_requests", unitName: "total", helpText: "HTTP requests answered, by route template, method and status."),
                    labels: [("route", route), ("method", method), ("status", String(status))]),
                duration: registry.makeDurationHistogram(
                    descriptor: .init(namespace: "vault", metricName: "http_request_duration", unitName: "seconds", helpText: "Time from request head to answer, by route template."),
                    labels: [("route", route), ("method", method)], buckets: Self.durationBuckets))
            cache[key] = m
            return m
        }
        metrics.counter.increment()
        metrics.duration.record(duration)
        if let errorCode, errorCode.hasPrefix("STORE_") {
            registry.makeCounter(
                descriptor: .init(namespace: "vault", metricName: "store_errors", unitName: "total", helpText: "Requests that failed in the token or payment store, by code."),
                labels: [("code", errorCode)]
            ).increment()
        }
        if let errorCode {
            registry.makeCounter(
                descriptor: .init(namespace: "vault", metricName: "errors", unitName: "total", helpText: "Error answers, by stable error code (docs/errors.md)."),
                labels: [("code", errorCode)]
            ).increment()
        }
    }

    /// A token was created from a raw card (`card`, sealed at the door) or a caller's envelope.
    public func tokenCreated(source: String) {
        if source == "card" {
            registry.makeCounter(descriptor: .init(namespace: "vault", metricName: "seals", unitName: "total", helpText: "Cards sealed at the door (one crypto_box_seal each)."))
                .increment()
        }
        registry.makeCounter(
            descriptor: .init(namespace: "vault", metricName: "tokens_created", unitName: "total", helpText: "Tokens created, by input (card sealed at the door, or envelope sealed by the caller)."),
            labels: [("source", source)]
        ).increment()
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
        registry.makeCounter(
            descriptor: .init(namespace: "vault", metricName: "payments_settled", unitName: "total", helpText: "Payments whose unknown outcome was settled later, by how."),
            labels: [("how", how)]
        ).increment()
    }

    /// A payment whose outcome is still not known at the gateway's settlement deadline: now
    /// `unknown`, for an operator (`vault payments settle`). Alert on any increase.
    public func paymentUnknown() {
        registry.makeCounter(
            descriptor: .init(namespace: "vault", metricName: "payments_unknown", unitName: "total", helpText: "Payments reported unknown at the settlement deadline (an operator settles them)."))
            .increment()
    }

    /// What a sweep removed.
    public func purged(_ result: PurgeResult) {
        registry.makeCounter(descriptor: .init(namespace: "vault", metricName: "sweeper_tokens_deleted", unitName: "total", helpText: "Expired tokens deleted by the sweeper."))
            .increment(by: Int64(result.tokensDeleted))
        registry.makeCounter(descriptor: .init(namespace: "vault", metricName: "sweeper_cvcs_dropped", unitName: "total", helpText: "CVCs dropped by the sweeper when their TTL passed."))
            .increment(by: Int64(result.cvcsDropped))
    }

    /// Fingerprints filled in after the gateway was unreachable at tokenize time.
    public func fingerprintsFilled(_ n: Int) {
        registry.makeCounter(
            descriptor: .init(namespace: "vault", metricName: "fingerprints_filled", unitName: "total", helpText: "Token fingerprints filled in after tokenize."))
            .increment(by: Int64(n))
    }

    /// A sweep that failed (store unreachable).
    public func sweepFailed() {
        registry.makeCounter(descriptor: .init(namespace: "vault", metricName: "sweeper_failures", unitName: "total", helpText: "Sweeps that failed.")).increment()
    }

    /// The exposition text.
    public func exposition() -> [UInt8] { registry.emitToBuffer() }
}

/// Counts and times every request, refused ones included (it runs before the peer check).
public struct MetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: SidecarMetrics

    public init(metrics: SidecarMetrics) { self.metrics = metrics }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        do {
            let response = try await next(request, context)
            metrics.request(
                route: context.endpointPath, method: request.method.rawValue, status: response.status.code,
                duration: ContinuousClock.now - start)
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            let code = (error as? APIError)?.code.rawValue ?? "HTTP_\(status)"
            metrics.request(
                route: context.endpointPath, method: request.method.rawValue, status: status,
                duration: ContinuousClock.now - start, errorCode: code)
            throw error
        }
    }
}
