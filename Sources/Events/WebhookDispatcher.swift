import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import ServiceLifecycle
import Store
import VaultCrypto

/// Delivers the outbox's events to the webhook endpoint (docs/events.md "Webhooks"), as a service
/// of the sidecar:
///
/// - One deliverer per store: the sidecar holding the `webhook` lease (30 s by the database's
///   clock, renewed at half of it; a batch starts attempts for 5 s at most, so it ends inside the
///   lease; outcomes are recorded only while the lease is held; given up at a graceful stop, taken
///   over by another sidecar of the store once it lapses). Holders are named by host name and
///   socket path: sidecars sharing a store need distinct ones.
/// - In order per object: only the earliest pending event of an object is ever sent, so an
///   object's later event waits until the earlier one was delivered. Different objects go in
///   parallel (at most `parallel` requests at once).
/// - At least once, never a second id: an event is marked delivered after its endpoint answered
///   2xx; a deliverer killed in between sends it again, with the same id and body. Receivers
///   deduplicate by `id`.
/// - Retries: any other answer, a timeout or no connection is retried after an exponential
///   backoff (1 s doubling, up to `maxBackoff`) with jitter (each delay drawn from its upper half),
///   for as long as the event is kept (`retention`). Redirects are not followed.
public struct WebhookDispatcher: Service {
    public struct Configuration: Sendable {
        public var endpoint: WebhookEndpoint
        public var secret: WebhookSecret
        /// Who holds the lease: stable for one sidecar (host and socket), so a restarted sidecar
        /// takes its lease back at once.
        public var holder: String
        public var maxBackoff: TimeInterval = 300
        public var timeout: TimeInterval = 10
        public var poll: Duration = .milliseconds(250)
        /// The lease's term: longer than a batch can take (`batchWindow` plus one attempt's
        /// `timeout`), renewed at half of it.
        public var lease: TimeInterval = 30
        /// New attempts of a batch start within this window; then the batch ends.
        public var batchWindow: TimeInterval = 5
        public var batch = 64
        public var parallel = 8

        public init(endpoint: WebhookEndpoint, secret: WebhookSecret, holder: String) {
            self.endpoint = endpoint
            self.secret = secret
            self.holder = holder
        }
    }

    static let leaseName = "webhook"

    let events: EventStore
    let configuration: Configuration
    let metrics: WebhookMetrics?
    let logger: Logger
    let client: HTTPClient

