import Audit
import Foundation
import GatewayAPI
import Hummingbird
import Logging
import SocketHTTP
import ServiceLifecycle
import Store
import VaultCrypto
import VaultOpen

/// `POST /v1/fingerprints` `{"envelopes":[{…v1…}, …]}` (at most `GatewayAPI.maxFingerprintBatch`)
/// → 200 `{"data":[{"fingerprint":"fp1_<fkid>_<64 hex>","fingerprints":[…]} | {"withheld":{…}} | {"error":{"code","message"}}, …]}`,
/// in order: the primary fingerprint key's, and the card's under every key held (docs/key-files.md).
///
/// The sidecar's way to a token's fingerprint (docs/threat-model.md): each envelope is opened
/// and checked exactly as for a payment (a tampered envelope, or metadata that does not match
/// the card, is refused here, at tokenize time), and only the keyed hash of its PAN goes back.
/// A fingerprint is an oracle (DESIGN §9): the guessing limit (`GuessLimit`) withholds the
/// fingerprint of a new card whose truncation group is past its limit. 503
/// `FINGERPRINT_KEY_MISSING` when this gateway has no `fingerprint.fk`.
struct FingerprintController: Sendable {
    let openers: Openers
    let metrics: GatewayMetrics
    let guesses: GuessLimit?

    static let endpoints: [GatewayEndpoint<Self>] = [
        .init(GatewayRoute(.post, "/v1/fingerprints", action: "fingerprint")) { c, request, context in
            try await c.fingerprints(request, peer: (context as? VaultRequestContext)?.peer?.uid)
        }
    ]

    func addRoutes<Context: RequestContext>(to group: RouterGroup<Context>) { group.add(Self.endpoints, controller: self) }

    func fingerprints(_ request: Request, peer: UInt32?) async throws -> Response {
        let limit = GatewayAPI.maxFingerprintBatch * GatewayAPI.maxBodyBytes
        let envelopes = try await JSONBody.parse(request, limit: limit, FingerprintBatch.parse(from:))
        let opener = openers.current
        guard opener.fingerprintKey != nil else {
            throw APIError(.fingerprintKeyMissing, "this gateway has no fingerprint key: make one with `vault keygen --fingerprint --out DIR` in its keys directory")
        }
        var cards: [EnvelopeOpener.GuessingCard?] = []
        var entries = envelopes.map { envelope -> FingerprintBatch.Entry in
            do throws(VaultError) {
                let card = try opener.guessingCard(of: envelope)
                metrics.opened("ok")
                cards.append(card)
                return .fingerprint(card.fingerprints[0], all: card.fingerprints)
            } catch {
                metrics.opened(error.code.rawValue)
                cards.append(nil)
                return .refused(error.code, error.message)
            }
        }
        if let guesses { try await guesses.apply(to: &entries, cards: cards, peer: peer) }
        let answered = entries.count { if case .fingerprint = $0 { true } else { false } }
        metrics.fingerprinted(answered)
        AuditNote.current?.detail = [("envelopes", envelopes.count), ("answered", answered), ("withheld", entries.count { $0 == .withheld })]
        return JSONOut.response(.ok, FingerprintBatch.answerJSON(entries))
    }
}

/// The gateway's guessing limit (DESIGN §9, docs/threat-model.md "The fingerprint oracle"): at
/// most `limit` distinct cards per truncation group (visible prefix, last 4, length) fingerprinted
/// in a sliding `window`, counted in the gateway's store (`FingerprintGuesses`, shared by gateways
/// on one PostgreSQL). Once a group's window is full, every fingerprint of the group is withheld
/// (a card counted earlier too: were it answered, it would stand out among the withheld guesses):
/// the entry says `withheld` (the sidecar makes the token without a fingerprint and asks again
/// later). Every withheld answer counts in `vault_gateway_fingerprints_withheld_total`; each card's
/// first withholding in the window writes an audit line (`fingerprint_withheld`: the caller's uid,
/// the group's keyed name, the count) and logs a warning.
struct GuessLimit: Sendable {
    let store: FingerprintGuesses
    /// Distinct cards per group in the window, 1 to 1,000,000 (`gateway.fingerprint_guess_limit`).
    let limit: Int
    /// Seconds (`gateway.fingerprint_guess_window`).
    let window: Int
    let metrics: GatewayMetrics
    let audit: AuditLog?
    let logger: Logger
    let now: @Sendable () -> Date

    /// Withholds, in `entries`, the fingerprints the limit does not admit. A store that cannot
    /// answer fails the call (503): a fingerprint is never answered past a limit it cannot check.
    func apply(to entries: inout [FingerprintBatch.Entry], cards: [EnvelopeOpener.GuessingCard?], peer: UInt32?) async throws {
        let asked = cards.enumerated().compactMap { i, c in c.map { (index: i, group: $0.group, member: $0.member) } }
        guard !asked.isEmpty else { return }
        let t = Int64((now().timeIntervalSince1970 * 1000).rounded(.down))
        let verdicts: [FingerprintGuesses.Verdict]
        do throws(StoreError) {
            verdicts = try await store.admit(asked.map { ($0.group, $0.member) }, limit: limit, window: Int64(window) * 1000, now: t)
        } catch {
            throw APIError(.storeUnavailable, "the guessing limit's counters cannot be read: \(error.message)")
        }
        var withheld = 0
        for (a, v) in zip(asked, verdicts) where !v.admitted {
            entries[a.index] = .withheld
            // Every withheld answer counts in the metric (a count of first withholdings only would
            // tell a guesser reading /metrics which guess was withheld before); the audit line and
            // the log, which only the gateway zone reads, once per card and window.
            withheld += 1
            guard v.firstWithheld else { continue }
            audit?.record(AuditEvent(action: "fingerprint_withheld", outcome: ErrorCode.fingerprintWithheld.rawValue, uid: peer, group: "grp_" + a.group,
                                     detail: [("distinct_cards", v.count), ("limit", limit), ("window_seconds", window)]))
            logger.warning("fingerprint withheld: truncation group past the guessing limit", metadata: [
                "group": "grp_\(a.group)", "distinct_cards": "\(v.count)", "limit": "\(limit)", "peer_uid": "\(peer.map(String.init) ?? "-")",
            ])
        }
        if withheld > 0 { metrics.withheld(withheld) }
    }
}

/// Deletes the guessing limit's rows that left the window (`FingerprintGuesses.prune`), every
/// ten minutes: groups nobody asks about again would otherwise keep theirs.
struct GuessPruner: Service {
    let store: FingerprintGuesses
    let windowSeconds: Int
    let logger: Logger
    var interval: Duration = .seconds(600)

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do throws(StoreError) {
                    try await store.prune(window: Int64(windowSeconds) * 1000, now: Int64(Date().timeIntervalSince1970 * 1000))
                } catch {
                    logger.warning("the guessing limit's old rows could not be pruned", metadata: ["error": "\(error.code)"])
                }
                try await Task.sleep(for: interval)
            }
        }
    }
}
