import Foundation
import Hummingbird
import Logging
import VaultCrypto

/// One check of a server's readiness (`GET /v1/health/ready`): a name (`store`, `gateway`,
/// `keys`, `processor`) and a cheap real probe of what it names.
public struct ReadinessCheck: Sendable {
    /// What a check found: ok (with an optional detail for people), or failed with a reason (plain
    /// words, never card data or key bytes).
    public enum Outcome: Sendable, Equatable {
        case ok(String?)
        case failed(String)

        public var isOK: Bool { if case .ok = self { true } else { false } }
    }

    public let name: String
    let probe: @Sendable () async -> Outcome

    public init(_ name: String, _ probe: @escaping @Sendable () async -> Outcome) {
        self.name = name
        self.probe = probe
    }
}

/// A server's readiness: its checks, run concurrently, each given `timeout` (one that has not
/// answered by then fails, and the answer does not wait for it), the result kept for `maxAge`
/// so that probes, however many, cost at most one round of checks a second. Changes are logged
/// (not ready: warning with the failing checks; ready again: notice).
///
/// Answer (deploy/README.md, "Health and readiness"):
/// - 200 `{"status":"ready","checks":{"store":{"status":"ok"},…}}`
/// - 503 `{"error":{"code":"NOT_READY","message":"not ready: gateway: …"},"status":"not_ready",
///   "checks":{"gateway":{"status":"failed","reason":"…"},…}}` (with `Retry-After`, from
///   `ConventionsMiddleware`).
public final class Readiness: Sendable {
    /// The checks' results, in the order of the checks.
    public struct Report: Sendable, Equatable {
        public struct Result: Sendable, Equatable {
            public let name: String
            public let outcome: ReadinessCheck.Outcome
        }

        public let results: [Result]

        public var isReady: Bool { results.allSatisfy(\.outcome.isOK) }

        /// `gateway: <reason>; store: <reason>` for the failed checks.
        public var failures: String {
            results.compactMap { r in
                if case .failed(let why) = r.outcome { return "\(r.name): \(why)" }
                return nil
            }.joined(separator: "; ")
        }

        /// The `"checks"` object.
        var checksJSON: String {
            var out = "{"
            for (i, r) in results.enumerated() {
                if i > 0 { out += "," }
                JSONOut.string(r.name, into: &out)
                switch r.outcome {
                case .ok(let detail):
                    out += ":{\"status\":\"ok\""
                    if let detail {
                        out += ",\"detail\":"
                        JSONOut.string(detail, into: &out)
                    }
                case .failed(let why):
                    out += ":{\"status\":\"failed\",\"reason\":"
                    JSONOut.string(why, into: &out)
                }
                out += "}"
            }
            return out + "}"
        }

        /// The answer of `GET /v1/health/ready`: 200 when every check passed, else 503 `NOT_READY`.
        public var response: Response {
            if isReady { return JSONOut.response(.ok, "{\"status\":\"ready\",\"checks\":\(checksJSON)}") }
            var body = "{\"error\":{\"code\":\"\(ErrorCode.notReady.rawValue)\",\"message\":"
            JSONOut.string("not ready: " + failures, into: &body)
            body += "},\"status\":\"not_ready\",\"checks\":\(checksJSON)}"
            return JSONOut.response(HTTPResponse.Status(code: ErrorCode.notReady.status), body)
        }
    }

    /// The health routes (liveness `GET /v1/health`, readiness `GET /v1/health/ready`): both
    /// servers answer them to their own uid and to root too, whatever their allow lists say, so
    /// that probes run as the service's user (`vault health`) work. They answer statuses only.
    public static let probePaths: Set<String> = ["/v1/health", "/v1/health/ready"]

    let checks: [ReadinessCheck]
    let timeout: Duration
    let cache: Cache
    let logger: Logger?