    public init(events: EventStore, configuration: Configuration, metrics: WebhookMetrics?, logger: Logger) {
        self.events = events
        self.configuration = configuration
        self.metrics = metrics
        self.logger = logger
        var http = HTTPClient.Configuration(
            redirectConfiguration: .disallow, timeout: .init(connect: .seconds(2), read: .seconds(Int64(max(1, configuration.timeout)))))
        http.connectionPool.retryConnectionEstablishment = false
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: http)
    }

    public func run() async throws {
        try? await cancelWhenGracefulShutdown {
            var leasedUntil = Date.distantPast, nextTry = Date.distantPast, failing = false
            while !Task.isCancelled {
                var sent = 0
                do throws(StoreError) {
                    let now = Date()
                    // The holder renews at half its lease; another sidecar asks every third of one.
                    if leasedUntil.timeIntervalSince(now) < configuration.lease / 2, now >= nextTry {
                        let until = now.addingTimeInterval(configuration.lease)
                        let held = try await events.lease(Self.leaseName, holder: configuration.holder, seconds: Int(configuration.lease))
                        leasedUntil = held ? until : .distantPast
                        nextTry = held ? .distantPast : now.addingTimeInterval(configuration.lease / 3)
                        metrics?.leaseHeld(held)
                    }
                    if leasedUntil > now { sent = try await deliverDue() }
                    if failing { logger.notice("webhook delivery works again") }
                    failing = false
                } catch {
                    if !failing { logger.warning("webhook delivery paused: the store failed", metadata: ["error": "\(error.code)"]) }
                    failing = true
                    leasedUntil = .distantPast
                }
                if sent == 0 { try await Task.sleep(for: configuration.poll) }
            }
        }
        // Another sidecar of the store takes over at once (a no-op when this one did not hold it).
        try? await events.release(Self.leaseName, holder: configuration.holder)
        metrics?.leaseHeld(false)
        try? await client.shutdown()
    }

    /// Sends the events due now (one batch); how many were attempted.
    @discardableResult
    public func deliverDue(now: Date = Date()) async throws(StoreError) -> Int {
        let due = try await events.due(now: now, limit: configuration.batch)
        guard !due.isEmpty else { return 0 }
        // Attempts start within `batchWindow`, so the batch ends well inside the lease.
        let closes = Date().addingTimeInterval(configuration.batchWindow)
        let outcomes = await withTaskGroup(of: (Int64, EventStore.Outcome).self) { group in
            var results: [(seq: Int64, outcome: EventStore.Outcome)] = []
            var next = due.makeIterator(), running = 0
            while running < configuration.parallel, let e = next.next() {
                group.addTask { (e.seq, await self.attempt(e)) }
                running += 1
            }
            for await result in group {
                results.append(result)
                if Date() < closes, let e = next.next() { group.addTask { (e.seq, await self.attempt(e)) } }
            }
            return results
        }
        try await events.record(outcomes, at: Date(), holder: configuration.holder)
        for (_, outcome) in outcomes {
            switch outcome {
            case .delivered: metrics?.attempt(delivered: true)
            case .failed: metrics?.attempt(delivered: false)
            }
        }
        return outcomes.count
    }

    /// One POST of `event`; its outcome.
    func attempt(_ event: EventRecord) async -> EventStore.Outcome {
        let body = Array(event.json.utf8)
        let timestamp = Int(Date().timeIntervalSince1970)
        var request: HTTPClientRequest
        switch configuration.endpoint.target {
        case .http(let url): request = HTTPClientRequest(url: url)
        case .unix(let socket, let path):
            guard let url = URL(httpURLWithSocketPath: socket, uri: path) else {
                return retry(event, status: nil, "the webhook socket path is not usable")
            }
            request = HTTPClientRequest(url: url.absoluteString)
        }
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "vault-webhooks/\(VaultVersion.string)")
        request.headers.add(name: "Vault-Event-Id", value: event.id)
        request.headers.add(name: "Vault-Signature", value: configuration.secret.signature(body: body, timestamp: timestamp))
        request.body = .bytes(ByteBuffer(bytes: body))
        do {
            let response = try await client.execute(request, timeout: .seconds(Int64(max(1, configuration.timeout))))
            _ = try? await response.body.collect(upTo: 64 * 1024)
            let status = Int(response.status.code)
            if (200..<300).contains(status) { return .delivered(status: status) }
            return retry(event, status: status, "the endpoint answered \(status)")
        } catch {
            return retry(event, status: nil, Self.describe(error))
        }
    }

    func retry(_ event: EventRecord, status: Int?, _ why: String) -> EventStore.Outcome {
        .failed(status: status, error: why, retryAt: Date().addingTimeInterval(Self.backoff(attempt: event.delivery.attempts + 1, max: configuration.maxBackoff)))
    }

    /// The delay after the `attempt`-th failed attempt: 1 s doubling per attempt up to `max`,
    /// drawn at random from the upper half (jitter, so a recovered endpoint is not hit by every
    /// event at once).
    public static func backoff(attempt: Int, max: TimeInterval, random: Double = Double.random(in: 0...1)) -> TimeInterval {
        let ceiling = Swift.min(max, pow(2, Double(Swift.min(attempt, 40) - 1)))
        return ceiling / 2 + ceiling / 2 * random
    }

    /// Why an attempt got no answer, in the vault's words (no receiver text).
    static func describe(_ error: any Error) -> String {
        if let io = error as? IOError { return "no connection (errno \(io.errnoCode))" }
        if let e = error as? HTTPClientError {
            if e == .deadlineExceeded || e == .readTimeout { return "timed out" }
            if e == .connectTimeout { return "no connection (connect timed out)" }
            if e == .remoteConnectionClosed { return "the endpoint closed the connection" }
            return "the request failed (\(e))"
        }
        return "the request failed"
    }
}
