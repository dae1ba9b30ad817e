import Foundation
import Testing

/// Issue 19, items 1 and 5, end to end with the real binaries: what an attacker gets from the
/// sidecar zone's files (its keys directory and its store) is not enough to rebuild a PAN, the
/// gateway computes every fingerprint (and refuses tampered envelopes at tokenize time), and no
/// CVC reaches a store file.
@Suite(.serialized, .ownThread) struct ZoneCLITests {
    typealias Stack = PaymentsCLITests.Stack

    static func json(_ text: String) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
    }

    static func bruteForce(_ store: String, _ paths: [String]) throws -> [String: Int] {
        let r = try run("/usr/bin/env", ["python3", repositoryRoot.appendingPathComponent("Tests/Interop/fingerprint_bruteforce.py").path, store] + paths)
        #expect(r.status == 0, "\(r.stderr)")
        return (try? JSONSerialization.jsonObject(with: r.stdout) as? [String: Int]) ?? [:]
    }

    @Test func theSidecarsFilesCannotRebuildACardNumber() throws {
        let s = try Stack()
        try s.startGateway()
        try s.startSidecar()
        var fingerprints: [String: String] = [:]
        var answers = ""
        for pan in ["4242424242424242", "5555555555554444", "4000056655665556", "6011111111111117", "378282246310005", "4242424242424242"] {
            let cvc = pan.hasPrefix("37") ? "1234" : "123"
            let (status, body) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", #"{"card":{"number":"\#(pan)","exp_month":12,"exp_year":2030,"cvc":"\#(cvc)"}}"#)
            answers += body
            #expect(status == 201, "\(body)")
            let card = Self.json(body)["card"] as? [String: Any] ?? [:]
            let fp = try #require(card["fingerprint"] as? String, "the gateway gave no fingerprint: \(body)")
            #expect(fp.count == 85 && fp.hasPrefix("fp1_"))  // fp1_<fkid>_<64 hex>
            if let seen = fingerprints[pan] { #expect(seen == fp, "same card, same fingerprint") }
            fingerprints[pan] = fp
        }
        #expect(Set(fingerprints.values).count == 5)
        // A caller's envelope (sealed with the public key only, no fingerprint) gets one too.
        let sealed = try vault("seal", "--card", "--key", "\(s.dir)/gateway-keys/\(s.kid).pub",
                               input: #"{"number":"5555555555554444","exp_month":3,"exp_year":2031,"cvc":"737"}"#)
        #expect(sealed.status == 0 && !sealed.out.contains("fingerprint"), "\(sealed.stderr)")
        let (status, body) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", #"{"envelope":\#(sealed.out)}"#)
        #expect(status == 201, "\(body)")
        let envelopeToken = Self.json(body)["token"] as? String ?? ""
        #expect((Self.json(body)["card"] as? [String: Any])?["fingerprint"] as? String == fingerprints["5555555555554444"])

        // The brute force of the issue against the sidecar's zone: its keys directory and store.
        let store = s.dir + "/tokens.sqlite"
        let sidecarZone = [s.dir + "/sidecar-keys", store, store + "-wal"]
        let attack = try Self.bruteForce(store, sidecarZone)
        #expect((attack["rows_with_fingerprint"] ?? 0) >= 7, "\(attack)")
        #expect((attack["keys_tried"] ?? 0) >= 1, "\(attack)")
        #expect(attack["recovered"] == 0, "PANs rebuilt from the sidecar's files: \(attack)")
        // The control: with the gateway zone's key the same script rebuilds every one, so the
        // zero above is the key's absence, not a script that cannot succeed.
        let control = try Self.bruteForce(store, [s.dir + "/gateway-keys"])
        #expect(control["recovered"] == control["rows_with_fingerprint"] && (control["recovered"] ?? 0) >= 7, "\(control)")

        // Item 5: pay the caller's envelope; its CVC (sealed field) is in no store file after
        // the authorization, and it never was.
        let cvcField = try #require(((Self.json(sealed.out)["fields"] as? [String: Any])?["cvc"]) as? String)
        let (tokenStatus, tokenBody) = try s.curl(s.sidecarSocket, "GET", "/v1/tokens/\(envelopeToken)")
        #expect(tokenStatus == 200 && tokenBody.contains(#""has_cvc":true"#), "\(tokenBody)")
        let (payStatus, payJSON, payBody) = try s.pay(envelopeToken, key: PaymentsCLITests.key())
        #expect(payStatus == 201 && payJSON["status"] as? String == "succeeded", "\(payBody)")
        // While the servers run (what a crash, a backup of live files or a copy of the disk sees:
        // the WAL is where an earlier version left the CVC after dropping it), then after a stop.
        func scan(_ when: String) {
            for f in ["tokens.sqlite", "tokens.sqlite-wal", "tokens.sqlite-shm", "sandbox.sqlite", "sandbox.sqlite-wal"] {
                let data = FileManager.default.contents(atPath: "\(s.dir)/\(f)") ?? Data()
                #expect(data.range(of: Data(cvcField.utf8)) == nil, "\(f) holds the sealed CVC (\(when))")
                if let raw = Data(base64Encoded: cvcField) { #expect(data.range(of: raw.suffix(32)) == nil, "\(f) holds the CVC ciphertext (\(when))") }
            }
        }
        scan("running")
        s.stop(s.sidecar)
        s.stop(s.gateway)
        scan("stopped")
        s.collectLogs()
        #expect(!containsPAN(answers + s.logs))
    }

    @Test func theGatewayRefusesTamperedEnvelopesAndFillsFingerprintsLater() throws {
        let s = try Stack()
        // No gateway yet: tokens are stored without a fingerprint.
        try s.startSidecar()
        let (early, earlyBody) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", #"{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2030}}"#)
        #expect(early == 201, "\(earlyBody)")
        let token = Self.json(earlyBody)["token"] as? String ?? ""
        #expect((Self.json(earlyBody)["card"] as? [String: Any])?["fingerprint"] == nil, "\(earlyBody)")
        // With the gateway back, the sidecar fills it in (at start, then every sweep interval).
        try s.startGateway()
        s.stop(s.sidecar)
        try s.startSidecar()
        var filled: String?
        for _ in 0..<100 {
            let (_, body) = try s.curl(s.sidecarSocket, "GET", "/v1/tokens/\(token)")
            filled = (Self.json(body)["card"] as? [String: Any])?["fingerprint"] as? String
            if filled != nil { break }
            usleep(100_000)
        }
        #expect(filled?.count == 85 && filled?.hasPrefix("fp1_") == true)

        // Fields swapped between two caller envelopes, or metadata that is not the card's: the
        // gateway refuses at tokenize time and nothing is stored.
        let pub = "\(s.dir)/gateway-keys/\(s.kid).pub"
        let a = Self.json(try vault("seal", "--card", "--key", pub, input: #"{"number":"4242424242424242","exp_month":12,"exp_year":2030}"#).out)
        let b = Self.json(try vault("seal", "--card", "--key", pub, input: #"{"number":"5555555555554444","exp_month":12,"exp_year":2030}"#).out)
        var swapped = a
        var fields = a["fields"] as! [String: Any]
        fields["pan"] = (b["fields"] as! [String: Any])["pan"]
        swapped["fields"] = fields
        var lying = a
        var card = a["card"] as! [String: Any]
        card["last4"] = "1111"
        lying["card"] = card
        for (envelope, code) in [(swapped, "ENVELOPE_FIELD_CORRUPT"), (lying, "ENVELOPE_METADATA_MISMATCH")] {
            let text = String(decoding: try JSONSerialization.data(withJSONObject: envelope), as: UTF8.self)
            let (status, body) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", #"{"envelope":\#(text)}"#)
            #expect(status == 422 && body.contains(code), "\(body)")
        }
        let count = try run("/usr/bin/env", ["python3", "-c", "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT COUNT(*) FROM vault_tokens').fetchone()[0])", s.dir + "/tokens.sqlite"])
        #expect(count.out.trimmingCharacters(in: .whitespacesAndNewlines) == "1")
    }
}
