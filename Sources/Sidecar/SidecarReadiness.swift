import Logging
import SocketHTTP
import Store
import Tokenizer

/// The sidecar's readiness checks (`GET /v1/health/ready`), each a cheap real probe:
/// - `store`: one query through the token store's pool or client (`Database.ping()`);
/// - `gateway`, when one is configured: `GET /v1/health` on the gateway's socket, within the
///   readiness timeout (down, refusing this sidecar or not answering: not ready);
/// - `keys`: the public keys in use (loaded at start, swapped whole by a reload): the primary kid
///   and how many kids the ring lists.
enum SidecarReadiness {
    static func make(tokenizer: Tokenizer, gateway: GatewayClient?, logger: Logger? = nil) -> Readiness {
        var checks = [
            ReadinessCheck("store") {
                do throws(StoreError) {
                    try await tokenizer.store.ping()
                    return .ok(nil)
                } catch {
                    return .failed(error.message)
                }
            }
        ]
        if let gateway {
            checks.append(ReadinessCheck("gateway") {
                do throws(GatewayClient.Failure) {
                    try await gateway.checkHealth()
                    return .ok(nil)
                } catch {
                    return .failed(error.reason)
                }
            })
        }
        let keys = tokenizer.keys
        checks.append(ReadinessCheck("keys") {
            let snapshot = keys.snapshot
            return .ok("primary \(snapshot.primary.kid), \(snapshot.statuses.count) kids")
        })
        return Readiness(checks, logger: logger)
    }
}
