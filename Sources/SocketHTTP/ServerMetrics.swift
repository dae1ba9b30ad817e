import Audit
import Foundation
import HTTPTypes
import Hummingbird
import NIOHTTP1
import Prometheus
import Synchronization
import VaultCrypto

/// The metrics both servers export (docs/metrics.md): build info, requests by route template,
/// error codes, the last key reload, the primary key's age and audit write failures. The sidecar
/// (`SidecarMetrics`) and the gateway (`GatewayMetrics`) add their own families to `registry`.
///
/// Labels carry only values from fixed sets: the matched route template (never the request path),
/// the method (one of the known ones, else `OTHER`), the status code, the stable error code, the
/// component, the version and the primary key's kid. Nothing a caller sends can become a label.
public final class ServerMetrics: Sendable {
    /// The registry behind `GET /metrics`.
    public let registry: PrometheusCollectorRegistry
    /// `sidecar` or `gateway`.
    public let component: String

    /// Request durations, up to the gateway's 30 s timeout (a payment that waits for the relay's
    /// settlement within the call lands in the last buckets, not in +Inf).
    public static let durationBuckets: [Duration] = [
        .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5),
        .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
        .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10), .seconds(30),
    ]

    /// The request counter and latency histogram of one route/method/status, made once.
    private struct RequestMetrics: Sendable {
        let counter: Counter
        let duration: DurationHistogram
    }
    private let requests = Mutex<[String: RequestMetrics]>([:])

    private let reloadSuccess: Gauge
    private let reloadTimestamp: Gauge
    private let auditFailures: Counter
    private let clock: @Sendable () -> Date

    /// What is read at scrape time: the audit log (its failures counted so far, of which
    /// `exported` are in the counter) and the primary key (its gauge and creation time).
    private struct ScrapeState: Sendable {
        var audit: AuditLog?
        var exported = 0
        var primary: (kid: String, created: Date, gauge: Gauge)?
    }
    private let state = Mutex(ScrapeState())

    /// - Parameters:
    ///   - component: `sidecar` or `gateway` (the `component` label of `vault_build_info`).
    ///   - now: the clock of key ages and reload times (tests set it).
    public init(component: String, registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(), now: @escaping @Sendable () -> Date = Date.init) {
        self.registry = registry
        self.component = component
        self.clock = now
        registry.makeGauge(
            descriptor: .init(namespace: "vault", metricName: "build_info", unitName: "", helpText: "Always 1: the version and component of this server."),
            labels: [("version", VaultVersion.string), ("component", component)]
        ).set(1.0)
        reloadSuccess = registry.makeGauge(descriptor: .init(
            namespace: "vault", metricName: "reload_last_success", unitName: "",
            helpText: "1 when the last key load (start-up or SIGHUP reload) succeeded, 0 when it failed and the keys in use were kept."))
        reloadTimestamp = registry.makeGauge(descriptor: .init(
            namespace: "vault", metricName: "reload_last_timestamp", unitName: "seconds",
            helpText: "Unix time of the last key load (start-up or SIGHUP reload), successful or not."))
        auditFailures = registry.makeCounter(descriptor: .init(
            namespace: "vault", metricName: "audit_write_failures", unitName: "total",
            helpText: "Audit log lines that could not be written (I/O errors, a closed log): the event is not on record."))
        // The store's codes start at zero, so an alert's increase() has a series from the start.
        for code in ErrorCode.allCases where code.rawValue.hasPrefix("STORE_") { storeErrorCounter(code.rawValue) }
        reloaded(success: true)
    }

    // MARK: Requests

    /// A request answered with `status` after `duration`, and its error code if it failed.
    public func request(route: String?, method: String, status: Int, duration: Duration, errorCode: String? = nil) {
        let route = route ?? "unmatched"
        let method = MethodLabel.label(method)
        let key = "\(route) \(method) \(status)"
        let metrics = requests.withLock { cache in
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
            storeErrorCounter(errorCode).increment()
        }
        if let errorCode {
            registry.makeCounter(
                descriptor: .init(namespace: "vault", metricName: "errors", unitName: "total", helpText: "Error answers, by stable error code (docs/errors.md)."),
                labels: [("code", errorCode)]
            ).increment()
        }
    }

    @discardableResult
    private func storeErrorCounter(_ code: String) -> Counter {
        registry.makeCounter(
            descriptor: .init(namespace: "vault", metricName: "store_errors", unitName: "total", helpText: "Requests that failed in the store, by code."),
            labels: [("code", code)])
    }

    // MARK: Keys and reloads

    /// A key load finished (at start-up, or a SIGHUP reload): `success` false when it failed and
    /// the keys in use were kept.
    public func reloaded(success: Bool) {
        reloadSuccess.set(success ? 1.0 : 0.0)
        reloadTimestamp.set(clock().timeIntervalSince1970)
    }

    /// The primary key now (after a load): its kid and when it was made (the key ring's `created`,
    /// or the key file's modification time where no ring names it). Its age is computed at each
    /// scrape; a new primary replaces the old kid's series.
    public func primaryKey(kid: String, created: Date) {
        state.withLock { s in
            if let old = s.primary, old.kid == kid {
                s.primary = (kid, created, old.gauge)
                return
            }
            if let old = s.primary { registry.unregisterGauge(old.gauge) }
            let gauge = registry.makeGauge(
                descriptor: .init(
                    namespace: "vault", metricName: "key_age", unitName: "seconds",
                    helpText: "Age of the primary key (from the key ring's created time, else the key file's modification time)."),
                labels: [("kid", kid), ("role", "primary")])
            s.primary = (kid, created, gauge)
        }
    }

    // MARK: Audit

    /// The audit log whose write failures `vault_audit_write_failures_total` exports (read at
    /// each scrape from `AuditLog.failures`).
    public func auditLog(_ log: AuditLog?) {
        state.withLock { $0.audit = log; $0.exported = log?.failures ?? 0 }
    }

    // MARK: Exposition

    /// The exposition text, with the values read at scrape time brought up to date first.
    public func exposition() -> [UInt8] {
        let now = clock()
        state.withLock { s in
            if let audit = s.audit {
                let failures = audit.failures
                if failures > s.exported {
                    auditFailures.increment(by: Int64(failures - s.exported))
                    s.exported = failures
                }
            }
            if let p = s.primary { p.gauge.set(max(0, now.timeIntervalSince(p.created)).rounded(.down)) }
        }
        return registry.emitToBuffer()
    }
}

