import Foundation
import Testing

/// Fingerprint-key rotation end to end with the real binaries (issue 17, item 2): named
/// fingerprints from the gateway, `vault keys add-fingerprint-key` / `promote-fingerprint-key`
/// with gateway reloads, one search finding a card's tokens under both keys, `vault rewrap
/// --fingerprints`, and the retirement, on SQLite and (with scripts/test) PostgreSQL.
@Suite(.serialized, .ownThread) struct FingerprintRotationCLITests {
    typealias Stack = PaymentsCLITests.Stack

    static var stores: [String] { GatewayCLITests.postgresSocket == nil ? ["sqlite"] : ["sqlite", "postgres"] }

    static func object(_ text: String) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
    }

    /// The gateway's answer for one envelope, asked directly on its socket.
    static func gatewayAnswer(_ s: Stack, _ envelope: String) throws -> [String: Any] {
        let (_, text) = try s.curl(s.gatewaySocket, "POST", "/v1/fingerprints", #"{"envelopes":[\#(envelope)]}"#)
        return (object(text)["data"] as? [[String: Any]])?.first ?? [:]
    }

    /// Sends SIGHUP to the gateway and waits (bounded) until its answers satisfy `done`.
    static func reloadGateway(_ s: Stack, _ envelope: String, until done: ([String: Any]) -> Bool) throws -> [String: Any] {
        kill(s.gateway!.processIdentifier, SIGHUP)
        var answer: [String: Any] = [:]
        for _ in 0..<100 {
            answer = try gatewayAnswer(s, envelope)
            if done(answer) { break }
            usleep(50_000)
        }
        return answer
    }

    static func fingerprint(_ s: Stack, _ token: String) throws -> String? {
        (object(try s.curl(s.sidecarSocket, "GET", "/v1/tokens/\(token)").1)["card"] as? [String: Any])?["fingerprint"] as? String
    }

    static func search(_ s: Stack, _ fingerprint: String) throws -> Set<String> {
        let (status, text) = try s.curl(s.sidecarSocket, "GET", "/v1/tokens?limit=100&fingerprint=\(fingerprint)")
        #expect(status == 200, "\(text)")
        return Set(((object(text)["data"] as? [[String: Any]]) ?? []).compactMap { $0["token"] as? String })
    }

    @Test(arguments: stores)
    func rotateRecomputeRetireNeverSplitsACard(_ backend: String) throws {
        let s = try Stack()
        defer { s.stop(s.sidecar); s.stop(s.gateway); try? FileManager.default.removeItem(atPath: s.dir) }
        let keys = s.dir + "/gateway-keys"
        s.store = backend == "postgres" ? try GatewayCLITests.postgresStore() : "sqlite:\(s.dir)/tokens.sqlite"
        let store = try #require(s.store)
        try s.startGateway()
        try s.startSidecar()
        let envelope = try vault(
            ["seal", "--card", "--key", "\(s.dir)/sidecar-keys/\(s.kid).pub"], input: Data(#"{"number":"4242424242424242","exp_month":12,"exp_year":2030}"#.utf8)
        ).out.trimmingCharacters(in: .whitespacesAndNewlines)

        // One key: the gateway answers the named form; the sidecar stores and answers it.
        let first = try Self.gatewayAnswer(s, envelope)
        let fA = try #require(first["fingerprint"] as? String)
        let a = String(fA.dropFirst(4).prefix(16))
        #expect(fA.hasPrefix("fp1_") && fA.count == 85 && first["fingerprints"] as? [String] == [fA], "\(first)")
        let t1 = try s.tokenize("4242424242424242"), m1 = try s.tokenize("5555555555554444")
        #expect(try Self.fingerprint(s, t1) == fA)

        // Add B and reload: answers stay A's and carry B's too.
        let added = try vault("keys", "add-fingerprint-key", "--keys", keys)
        #expect(added.status == 0, "\(added.stderr)")
        let b = added.out.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(b.count == 16 && b != a && FileManager.default.fileExists(atPath: "\(keys)/fingerprint-\(b).fk"))
        let both = try Self.reloadGateway(s, envelope) { ($0["fingerprints"] as? [String])?.count == 2 }
        #expect(both["fingerprint"] as? String == fA && (both["fingerprints"] as? [String])?.last?.hasPrefix("fp1_\(b)_") == true, "\(both)")
        let fB = try #require((both["fingerprints"] as? [String])?.last)
        let t2 = try s.tokenize("4242424242424242")
        #expect(try Self.fingerprint(s, t2) == fA)

        // Promote B and reload: new tokens get B's fingerprint; one search by either finds all three.
        let promoted = try vault("keys", "promote-fingerprint-key", b, "--keys", keys)
        #expect(promoted.status == 0 && promoted.out.trimmingCharacters(in: .whitespacesAndNewlines) == a, "\(promoted.stderr)")
        let swapped = try Self.reloadGateway(s, envelope) { $0["fingerprint"] as? String == fB }
        #expect(swapped["fingerprints"] as? [String] == [fB, fA], "\(swapped)")
        let ready = try s.curl(s.gatewaySocket, "GET", "/v1/health/ready").1
        #expect(ready.contains("fingerprint key present (\(b),\(a))"), "readiness names the keys loaded, primary first: \(ready)")
        let t3 = try s.tokenize("4242424242424242")
        #expect(try Self.fingerprint(s, t3) == fB)
        #expect(try Self.search(s, fA) == [t1, t2, t3])
        #expect(try Self.search(s, fB) == [t1, t2, t3])
        #expect(try Self.search(s, try #require(try Self.fingerprint(s, m1))) == [m1])

        // Retiring A before the recompute is refused (key ring exit code).
        let early = try vault("keys", "retire-fingerprint-key", a, "--keys", keys, "--store", store)
        #expect(early.status == 12 && early.stderr.contains("KEY_IN_USE"), "\(early.stderr)")

        // The recompute, in the gateway zone: progress lines, counts, nothing left.
        let recompute = try vault(["rewrap", "--fingerprints", "--store", store, "--keys", keys, "--batch", "1"], input: Data())
        #expect(recompute.status == 0, "\(recompute.stderr)")
        #expect(recompute.out.contains("recomputed 3,") && recompute.out.contains("failed 0") && recompute.out.contains("left 0"), "\(recompute.out)")
        #expect(recompute.stderr.contains("rewrap --fingerprints tokens:"), "\(recompute.stderr)")
        let again = try vault(["rewrap", "--fingerprints", "--store", store, "--keys", keys], input: Data())
        #expect(again.status == 0 && again.out.contains("recomputed 0,"), "\(again.out)")
        for t in [t1, t2, t3] { #expect(try Self.fingerprint(s, t) == fB) }
        #expect(try Self.fingerprint(s, m1)?.hasPrefix("fp1_\(b)_") == true)
        #expect(try Self.search(s, fA) == [t1, t2, t3] && Self.search(s, fB) == [t1, t2, t3])

        // Retire A: refused for the primary, done for A; the gateway answers B's only; A's matches nothing.
        let primary = try vault("keys", "retire-fingerprint-key", b, "--keys", keys, "--store", store)
        #expect(primary.status == 12 && primary.stderr.contains("KEY_RING_CHANGE_REFUSED"), "\(primary.stderr)")
        // A kid whose key file is not there (moved away here) changes nothing: no link is forgotten.
        try FileManager.default.moveItem(atPath: "\(keys)/fingerprint-\(a).fk", toPath: "\(s.dir)/a.fk.away")
        let missing = try vault("keys", "retire-fingerprint-key", a, "--keys", keys, "--store", store)
        #expect(missing.status != 0 && missing.stderr.contains("KEY_FILE_NOT_FOUND"), "\(missing.stderr)")
        #expect(try Self.search(s, fA) == [t1, t2, t3])
        try FileManager.default.moveItem(atPath: "\(s.dir)/a.fk.away", toPath: "\(keys)/fingerprint-\(a).fk")
        let retired = try vault("keys", "retire-fingerprint-key", a, "--keys", keys, "--store", store)
        #expect(retired.status == 0, "\(retired.stderr)")
        #expect(!FileManager.default.fileExists(atPath: "\(keys)/fingerprint-\(a).fk"))
        let alone = try Self.reloadGateway(s, envelope) { ($0["fingerprints"] as? [String])?.count == 1 }
        #expect(alone["fingerprints"] as? [String] == [fB], "\(alone)")
        let t4 = try s.tokenize("4242424242424242")
        #expect(try Self.search(s, fA).isEmpty)   // A's links went with A
        #expect(try Self.search(s, fB) == [t1, t2, t3, t4])

        // The sidecar never held a fingerprint key, and its store holds none.
        let sidecarFiles = try FileManager.default.contentsOfDirectory(atPath: s.dir + "/sidecar-keys")
        #expect(!sidecarFiles.contains { $0.hasSuffix(".fk") })
        if backend == "sqlite" {
            let fk = try String(contentsOfFile: "\(keys)/fingerprint.fk", encoding: .utf8)
            let raw = try #require(Data(base64Encoded: String(fk.trimmingCharacters(in: .whitespacesAndNewlines).dropFirst("vault:fk:v1:".count))))
            for file in ["tokens.sqlite", "tokens.sqlite-wal"] {
                guard let bytes = FileManager.default.contents(atPath: "\(s.dir)/\(file)") else { continue }
                #expect(bytes.range(of: raw) == nil && bytes.range(of: Data(fk.utf8.prefix(40))) == nil, "\(file)")
            }
        }
    }
}
