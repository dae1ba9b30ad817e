import Foundation
import Testing

/// Payments end to end (PaymentsCLITests' stack), when answers are lost and processes die: a
/// confirmation the sidecar missed, concurrent duplicates, a gateway outage, kill -9 of either
/// server mid-payment. Nothing is ever charged twice.
extension PaymentsCLITests {
    /// The gateway finished a 3-D Secure payment but the sidecar never heard (a lost answer): the
    /// next confirmation takes the gateway's recorded outcome instead of waiting forever.
    @Test func aConfirmationTheSidecarMissedIsSettledFromTheGateway() throws {
        let s = try Stack()
        try s.startGateway()
        try s.startSidecar()
        let token = try s.tokenize("4000000000003220")
        let (_, json, _) = try s.pay(token, key: Self.key())
        let id = try #require(json["id"] as? String)
        let url = try #require((json["next_action"] as? [String: Any])?["challenge_url"] as? String)
        let acs = try s.curl(s.sidecarSocket, "POST", url, #"{"action":"SUCCESS"}"#).1
        let jwt = try #require((try JSONSerialization.jsonObject(with: Data(acs.utf8)) as? [String: Any])?["three_ds_result"] as? String)
        // Confirmed at the gateway directly: the sidecar's record still says requires_action.
        let (direct, directBody) = try s.curl(s.gatewaySocket, "POST", "/v1/authorizations/\(id)/confirm", #"{"three_ds_result":"\#(jwt)"}"#)
        #expect(direct == 200, "\(directBody)")
        #expect(try s.curl(s.sidecarSocket, "GET", "/v1/payments/\(id)").1.contains(#""status":"requires_action""#))
        let (settled, settledBody) = try s.curl(s.sidecarSocket, "POST", "/v1/payments/\(id)/confirm", #"{"three_ds_result":"\#(jwt)"}"#)
        #expect(settled == 200 && settledBody.contains(#""status":"succeeded""#), "\(settledBody)")
        #expect(try s.curl(s.sidecarSocket, "GET", "/v1/tokens/\(token)").0 == 404)
        #expect(try s.charges(id) == 1)
    }

    /// Duplicates of one request at once make one payment and one charge.
    @Test func concurrentDuplicatesChargeOnce() throws {
        let s = try Stack()
        try s.startGateway()
        try s.startSidecar()
        let token = try s.tokenize("4242424242424242")
        let key = Self.key()
        let ids = Locked<[String]>([])
        let group = DispatchGroup()
        for _ in 0..<12 {
            group.enter()
            Thread {
                if let (status, json, _) = try? s.pay(token, key: key), status == 200 || status == 201, let id = json["id"] as? String {
                    ids.update { $0.append(id) }
                }
                group.leave()
            }.start()
        }
        group.wait()
        #expect(ids.value.count == 12)
        #expect(Set(ids.value).count == 1)
        #expect(try s.charges() == 1)
    }

    /// With the gateway down nothing is charged and the same key works once it is back.
    @Test func gatewayOutageChargesNothingAndTheKeyCanBeRetried() throws {
        let s = try Stack()
        try s.startSidecar()
        let token = try s.tokenize("4242424242424242")
        let key = Self.key()
        let (down, _, body) = try s.pay(token, key: key)
        #expect(down == 503 && body.contains("GATEWAY_UNAVAILABLE"), "\(body)")
        try s.startGateway()
        let (up, json, upBody) = try s.pay(token, key: key)
        #expect(up == 201 && json["status"] as? String == "succeeded", "\(upBody)")
        #expect(try s.charges() == 1)
    }

    /// kill -9 of the gateway while payments are in flight: requests in the air stay
    /// `processing` (outcome unknown) until the restarted gateway is asked; nothing is charged
    /// twice and every key ends with one payment.
    @Test func killDashNineOfTheGatewayNeverChargesTwice() throws {
        let s = try Stack()
        try s.startGateway()
        try s.startSidecar(extra: ["--reconcile-after", "1"])
        let tokens = try (0..<40).map { _ in try s.tokenize("4242424242424242") }
        let keys = tokens.map { _ in Self.key() }
        let answered = Locked<[String: Int]>([:])
        let group = Self.payConcurrently(s, tokens, keys) { i, answer in answered.update { $0[keys[i]] = answer?.0 ?? 0 } }
        for _ in 0..<400 where answered.value.count < tokens.count / 3 { usleep(5_000) }
        s.stop(s.gateway, signal: SIGKILL)
        group.wait()
        #expect(answered.value.values.contains(503), "the kill came too late to interrupt anything")
        try s.startGateway()
        #expect(s.gateway?.isRunning == true, "\(s.gatewayLogText)")
        sleep(2)   // the reconciler asks the new gateway about what was in flight
        for i in tokens.indices {
            let (status, json, body) = try Self.replaySettled(s, tokens[i], keys[i])
            #expect(status == 200 || status == 201, "\(keys[i]): \(body)")
            #expect(json["status"] as? String == "succeeded", "\(body)")
            if let id = json["id"] as? String { #expect(try s.charges(id) == 1) }
        }
        #expect(try s.charges() == tokens.count, "a token was charged twice or not at all")
    }

    /// kill -9 of the sidecar while payments are in flight: after a restart every key resolves
    /// to one payment, charged at most once, and keys acknowledged before the kill keep their id.
    @Test func killDashNineMidPaymentNeverChargesTwice() throws {
        let s = try Stack()
        try s.startGateway()
        try s.startSidecar(extra: ["--reconcile-after", "1"])
        let tokens = try (0..<40).map { _ in try s.tokenize("4242424242424242") }
        let keys = tokens.map { _ in Self.key() }
        let acknowledged = Locked<[String: String]>([:])
        // Eight connections pay in parallel; the sidecar is killed once a third are acknowledged.
        let group = Self.payConcurrently(s, tokens, keys) { i, answer in
            if let (status, json, _) = answer, status == 201, let id = json["id"] as? String { acknowledged.update { $0[keys[i]] = id } }
        }
        for _ in 0..<400 where acknowledged.value.count < tokens.count / 3 { usleep(5_000) }
        s.stop(s.sidecar, signal: SIGKILL)
        group.wait()
        #expect(acknowledged.value.count < tokens.count, "the kill came too late to interrupt anything")
        try s.startSidecar(extra: ["--reconcile-after", "1"])
        sleep(2)   // the reconciler settles what was in flight
        var paid = 0
        for i in tokens.indices {
            let (status, json, body) = try Self.replaySettled(s, tokens[i], keys[i])
            #expect(status == 200 || status == 201, "\(keys[i]): \(body)")
            #expect(json["status"] as? String == "succeeded", "\(body)")
            if let first = acknowledged.value[keys[i]] { #expect(json["id"] as? String == first, "an acknowledged payment changed id") }
            if let id = json["id"] as? String { #expect(try s.charges(id) == 1) }
            paid += 1
        }
        #expect(paid == tokens.count)
        #expect(try s.charges() == tokens.count, "a token was charged twice or not at all")
    }

    /// Pays every token under its key from eight threads at once; `answered` gets each answer
    /// (nil when the request failed). Wait on the group for them all.
    static func payConcurrently(
        _ s: Stack, _ tokens: [String], _ keys: [String], answered: @escaping @Sendable (Int, (Int, [String: Any], String)?) -> Void
    ) -> DispatchGroup {
        let group = DispatchGroup()
        for w in 0..<8 {
            group.enter()
            Thread {
                for i in stride(from: w, to: tokens.count, by: 8) { answered(i, try? s.pay(tokens[i], key: keys[i])) }
                group.leave()
            }.start()
        }
        return group
    }

    /// Replays a key until its payment is no longer in progress (up to 10 s).
    static func replaySettled(_ s: Stack, _ token: String, _ key: String) throws -> (Int, [String: Any], String) {
        var answer = try s.pay(token, key: key)
        for _ in 0..<40 where answer.0 == 409 && answer.2.contains("PAYMENT_IN_PROGRESS") {
            usleep(250_000)
            answer = try s.pay(token, key: key)
        }
        return answer
    }
}
