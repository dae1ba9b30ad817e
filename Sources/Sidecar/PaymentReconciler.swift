import Logging
import ServiceLifecycle

/// Settles payments left `processing` by a crash or a lost connection: at start and then every
/// `interval`, each payment older than `age` is looked up at the gateway (which is idempotent by
/// payment id) and gets its recorded outcome; one the processor never saw is dropped, nothing
/// having been charged.
public struct PaymentReconciler: Service {
    let payments: PaymentService
    let interval: Duration
    let age: Duration

    public init(payments: PaymentService, interval: Duration = .seconds(15), age: Duration = .seconds(60)) {
        self.payments = payments
        self.interval = interval
        self.age = age
    }

    public func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await payments.reconcile(olderThan: age)
                try await Task.sleep(for: interval)
            }
        }
    }
}