    /// - Parameters:
    ///   - timeout: how long one check may take before it counts as failed.
    ///   - maxAge: how long a result is answered again without running the checks.
    public init(_ checks: [ReadinessCheck], timeout: Duration = .seconds(2), maxAge: Duration = .seconds(1), logger: Logger? = nil) {
        self.checks = checks
        self.timeout = timeout
        self.cache = Cache(maxAge: maxAge)
        self.logger = logger
    }

    /// The current report: the cached one while it is fresh, else one new round of checks (a
    /// request arriving while a round runs waits for that round).
    public func report() async -> Report {
        await cache.report(logger: logger) { await self.run() }
    }

    /// The answer of `GET /v1/health/ready`.
    public func response() async -> Response { await report().response }

    private func run() async -> Report {
        let timeout = self.timeout
        let results = await withTaskGroup(of: (Int, ReadinessCheck.Outcome).self) { group in
            for (i, check) in checks.enumerated() {
                group.addTask { (i, await Self.within(timeout, check.probe)) }
            }
            var outcomes = [ReadinessCheck.Outcome?](repeating: nil, count: checks.count)
            for await (i, outcome) in group { outcomes[i] = outcome }
            return outcomes
        }
        return Report(results: zip(checks, results).map { Report.Result(name: $0.name, outcome: $1 ?? .failed("not run")) })
    }

    /// Runs `probe`, answering `.failed` after `timeout` if it has not answered by then; a probe
    /// that never answers is left to finish (or fail) on its own, not waited for.
    static func within(_ timeout: Duration, _ probe: @escaping @Sendable () async -> ReadinessCheck.Outcome) async -> ReadinessCheck.Outcome {
        let gate = Gate()
        return await withCheckedContinuation { continuation in
            gate.arm(continuation)
            let work = Task { gate.open(await probe()) }
            Task {
                try? await Task.sleep(for: timeout)
                if gate.open(.failed("no answer within \(timeout.seconds) s")) { work.cancel() }
            }
        }
    }

    /// The first of the probe and the timer to finish resumes the caller; the other is ignored.
    final class Gate: @unchecked Sendable {
        private let lock = NSLock()
        private var continuation: CheckedContinuation<ReadinessCheck.Outcome, Never>?
        private var pending: ReadinessCheck.Outcome?
        private var done = false

        func arm(_ c: CheckedContinuation<ReadinessCheck.Outcome, Never>) {
            lock.withLock {
                if let pending { c.resume(returning: pending) } else { continuation = c }
            }
        }

        /// Whether this call was the first.
        @discardableResult
        func open(_ outcome: ReadinessCheck.Outcome) -> Bool {
            lock.withLock {
                guard !done else { return false }
                done = true
                if let continuation { continuation.resume(returning: outcome) } else { pending = outcome }
                continuation = nil
                return true
            }
        }
    }

    /// The last report and its age; one round at a time; logs changes.
    actor Cache {
        let maxAge: Duration
        var last: (at: ContinuousClock.Instant, report: Report)?
        var running: Task<Report, Never>?

        init(maxAge: Duration) { self.maxAge = maxAge }

        func report(logger: Logger?, _ run: @escaping @Sendable () async -> Report) async -> Report {
            if let last, last.at.duration(to: .now) < maxAge { return last.report }
            if let running { return await running.value }
            let task = Task { await run() }
            running = task
            let report = await task.value
            running = nil
            let before = last?.report
            last = (.now, report)
            if !report.isReady, before?.failures != report.failures {
                logger?.warning("not ready", metadata: ["failed": "\(report.failures)"])
            } else if report.isReady, let before, !before.isReady {
                logger?.notice("ready again")
            }
            return report
        }
    }
}

extension Duration {
    /// Whole and fractional seconds, for messages (`2`, `0.5`).
    var seconds: String {
        let (s, atto) = components
        let ms = atto / 1_000_000_000_000_000
        return ms == 0 ? "\(s)" : "\(Double(s) + Double(ms) / 1000)"
    }
}
