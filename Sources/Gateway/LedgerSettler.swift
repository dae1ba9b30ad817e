import Foundation
import Logging
import ServiceLifecycle
import Store

/// The gateway's background settlement (docs/errors.md "Unknown outcomes"), a service of its
/// ServiceGroup. Every `interval`:
/// - the relay asks its status query about its due rows (`RelayProcessor.settleDue`): rows left
///   unknown by a call, and rows a gateway left `sending` when it died mid-call;
/// - rows past their deadline are given up, once whichever gateway of the store sees them first:
///   `unknown` for good, with an error log line an operator alerts on ("payment outcome unknown
///   after the settlement deadline", with `payment` and `reason`), then settled by hand
///   (`vault payments settle`);
/// - the ledger gauges are refreshed (`vault_gateway_ledger_unsettled`,
///   `vault_gateway_ledger_unknown_past_deadline`).
///
/// Rows without a status query wait: the sidecar re-posts them when the template allows a
/// re-send (it holds the envelope; the gateway never keeps a card), or they reach the deadline.
public struct LedgerSettler: Service {
    let ledger: LedgerStore
    let relay: RelayProcessor?
    let metrics: GatewayMetrics
    let interval: Duration
    let logger: Logger
    /// The deadline of a row that has none (imported from an earlier version's ledger file).
    let defaultDeadline: TimeInterval
    let now: @Sendable () -> Date

    public init(
        ledger: LedgerStore, processor: any PaymentProcessor, metrics: GatewayMetrics, interval: Duration = .seconds(2),
        logger: Logger, now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.ledger = ledger
        relay = processor as? RelayProcessor
        self.metrics = metrics
        self.interval = interval
        self.logger = logger
        defaultDeadline = relay?.settle.deadline ?? RelayTemplate.Settlement().deadline
        self.now = now
    }

    public func run() async throws {
        try? await cancelWhenGracefulShutdown {
            // The first round after one interval: the store's client (a sibling service) is
            // running by then.
            while !Task.isCancelled {
                try await Task.sleep(for: interval)
                await tick()
            }
        }
    }

    /// One round (what `run` does every `interval`).
    public func tick() async {
        if let relay { await relay.settleDue() }
        do {
            let t = now()
            for row in try await ledger.pastDeadline(now: t, defaultDeadline: defaultDeadline) {
                let reason = row.reason ?? RelayProcessor.neverAnswered
                guard try await ledger.giveUp(row.paymentID, attempts: row.attempts, reason: reason, now: t) else { continue }
                logger.error("payment outcome unknown after the settlement deadline", metadata: [
                    "payment": "\(row.paymentID)", "reason": "\(reason)", "attempts": "\(row.attempts)", "processor": "\(row.processor)",
                ])
            }
            let counts = try await ledger.unsettledCount(now: now())
            metrics.ledger(unsettled: counts.unsettled, pastDeadline: counts.pastDeadline)
        } catch {
            logger.warning("settling: the ledger failed", metadata: ["error": "\(error.code)"])
        }
    }
}
