import CardRules
import Foundation
import Gateway
import Hummingbird
import HummingbirdTesting
import Money
import SocketHTTP
import Testing
import VaultCrypto
import VaultOpen

/// The gateway adapter's authorize route with the sandbox processor, through the router: every
/// test card's outcome, idempotency by payment id (durable), refusals of bad envelopes, and
/// answers that never carry card data.
@Suite struct GatewayRouteTests {
    struct Fixture {
        let dir: String
        let publicKey: PublicKey
        let ring: KeyRing
        var ledger: String { dir + "/sandbox.sqlite" }

        init() throws {
            dir = NSTemporaryDirectory() + "vault-gateway-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            let kid = try KeyFiles.generateKeyPair(directory: dir)
            publicKey = try KeyFiles.loadPublicKey(path: "\(dir)/\(kid.rawValue).pub")
            ring = try KeyRing(paths: ["\(dir)/\(kid.rawValue).key"])
        }

        func envelope(_ pan: String, cvc: String? = "123", year: Int = 2030, to key: PublicKey? = nil) throws -> CardEnvelope {
            let card = try CardData(
                number: SecureBytes(Array(pan.utf8)), expiry: CardExpiry(month: 12, year: year), cvc: cvc.map { SecureBytes(Array($0.utf8)) })
            // Sealed "in" 2020 so that a card that has expired since can still be sealed.
            return try CardEnvelope.seal(card, to: key ?? publicKey, now: CalendarMonth(year: 2020, month: 1))
        }

        static let threeDSKey = Array(repeating: UInt8(7), count: 32)

        func withApp(_ body: @escaping @Sendable (any TestClientProtocol) async throws -> Void) async throws {
            let router = Router()
            let threeDS = await ThreeDSValidator(apiKey: Self.threeDSKey, issuer: "vault-sandbox-3ds")
            // A new handle on the same store each time: a restart of the gateway.
            GatewayRoutes(opener: EnvelopeOpener(ring: ring), processor: SandboxProcessor(ledger: try await LedgerBackend.sqlite(ledger), threeDS: threeDS))
                .register(on: router)
            try await Application(router: router).test(.router, body)
        }

        func remove() { try? FileManager.default.removeItem(atPath: dir) }
    }

    static func authorize(_ client: any TestClientProtocol, _ body: String) async throws -> (Int, [String: Any], String) {
        try await client.execute(uri: "/v1/authorize", method: .post, headers: [.contentType: "application/json"], body: ByteBuffer(string: body)) { r in
            let text = String(buffer: r.body)
            return (Int(r.status.code), (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:], text)
        }
    }

    static func request(_ envelope: CardEnvelope, payment: String = RandomID.make(prefix: "pay_"), amount: Int = 1050, currency: String = "EUR") -> String {
        #"{"payment_id":"\#(payment)","amount":\#(amount),"currency":"\#(currency)","envelope":\#(envelope.json)}"#
    }

    @Test(arguments: [
        ("4242424242424242", "succeeded", nil),
        ("5555555555554444", "succeeded", nil),
        ("4000000000000002", "declined", "generic_decline"),
        ("4000000000009995", "declined", "insufficient_funds"),
        ("4000000000000069", "declined", "expired_card"),
        ("4000000000000127", "declined", "incorrect_cvc"),
        ("4000000000000119", "declined", "processing_error"),
        ("4000000000003220", "requires_action", nil),
    ] as [(String, String, String?)])
    func sandboxOutcomes(pan: String, status: String, declineCode: String?) async throws {
        let f = try Fixture()
        defer { f.remove() }
        let envelope = try f.envelope(pan)
        try await f.withApp { client in
            let (code, json, text) = try await Self.authorize(client, Self.request(envelope))
            #expect(code == 200, "\(text)")
            #expect(json["status"] as? String == status)
            #expect(json["decline_code"] as? String == declineCode)
            if status == "requires_action" {
                let next = try #require(json["next_action"] as? [String: Any])
                #expect(next["type"] as? String == "three_ds_challenge")
                #expect((next["transaction_id"] as? String)?.hasPrefix("3ds_") == true)
                #expect((next["challenge_url"] as? String)?.isEmpty == false)
            }
            #expect(!text.contains(pan) && !text.contains(String(pan.suffix(8))), "card data in the answer")
        }
    }

