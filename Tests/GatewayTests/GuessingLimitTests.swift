import Audit
import CardRules
import Foundation
import Gateway
import Hummingbird
import HummingbirdTesting
import Logging
import SocketHTTP
import Store
import Testing
import VaultCrypto
import VaultOpen

/// The gateway's guessing limit (issue 37, DESIGN §9): a fingerprint is an oracle, so per truncation
/// group (visible prefix, last 4, length) the gateway answers the fingerprints of at most `limit`
/// distinct cards in a sliding window; a new card past it is withheld, the same card again is not.
@Suite struct GuessingLimitTests {
    /// Luhn-valid numbers that share a visible prefix, last 4 and length: `424242` + a middle + `4242`
    /// (the middle's last digit chosen so that the whole passes).
    static func sameGroup(_ count: Int, prefix: String = "424242", last4: String = "4242", length: Int = 16) -> [String] {
        var out: [String] = []
        var n = 0
        while out.count < count {
            let middle = String(format: "%0\(length - prefix.count - last4.count)d", n)
            n += 1
            let pan = prefix + middle + last4
            if Luhn.isValid(pan.utf8), pan != "4242424242424242" { out.append(pan) }
        }
        return out
    }

    @Test(arguments: LedgerBackend.available)
    func theStoreCountsDistinctCardsPerGroupAcrossGateways(_ backend: LedgerBackend) async throws {
        let dir = NSTemporaryDirectory() + "vault-guesses-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (a, b, cleanup) = try await backend.makeDatabases(dir: dir)
        let one = FingerprintGuesses(database: a), two = FingerprintGuesses(database: b)
        let day: Int64 = 86_400_000, t: Int64 = 1_800_000_000_000
        // While the group has room, a card counted already is answered again and not counted twice.
        let first = try await one.admit([("g", "a"), ("g", "b"), ("g", "a")], limit: 3, window: day, now: t)
        #expect(first == [.init(admitted: true, count: 1), .init(admitted: true, count: 2), .init(admitted: true, count: 2)])
        #expect(try await two.admit([("g", "a"), ("g", "c")], limit: 3, window: day, now: t + 1).map(\.admitted) == [true, true])
        // Full: a new card is withheld (reported the first time only), and so is every card counted
        // before: "answered" among "withheld" would name the stored card. Another group is apart.
        #expect(try await two.admit([("g", "d")], limit: 3, window: day, now: t + 2) == [.init(admitted: false, count: 3, firstWithheld: true)])
        // A counted card's first withholding is reported like a new card's: nothing (answer, metric,
        // audit line, write) tells them apart.
        #expect(try await one.admit([("g", "a"), ("g", "d"), ("h", "d")], limit: 3, window: day, now: t + 3)
            == [.init(admitted: false, count: 3, firstWithheld: true), .init(admitted: false, count: 3), .init(admitted: true, count: 1)])
        #expect(try await one.admit([("g", "e"), ("g", "e")], limit: 3, window: day, now: t + 4).map(\.firstWithheld) == [true, false])
        // In one batch, a new card that fills the group comes before a counted one: that one is withheld.
        #expect(try await one.admit([("k", "a"), ("k", "b")], limit: 2, window: day, now: t).map(\.admitted) == [true, true])
        #expect(try await one.admit([("k", "a")], limit: 3, window: day, now: t + 1).map(\.admitted) == [true])
        #expect(try await one.admit([("k", "c"), ("k", "a"), ("k", "d")], limit: 3, window: day, now: t + 2).map(\.admitted) == [true, false, false])
        // Once the window has passed the first cards, new ones get places again, withheld ones included.
        #expect(try await one.admit([("g", "d")], limit: 3, window: day, now: t + day + 1) == [.init(admitted: true, count: 1)])
        // Two gateways at once on one group never let more than the limit through.
        let base = t + 10 * day
        let verdicts = try await withThrowingTaskGroup(of: Bool.self) { group in
            for i in 0..<16 {
                let store = i % 2 == 0 ? one : two
                group.addTask { try await store.admit([("race", "m\(i)")], limit: 5, window: day, now: base)[0].admitted }
            }
            var admitted = 0
            for try await ok in group where ok { admitted += 1 }
            return admitted
        }
        #expect(verdicts == 5)
        #expect(try await one.count() > 0)
        try await one.prune(window: day, now: base + 2 * day)
        #expect(try await one.count() == 0)
        await cleanup()
    }

    struct App {
        let f = try! GatewayRouteTests.Fixture()
        let key = try! FingerprintKey(secureBytes: SecureBytes(Array(repeating: 6, count: 32)))
        var auditPath: String { f.dir + "/gateway-audit.jsonl" }

        func run(limit: Int, _ body: @escaping @Sendable (any TestClientProtocol) async throws -> Void) async throws {
            let db = try Database(sqlitePath: f.dir + "/gateway.sqlite")
            try await db.migrate()
            let audit = try AuditLog.open(auditPath, process: "gateway")
            defer { audit.close() }
            let router = Router(context: VaultRequestContext.self)
            router.add(middleware: AuditMiddleware(log: audit, actions: GatewayRoutes.auditedActions))
            let threeDS = await ThreeDSValidator(apiKey: GatewayRouteTests.Fixture.threeDSKey, issuer: "vault-sandbox-3ds")
            let metrics = GatewayMetrics()
            GatewayRoutes(
                openers: Openers(EnvelopeOpener(ring: f.ring, fingerprintKeys: FingerprintKeys(primary: key))),
                processor: SandboxProcessor(ledger: LedgerStore(database: db), threeDS: threeDS), metrics: metrics, logger: Logger(label: "test"),
                guessStore: db, limit: limit, windowSeconds: 86_400, audit: audit
            ).register(on: router)
            try await Application(router: router).test(.router, body)
        }
    }

    @Test func theRouteWithholdsNewCardsPastTheLimitAndAuditsThem() async throws {
        let app = App()
        defer { app.f.remove() }
        let pans = Self.sameGroup(5)
        let envelopes = try pans.map { try app.f.envelope($0).json }
        // An envelope an earlier version sealed, with the 8-digit BIN: accepted, the same card.
        var legacy = try app.f.envelope(pans[0])
        legacy.card.bin = String(pans[0].prefix(8))
        let other = try app.f.envelope("4000056655665556").json
        let legacyJSON = legacy.json
        try await app.run(limit: 3) { client in
            let (_, old, oldText) = try await GatewayFingerprintRouteTests.post(client, [legacyJSON])
            let known = try #require((old["data"] as? [[String: Any]])?.first?["fingerprint"] as? String, "\(oldText)")
            let (status, json, text) = try await GatewayFingerprintRouteTests.post(client, envelopes)
            #expect(status == 200, "\(text)")
            let data = json["data"] as? [[String: Any]] ?? []
            #expect(data.count == 5)
            #expect(data[0]["fingerprint"] as? String == known, "\(text)")
            #expect(data[0..<3].allSatisfy { ($0["fingerprint"] as? String)?.hasPrefix("fp1_") == true }, "\(text)")
            for entry in data[3...] {
                #expect((entry["withheld"] as? [String: Any])?["code"] as? String == "FINGERPRINT_WITHHELD", "\(text)")
                #expect(entry["fingerprint"] == nil)
            }
            // The group is full: the first card is withheld too (else it would stand out), the
            // fifth again; a card of another group is answered.
            let (_, again, againText) = try await GatewayFingerprintRouteTests.post(client, [envelopes[0], envelopes[4], other])
            let entries = again["data"] as? [[String: Any]] ?? []
            #expect(entries.count == 3)
            #expect(entries[0]["withheld"] != nil && entries[1]["withheld"] != nil && entries[2]["fingerprint"] is String, "\(againText)")
            for pan in pans { #expect(!text.contains(pan) && !againText.contains(pan)) }
            let metrics = try await client.execute(uri: "/metrics", method: .get) { String(buffer: $0.body) }
            // Every withheld answer: the fourth and the fifth, then the first (counted before) and the fifth again.
            #expect(metrics.contains("vault_gateway_fingerprints_withheld_total 4"), "\(metrics)")
            #expect(metrics.contains("vault_gateway_fingerprints_total 5"), "\(metrics)")
        }
        // The audit log: one line per card withheld, its first time in the window (group by its
        // keyed name, the count, the limit), and each call's line counts the envelopes it carried.
        // No digits of a card.
        let log = try String(contentsOfFile: app.auditPath, encoding: .utf8)
        let withheld = log.split(separator: "\n").filter { $0.contains("\"action\":\"fingerprint_withheld\"") }
        #expect(withheld.count == 3, "\(log)")
        #expect(withheld.allSatisfy { $0.contains("\"group\":\"grp_") && $0.contains("\"distinct_cards\":3") && $0.contains("\"limit\":3") }, "\(log)")
        let calls = log.split(separator: "\n").filter { $0.contains("\"action\":\"fingerprint\"") }
        #expect(calls.count == 3 && calls[1].contains("\"envelopes\":5") && calls[1].contains("\"withheld\":2") && calls[2].contains("\"envelopes\":3"), "\(log)")
        for pan in pans { #expect(!log.contains(pan) && !log.contains(String(pan.prefix(8)))) }
        #expect(AuditVerifier.verify(path: app.auditPath).problem == nil)
    }
}

extension LedgerBackend {
    /// Two databases (two gateways) on one migrated store, and its cleanup.
    func makeDatabases(dir: String) async throws -> (Database, Database, @Sendable () async -> Void) {
        let (a, b, cleanup) = try await make(dir: dir)
        return (a.database, b.database, cleanup)
    }
}
