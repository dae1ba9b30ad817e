import Logging
import SocketHTTP
import Store

/// The gateway's readiness checks (`GET /v1/health/ready`), each a cheap real probe:
/// - `store`: one query on the processor ledger's store (`LedgerStore.ping()`);
/// - `keys`: the key ring in use opens at least one kid (the kids it opens, and whether the
///   fingerprint key is there, as detail);
/// - `processor`: the configured processor (its name as detail). The processor itself is never
///   called: a probe must not reach a payment network.
enum GatewayReadiness {
    static func make(openers: Openers, processor: any PaymentProcessor, logger: Logger? = nil) -> Readiness {
        let ledger = processor.ledger, name = processor.name
        return Readiness([
            ReadinessCheck("store") {
                do throws(StoreError) {
                    try await ledger.ping()
                    return .ok(nil)
                } catch {
                    return .failed(error.message)
                }
            },
            ReadinessCheck("keys") {
                let opener = openers.current
                let kids = opener.ring.openingKids.map(\.rawValue)
                guard !kids.isEmpty else { return .failed("no secret key opens anything (check the key ring)") }
                // The fingerprint kids show which keys a reload loaded (a rotation: primary first).
                let fingerprint = opener.fingerprintKeys.map { "present (\($0.all.map(\.kid).joined(separator: ",")))" } ?? "absent"
                return .ok("opens \(kids.joined(separator: ",")); fingerprint key \(fingerprint)")
            },
            ReadinessCheck("processor") { name.isEmpty ? .failed("no processor configured") : .ok(name) },
        ], logger: logger)
    }
}