/// Counts and times every request, refused ones included (it runs before the peer check).
public struct MetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: ServerMetrics
    /// The server's routes (as `ConventionsMiddleware` has them): a request no route takes is
    /// counted as it is answered, 404 `ROUTE_NOT_FOUND` or 405 `METHOD_NOT_ALLOWED`. Without
    /// them, as the router throws it (404).
    let conventions: ConventionsMiddleware<Context>?

    public init(metrics: ServerMetrics, routes: [(method: HTTPRequest.Method, path: String)]? = nil) {
        self.metrics = metrics
        self.conventions = routes.map { ConventionsMiddleware(routes: $0) }
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        do {
            let response = try await next(request, context)
            metrics.request(
                route: context.endpointPath, method: request.method.rawValue, status: response.status.code,
                duration: ContinuousClock.now - start)
            return response
        } catch let error as HTTPError where error.status == .notFound && conventions != nil {
            let coded = conventions?.unmatched(request) ?? APIError(.routeNotFound, "no route has this path")
            metrics.request(
                route: context.endpointPath, method: request.method.rawValue, status: coded.status.code,
                duration: ContinuousClock.now - start, errorCode: coded.code.rawValue)
            throw error
        } catch {
            // A body whose framing is malformed is answered 400 REQUEST_MALFORMED by the server
            // (`ParserRefusalBodyHandler`), not 500.
            let malformed = error is HTTPParserError
            let status = malformed ? 400 : (error as? any HTTPResponseError)?.status.code ?? 500
            let code = malformed ? ErrorCode.requestMalformed.rawValue : (error as? APIError)?.code.rawValue ?? "HTTP_\(status)"
            metrics.request(
                route: context.endpointPath, method: request.method.rawValue, status: status,
                duration: ContinuousClock.now - start, errorCode: code)
            throw error
        }
    }
}