    @Test func anExpiredCardIsDeclinedByTheSandbox() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let envelope = try f.envelope("4242424242424242", year: 2021)
        try await f.withApp { client in
            let (_, json, _) = try await Self.authorize(client, Self.request(envelope))
            #expect(json["status"] as? String == "declined" && json["decline_code"] as? String == "expired_card")
        }
    }

    /// A retry of a payment id returns the first outcome and reference, also from a new process
    /// (a new SandboxProcessor on the same ledger), and charges nothing more.
    @Test func idempotentByPaymentIDAcrossRestarts() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let envelope = try f.envelope("4242424242424242")
        let payment = RandomID.make(prefix: "pay_")
        let first = ThreadSafeBox<String>()
        try await f.withApp { client in
            let (_, a, _) = try await Self.authorize(client, Self.request(envelope, payment: payment))
            let results = try await withThrowingTaskGroup(of: String?.self) { group in
                for _ in 0..<8 { group.addTask { try await Self.authorize(client, Self.request(envelope, payment: payment)).1["reference"] as? String } }
                return try await group.reduce(into: [String?]()) { $0.append($1) }
            }
            #expect(Set(results).count == 1 && results.first == a["reference"] as? String)
            first.value = a["reference"] as? String
        }
        try await f.withApp { client in
            let (_, b, _) = try await Self.authorize(client, Self.request(envelope, payment: payment))
            #expect(b["reference"] as? String == first.value)
            let (_, other, _) = try await Self.authorize(client, Self.request(envelope))
            #expect(other["reference"] as? String != first.value)
            // The same payment id for another amount or another card is refused.
            let (s1, e1, _) = try await Self.authorize(client, Self.request(envelope, payment: payment, amount: 999))
            #expect(s1 == 409 && (e1["error"] as? [String: Any])?["code"] as? String == "PAYMENT_ID_REUSED")
            let (s2, _, _) = try await Self.authorize(client, Self.request(try f.envelope("4242424242424242"), payment: payment))
            #expect(s2 == 409)
        }
    }

    @Test func badEnvelopesAndRequestsAreRefusedWithCodes() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let good = try f.envelope("4242424242424242")
        var tampered = good
        tampered.fields[.pan] = good.fields[.exp]          // a field moved to another slot
        var lying = good
        lying.card = try f.envelope("5555555555554444").card   // metadata of another card
        let foreign = try f.envelope("4242424242424242", to: try PublicKey(rawBytes: Array(repeating: 3, count: 32)))
        let tamperedRequest = Self.request(tampered), lyingRequest = Self.request(lying)
        try await f.withApp { client in
            let cases: [(String, Int, String)] = [
                (tamperedRequest, 422, "ENVELOPE_FIELD_CORRUPT"),
                (lyingRequest, 422, "ENVELOPE_METADATA_MISMATCH"),
                (Self.request(foreign), 422, "KEY_MISMATCH"),
                (Self.request(good, currency: "EUX"), 422, "CURRENCY_INVALID"),
                (Self.request(good, currency: "eur"), 422, "CURRENCY_INVALID"),
                (Self.request(good, amount: 0), 422, "AMOUNT_INVALID"),
                (Self.request(good, amount: -5), 422, "AMOUNT_INVALID"),
                (Self.request(good, payment: "pay_X;drop"), 422, "REQUEST_FIELD_INVALID"),
                (#"{"payment_id":"pay_a","amount":5,"currency":"EUR"}"#, 422, "REQUEST_FIELD_MISSING"),
                (#"{"payment_id":"pay_a","amount":5,"currency":"EUR","pan":"4242424242424242"}"#, 422, "REQUEST_FIELD_UNKNOWN"),
                ("{", 400, "REQUEST_MALFORMED"),
            ]
            for (body, status, code) in cases {
                let (s, json, text) = try await Self.authorize(client, body)
                #expect(s == status, "\(code): \(text)")
                #expect((json["error"] as? [String: Any])?["code"] as? String == code, "\(text)")
                #expect(!text.contains("4242424242424242"))
            }
        }
    }

    static func post(_ client: any TestClientProtocol, _ uri: String, _ body: String) async throws -> (Int, [String: Any], String) {
        try await client.execute(uri: uri, method: .post, headers: [.contentType: "application/json"], body: ByteBuffer(string: body)) { r in
            let text = String(buffer: r.body)
            return (Int(r.status.code), (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:], text)
        }
    }

    /// Starts a 3DS challenge payment; returns the payment id and the challenge's transaction id.
    static func challenge(_ client: any TestClientProtocol, _ f: Fixture) async throws -> (String, String) {
        let payment = RandomID.make(prefix: "pay_")
        let (_, json, text) = try await authorize(client, request(try f.envelope("4000000000003220"), payment: payment))
        let next = try #require(json["next_action"] as? [String: Any], "\(text)")
        let transaction = try #require(next["transaction_id"] as? String)
        #expect(next["challenge_url"] as? String == "/v1/sandbox/3ds/\(transaction)")
        return (payment, transaction)
    }

    @Test(arguments: [
        ("SUCCESS", "succeeded", nil), ("NOACTION", "succeeded", nil), ("FAILURE", "declined", "three_ds_failed"),
        ("ERROR", "declined", "three_ds_error"), ("CANCEL", "declined", "three_ds_cancelled"), ("TIMEOUT", "declined", "three_ds_timeout"),
    ] as [(String, String, String?)])
    func threeDSChallengeOutcomes(action: String, status: String, declineCode: String?) async throws {
        let f = try Fixture()
        defer { f.remove() }
        try await f.withApp { client in
            let (payment, transaction) = try await Self.challenge(client, f)
            let (acs, acsJSON, acsText) = try await Self.post(client, "/v1/sandbox/acs/\(transaction)", #"{"action":"\#(action)"}"#)
            #expect(acs == 200, "\(acsText)")
            let jwt = try #require(acsJSON["three_ds_result"] as? String)
            let (s, json, text) = try await Self.post(client, "/v1/authorizations/\(payment)/confirm", #"{"three_ds_result":"\#(jwt)"}"#)
            #expect(s == 200, "\(text)")
            #expect(json["status"] as? String == status && json["decline_code"] as? String == declineCode, "\(text)")
            // The outcome is recorded; the same result again is refused.
            let (_, recorded, _) = try await client.execute(uri: "/v1/authorizations/\(payment)", method: .get) { r in
                (r.status, (try? JSONSerialization.jsonObject(with: Data(String(buffer: r.body).utf8)) as? [String: Any]) ?? [:], 0)
            }
            #expect(recorded["status"] as? String == status)
            let (again, againJSON, _) = try await Self.post(client, "/v1/authorizations/\(payment)/confirm", #"{"three_ds_result":"\#(jwt)"}"#)
            #expect(again == 409 && (againJSON["error"] as? [String: Any])?["code"] as? String == "PAYMENT_NOT_AWAITING_ACTION")
        }
    }

    /// Forged, expired, mismatched, replayed and malformed results are refused, each with its
    /// code, and the payment keeps waiting.
    @Test func badThreeDSResultsAreRefused() async throws {
        let f = try Fixture()
        defer { f.remove() }
        try await f.withApp { client in
            let (payment, transaction) = try await Self.challenge(client, f)
            let (other, otherTransaction) = try await Self.challenge(client, f)
            let (_, good, _) = try await Self.post(client, "/v1/sandbox/acs/\(transaction)", #"{"action":"SUCCESS"}"#)
            let (_, otherGood, _) = try await Self.post(client, "/v1/sandbox/acs/\(otherTransaction)", #"{"action":"SUCCESS"}"#)
            let goodJWT = try #require(good["three_ds_result"] as? String)
            let otherJWT = try #require(otherGood["three_ds_result"] as? String)
            // The audience: read it from the good result (the challenge request's jti).
            let segment = goodJWT.split(separator: ".")[1]
            var b64 = segment.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            while b64.count % 4 != 0 { b64 += "=" }
            let claims = try #require(try JSONSerialization.jsonObject(with: Data(base64Encoded: b64)!) as? [String: Any])
            let aud = (claims["aud"] as? String) ?? ((claims["aud"] as? [String])?.first ?? "")
            let now = Date()
            let forger = await ThreeDSValidator(apiKey: Array(repeating: 9, count: 32), issuer: "vault-sandbox-3ds")
            let real = await ThreeDSValidator(apiKey: Fixture.threeDSKey, issuer: "vault-sandbox-3ds")
            let cases: [(String, String)] = [
                (try await forger.sign(action: "SUCCESS", audience: aud, issuedAt: now, expiresAt: now + 600, id: "jti_f"), "THREE_DS_JWT_INVALID"),
                (try await real.sign(action: "SUCCESS", audience: aud, issuedAt: now - 7200, expiresAt: now - 3600, id: "jti_e"), "THREE_DS_JWT_EXPIRED"),
                (try await real.sign(action: "SUCCESS", audience: aud, issuedAt: now + 3600, expiresAt: now + 7200, id: "jti_t"), "THREE_DS_JWT_EXPIRED"),
                (try await real.sign(action: "SUCCESS", audience: aud, issuedAt: now, expiresAt: now + 600, id: "jti_i", issuer: "someone-else"), "THREE_DS_JWT_INVALID"),
                (try await real.sign(action: "MAYBE", audience: aud, issuedAt: now, expiresAt: now + 600, id: "jti_a"), "THREE_DS_JWT_INVALID"),
                (otherJWT, "THREE_DS_JWT_MISMATCH"),
                ("eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0." + segment + ".", "THREE_DS_JWT_INVALID"),
                ("not a jwt", "THREE_DS_JWT_INVALID"),
                // A genuine result with anything more is not a JWT (a trailing NUL got through).
                (goodJWT + "\\u0000", "THREE_DS_JWT_INVALID"),
                (goodJWT + " ", "THREE_DS_JWT_INVALID"),
                (goodJWT + "=", "THREE_DS_JWT_INVALID"),
                (goodJWT + ".", "THREE_DS_JWT_INVALID"),
            ]
            for (jwt, code) in cases {
                let (s, json, text) = try await Self.post(client, "/v1/authorizations/\(payment)/confirm", #"{"three_ds_result":"\#(jwt)"}"#)
                #expect(s == 422, "\(code): \(text)")
                #expect((json["error"] as? [String: Any])?["code"] as? String == code, "\(text)")
            }
            // A result id used once cannot confirm another challenge.
            let (ok, _, okText) = try await Self.post(client, "/v1/authorizations/\(other)/confirm", #"{"three_ds_result":"\#(otherJWT)"}"#)
            #expect(ok == 200, "\(okText)")
            let otherID = try #require(((try JSONSerialization.jsonObject(with: Data(base64Encoded: {
                var b = String(otherJWT.split(separator: ".")[1]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
                while b.count % 4 != 0 { b += "=" }
                return b
            }())!) as? [String: Any])?["jti"] as? String))
            let replay = try await real.sign(action: "SUCCESS", audience: aud, issuedAt: now, expiresAt: now + 600, id: otherID)
            let (r, rJSON, _) = try await Self.post(client, "/v1/authorizations/\(payment)/confirm", #"{"three_ds_result":"\#(replay)"}"#)
            #expect(r == 409 && (rJSON["error"] as? [String: Any])?["code"] as? String == "THREE_DS_JWT_REPLAYED")
            // Still waiting, and the good result still works.
            let (fine, fineJSON, _) = try await Self.post(client, "/v1/authorizations/\(payment)/confirm", #"{"three_ds_result":"\#(goodJWT)"}"#)
            #expect(fine == 200 && fineJSON["status"] as? String == "succeeded")
            let (unknown, _, _) = try await Self.post(client, "/v1/sandbox/acs/3ds_nothing", #"{"action":"SUCCESS"}"#)
            #expect(unknown == 404)
        }
    }

    @Test func currencies() {
        #expect(Currency("EUR")?.exponent == 2)
        #expect(Currency("JPY")?.exponent == 0)
        #expect(Currency("KWD")?.exponent == 3)
        #expect(Currency("XAU") == nil && Currency("usd") == nil && Currency("US") == nil && Currency("USDD") == nil)
    }
}

final class ThreadSafeBox<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var _value: T?
    var value: T? {
        get { lock.withLock { _value } }
        set { lock.withLock { _value = newValue } }
    }
}

/// `POST /v1/fingerprints` (issue 19, item 1): the gateway, which alone holds the fingerprint key,
/// opens each envelope, checks it as for a payment, and answers only the keyed hash of its PAN.
@Suite struct GatewayFingerprintRouteTests {
    static func post(_ client: any TestClientProtocol, _ envelopes: [String]) async throws -> (Int, [String: Any], String) {
        let body = "{\"envelopes\":[" + envelopes.joined(separator: ",") + "]}"
        return try await client.execute(uri: "/v1/fingerprints", method: .post, headers: [.contentType: "application/json"], body: ByteBuffer(string: body)) { r in
            let text = String(buffer: r.body)
            return (Int(r.status.code), (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:], text)
        }
    }

    func withApp(_ f: GatewayRouteTests.Fixture, fingerprintKey: FingerprintKey?, _ body: @escaping @Sendable (any TestClientProtocol) async throws -> Void) async throws {
        try await withApp(f, fingerprintKeys: fingerprintKey.map { FingerprintKeys(primary: $0) }, body)
    }

    func withApp(_ f: GatewayRouteTests.Fixture, fingerprintKeys: FingerprintKeys?, _ body: @escaping @Sendable (any TestClientProtocol) async throws -> Void) async throws {
        let router = Router()
        let threeDS = await ThreeDSValidator(apiKey: GatewayRouteTests.Fixture.threeDSKey, issuer: "vault-sandbox-3ds")
        GatewayRoutes(
            opener: EnvelopeOpener(ring: f.ring, fingerprintKeys: fingerprintKeys),
            processor: SandboxProcessor(ledger: try await LedgerBackend.sqlite(f.ledger), threeDS: threeDS))
            .register(on: router)
        try await Application(router: router).test(.router, body)
    }

    @Test func answersKeyedFingerprintsAndRefusesTamperedEnvelopes() async throws {
        let f = try GatewayRouteTests.Fixture()
        defer { f.remove() }
        let key = try FingerprintKey(secureBytes: SecureBytes(Array(repeating: 6, count: 32)))
        let visa = try f.envelope("4242424242424242"), again = try f.envelope("4242424242424242", cvc: nil), mc = try f.envelope("5555555555554444")
        var swapped = visa
        swapped.fields[.pan] = mc.fields[.pan]
        var lying = visa
        lying.card.last4 = "1111"
        let batch = [visa.json, again.json, mc.json, swapped.json, lying.json]
        try await withApp(f, fingerprintKey: key) { client in
            let (status, json, text) = try await Self.post(client, batch)
            #expect(status == 200, "\(text)")
            let data = json["data"] as? [[String: Any]] ?? []
            #expect(data.count == 5)
            // Named by the key: fp1_<fkid>_<keyed hash>; one key held, one fingerprint listed.
            let expected = Array("4242424242424242".utf8).withUnsafeBytes { key.namedFingerprint(ofDigits: $0) }
            #expect(expected.hasPrefix("fp1_\(key.kid)_"))
            #expect(data[0]["fingerprint"] as? String == expected && data[0]["fingerprints"] as? [String] == [expected])
            #expect(data[1]["fingerprint"] as? String == expected)
            #expect(data[2]["fingerprint"] as? String != expected && FingerprintName.kid(of: data[2]["fingerprint"] as? String ?? "") == key.kid)
            #expect((data[3]["error"] as? [String: Any])?["code"] as? String == "ENVELOPE_FIELD_CORRUPT")
            #expect((data[4]["error"] as? [String: Any])?["code"] as? String == "ENVELOPE_METADATA_MISMATCH")
            #expect(!text.contains("4242424242424242") && !text.contains("5555555555554444"))
            let metrics = try await client.execute(uri: "/metrics", method: .get) { String(buffer: $0.body) }
            #expect(metrics.contains("vault_gateway_fingerprints_total 3"), "\(metrics)")
            let tooMany = try await Self.post(client, Array(repeating: visa.json, count: GatewayRoutes.maxFingerprintBatch + 1))
            #expect(tooMany.0 == 422, "\(tooMany.2)")
        }
        // A carried fingerprint is not checked when fingerprinting (issue 37): refusing one that is
        // not the card's would tell whoever seals a guess with a stored card's fingerprint whether
        // the guess is that card, and a refusal is never counted by the guessing limit. The answer
        // is the card's own fingerprint; a payment is not refused for it either.
        var wrongPrint = visa
        wrongPrint.card.fingerprint = String(repeating: "ab", count: 32)
        let wrongJSON = wrongPrint.json, payRequest = GatewayRouteTests.request(wrongPrint)
        let visaPrint = Array("4242424242424242".utf8).withUnsafeBytes { key.namedFingerprint(ofDigits: $0) }
        try await withApp(f, fingerprintKey: key) { client in
            let (_, json, text) = try await Self.post(client, [wrongJSON])
            let first = (json["data"] as? [[String: Any]])?.first
            #expect(first?["fingerprint"] as? String == visaPrint && first?["error"] == nil, "\(text)")
            let (status, paid, body) = try await GatewayRouteTests.authorize(client, payRequest)
            #expect(status == 200 && paid["status"] as? String == "succeeded", "\(body)")
        }
        // Named, bare or of a key not held: all answered alike, with the card's own fingerprint.
        var namedPrint = visa, barePrint = visa, unknownKid = visa
        namedPrint.card.fingerprint = Array("4242424242424242".utf8).withUnsafeBytes { key.namedFingerprint(ofDigits: $0) }
        barePrint.card.fingerprint = Array("4242424242424242".utf8).withUnsafeBytes { key.fingerprint(ofDigits: $0) }
        unknownKid.card.fingerprint = "fp1_0123456789abcdef_" + barePrint.card.fingerprint!
        let carried = [namedPrint.json, barePrint.json, unknownKid.json], named = namedPrint.card.fingerprint, namedJSON = namedPrint.json
        try await withApp(f, fingerprintKey: key) { client in
            let (_, json, text) = try await Self.post(client, carried)
            let data = json["data"] as? [[String: Any]] ?? []
            #expect(data.count == 3 && data.allSatisfy { $0["fingerprint"] as? String == named }, "\(text)")
        }
        // During a fingerprint-key rotation: the primary's fingerprint, and the card's under every
        // key held, the primary's first. No key material in the answer.
        let next = try FingerprintKey(secureBytes: SecureBytes(Array(repeating: 9, count: 32)))
        try await withApp(f, fingerprintKeys: FingerprintKeys(primary: next, others: [key])) { client in
            let (status, json, text) = try await Self.post(client, [visa.json, namedJSON])
            let data = json["data"] as? [[String: Any]] ?? []
            let digits = Array("4242424242424242".utf8)
            let both = [digits.withUnsafeBytes { next.namedFingerprint(ofDigits: $0) }, digits.withUnsafeBytes { key.namedFingerprint(ofDigits: $0) }]
            #expect(status == 200 && data.count == 2, "\(text)")
            for entry in data {
                #expect(entry["fingerprint"] as? String == both[0] && entry["fingerprints"] as? [String] == both, "\(text)")
            }
        }
        // Without the key the gateway says so; nothing is guessed.
        try await withApp(f, fingerprintKey: nil) { client in
            let (status, _, text) = try await Self.post(client, [visa.json])
            #expect(status == 503 && text.contains("FINGERPRINT_KEY_MISSING"), "\(text)")
        }
    }
}
