import Foundation
import Testing

/// Issue 37 with the real binaries: what a token shows of a card, the gateway's guessing limit as
/// a tokenize caller meets it, card-shaped tokens that are never cards, lookups of tokens that do
/// not exist counted per caller, and which roles may dedupe. The attacks at scale are
/// scripts/oracle-drill.
@Suite(.serialized, .ownThread) struct OracleCLITests {
    typealias Stack = PaymentsCLITests.Stack

    static func json(_ text: String) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
    }

    static func tokenize(_ s: Stack, _ pan: String, format: String = "tok") throws -> (Int, [String: Any], String) {
        let (status, body) = try s.curl(
            s.sidecarSocket, "POST", "/v1/tokens", #"{"card":{"number":"\#(pan)","exp_month":12,"exp_year":2030},"token_format":"\#(format)"}"#)
        return (status, json(body), body)
    }

    /// Luhn-valid 16-digit numbers sharing `424242`, a middle, and last 4 `4242`.
    static func sameGroup(_ count: Int) -> [String] {
        var out: [String] = []
        var n = 0
        while out.count < count {
            let pan = "424242" + String(format: "%06d", n) + "4242"
            n += 1
            if luhn(pan), pan != "4242424242424242" { out.append(pan) }
        }
        return out
    }

    static func luhn(_ s: String) -> Bool {
        var sum = 0
        for (i, c) in s.reversed().enumerated() {
            var d = Int(c.asciiValue! - 48)
            if i % 2 == 1 { d *= 2; if d > 9 { d -= 9 } }
            sum += d
        }
        return sum % 10 == 0
    }

    @Test func aTokenizeCallerMeetsTheGuessingLimit() throws {
        let s = try Stack()
        try s.startGateway(processor: ["--processor", "sandbox:" + s.ledger, "--fingerprint-guess-limit", "3", "--audit-log", s.dir + "/gateway-audit.jsonl"])
        try s.startSidecar()
        let pans = Self.sameGroup(6)
        var fingerprints: [String?] = []
        for pan in pans {
            let (status, token, body) = try Self.tokenize(s, pan)
            // Never refused: a guess past the limit still gets its token, without a fingerprint.
            #expect(status == 201, "\(body)")
            let card = token["card"] as? [String: Any] ?? [:]
            #expect(card["bin"] as? String == "424242" && card["last4"] as? String == "4242", "\(body)")
            fingerprints.append(card["fingerprint"] as? String)
            for p in pans { #expect(!body.contains(p)) }
        }
        #expect(fingerprints.prefix(3).allSatisfy { $0 != nil } && fingerprints.dropFirst(3).allSatisfy { $0 == nil }, "\(fingerprints)")
        // The group is full: the first card again is withheld too (were it answered, it would stand
        // out among the withheld guesses), its token made all the same.
        let (againStatus, again, _) = try Self.tokenize(s, pans[0])
        #expect(againStatus == 201 && (again["card"] as? [String: Any])?["fingerprint"] == nil)
        // A card of another group is not held back by this one.
        let (_, other, _) = try Self.tokenize(s, "5555555555554444")
        #expect((other["card"] as? [String: Any])?["fingerprint"] is String)
        // Seen from outside: events, the gateway's metric and its audit line.
        let (_, events) = try s.curl(s.sidecarSocket, "GET", "/v1/events?type=fingerprint.withheld&limit=100")
        let data = Self.json(events)["data"] as? [[String: Any]] ?? []
        #expect(data.count == 4, "one per token made without its fingerprint: \(events)")
        let (_, metrics) = try s.curl(s.gatewaySocket, "GET", "/metrics")
        #expect(metrics.contains("vault_gateway_fingerprints_withheld_total 4"), "\(metrics)")
        let audit = (try? String(contentsOfFile: s.dir + "/gateway-audit.jsonl", encoding: .utf8)) ?? ""
        #expect(audit.components(separatedBy: "\"action\":\"fingerprint_withheld\"").count - 1 == 4, "\(audit)")
        for pan in pans { #expect(!audit.contains(pan) && !events.contains(pan)) }
    }

    @Test func cardShapedTokensAreNeverCardsAndLookupsOfMissingTokensAreLimited() throws {
        let s = try Stack()
        try s.startGateway()
        try s.startSidecar(extra: ["--token-lookup-misses", "5/1h"])
        let (status, made, body) = try Self.tokenize(s, "4242424242424242", format: "card")
        #expect(status == 201, "\(body)")
        let token = try #require(made["token"] as? String)
        #expect(token.count == 16 && token.hasPrefix("424242") && token.hasSuffix("4242") && !Self.luhn(token))
        // The vault itself never takes it for a card: validate says not valid, tokenize refuses it by name.
        let (_, validated) = try s.curl(s.sidecarSocket, "POST", "/v1/validate", #"{"number":"\#(token)"}"#)
        #expect(Self.json(validated)["valid"] as? Bool == false, "\(validated)")
        let (refusedStatus, _, refused) = try Self.tokenize(s, token)
        #expect(refusedStatus == 422 && refused.contains("CARD_NUMBER_IS_TOKEN") && !refused.contains(token), "\(refused)")
        // UnionPay numbers need not pass the Luhn check: no card-shaped token is made for one.
        let (upStatus, _, up) = try Self.tokenize(s, "6200000000000005", format: "card")
        #expect(upStatus == 422 && up.contains("CARD_TOKEN_BRAND_UNSUPPORTED"), "\(up)")
        // Lookups of tokens that do not exist: 5 answered 404, then 429 with Retry-After, even for
        // a token that exists.
        for i in 0..<5 {
            let (miss, missBody) = try s.curl(s.sidecarSocket, "GET", "/v1/tokens/424242\(String(format: "%06d", i))4241")
            #expect(miss == 404, "\(missBody)")
        }
        let (limited, limitedBody) = try s.curl(s.sidecarSocket, "GET", "/v1/tokens/4242420000054241")
        #expect(limited == 429 && limitedBody.contains("VELOCITY_LIMIT"), "\(limitedBody)")
        let headers = try run("/usr/bin/curl", ["-s", "-D", "-", "-o", "/dev/null", "--unix-socket", s.sidecarSocket, "http://vault/v1/tokens/\(token)"])
        #expect(headers.out.contains("429") && headers.out.lowercased().contains("retry-after:"), "\(headers.out)")
    }

    @Test(.enabled(if: getuid() == 0, "needs root to act as a second uid"))
    func aPayCallerMayDedupeATokenizeOnlyCallerMayNot() throws {
        let s = try Stack()
        chmod(s.dir, 0o755)
        try s.startGateway()
        try s.startSidecar(extra: ["--socket-mode", "666", "--allow", "uid:0=pay", "--allow", "uid:65534=tokenize"])
        let request = #"{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2030},"dedupe":true}"#
        let (first, firstBody) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", request)
        #expect(first == 201, "a pay caller saves a card with dedupe: \(firstBody)")
        let (second, secondBody) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", request)
        #expect(second == 200 && Self.json(secondBody)["token"] as? String == Self.json(firstBody)["token"] as? String, "\(secondBody)")
        let (nobody, nobodyBody) = try PaymentsCLITests.asNobody(s, "POST", "/v1/tokens", request)
        #expect(nobody == 403 && nobodyBody.contains("PEER_NOT_ALLOWED") && nobodyBody.contains("dedupe"), "\(nobodyBody)")
    }
}
