import GatewayAPI
import Hummingbird
import SocketHTTP
import VaultCrypto
import VaultOpen

/// `POST /v1/fingerprints` `{"envelopes":[{…v1…}, …]}` (at most `GatewayAPI.maxFingerprintBatch`)
/// → 200 `{"data":[{"fingerprint":"fp1_<fkid>_<64 hex>","fingerprints":[…]} | {"error":{"code","message"}}, …]}`,
/// in order: the primary fingerprint key's, and the card's under every key held (docs/key-files.md).
///
/// The sidecar's way to a token's fingerprint (docs/threat-model.md): each envelope is opened
/// and checked exactly as for a payment (a tampered envelope, or metadata that does not match
/// the card, is refused here, at tokenize time), and only the keyed hash of its PAN goes back.
/// 503 `FINGERPRINT_KEY_MISSING` when this gateway has no `fingerprint.fk`.
struct FingerprintController: Sendable {
    let openers: Openers
    let metrics: GatewayMetrics

    static let endpoints: [GatewayEndpoint<Self>] = [
        .init(GatewayRoute(.post, "/v1/fingerprints", action: "fingerprint")) { c, request, _ in try await c.fingerprints(request) }
    ]

    func addRoutes<Context: RequestContext>(to group: RouterGroup<Context>) { group.add(Self.endpoints, controller: self) }

    func fingerprints(_ request: Request) async throws -> Response {
        let limit = GatewayAPI.maxFingerprintBatch * GatewayAPI.maxBodyBytes
        let envelopes = try await JSONBody.parse(request, limit: limit, FingerprintBatch.parse(from:))
        let opener = openers.current
        guard opener.fingerprintKey != nil else {
            throw APIError(.fingerprintKeyMissing, "this gateway has no fingerprint key: make one with `vault keygen --fingerprint --out DIR` in its keys directory")
        }
        var answered = 0
        defer { metrics.fingerprinted(answered) }
        let entries = envelopes.map { envelope -> FingerprintBatch.Entry in
            do throws(VaultError) {
                let all = try opener.fingerprints(of: envelope)
                metrics.opened("ok")
                answered += 1
                return .fingerprint(all[0], all: all)
            } catch {
                metrics.opened(error.code.rawValue)
                return .refused(error.code, error.message)
            }
        }
        return JSONOut.response(.ok, FingerprintBatch.answerJSON(entries))
    }
}
