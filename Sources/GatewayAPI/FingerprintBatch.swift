import VaultCrypto

/// `POST /v1/fingerprints` `{"envelopes":[{…v1…}, …]}` (at most `GatewayAPI.maxFingerprintBatch`)
/// → 200 `{"data":[{"fingerprint":"fp1_<fkid>_<64 hex>","fingerprints":[…]} | {"withheld":{"code","message"}} |
/// {"error":{"code","message"}}, …]}`, in order. `withheld`: the gateway's guessing limit kept a new
/// card's fingerprint back (`FINGERPRINT_WITHHELD`, docs/threat-model.md). `fingerprint` is under the primary fingerprint key; `fingerprints` lists the card's
/// fingerprint under every key the gateway holds, the primary's first (more than one during a
/// fingerprint-key rotation: the sidecar links them so a lookup by either finds the card).
public enum FingerprintBatch {
    /// One answer of the batch.
    public enum Entry: Sendable, Equatable {
        /// The primary's fingerprint, then the card's fingerprints under every key held (primary first).
        case fingerprint(String, all: [String])
        case refused(ErrorCode, String)
        /// The guessing limit of the card's truncation group withheld it (DESIGN §9).
        case withheld
    }

    /// The request, with envelopes in their JSON form.
    public static func json(envelopeJSON: [String]) -> String {
        "{\"envelopes\":[" + envelopeJSON.joined(separator: ",") + "]}"
    }

    /// The answer.
    public static func answerJSON(_ entries: [Entry]) -> String {
        var out = "{\"data\":["
        for (i, entry) in entries.enumerated() {
            if i > 0 { out += "," }
            switch entry {
            case .fingerprint(let fp, let all):
                out += "{\"fingerprint\":\"\(fp)\",\"fingerprints\":[" + all.map { "\"\($0)\"" }.joined(separator: ",") + "]}"
            case .withheld:
                out += "{\"withheld\":{\"code\":\"\(ErrorCode.fingerprintWithheld.rawValue)\",\"message\":"
                out += "\"this card's truncation group is past the gateway's guessing limit: its fingerprint comes later\"}}"
            case .refused(let code, let message):
                out += "{\"error\":{\"code\":"
                JSONText.appendString(code.rawValue, to: &out)
                out += ",\"message\":"
                JSONText.appendString(message, to: &out)
                out += "}}"
            }
        }
        return out + "]}"
    }

    /// Reads the answer; nil unless it has one entry per envelope sent (`count`).
    public static func entries(json text: String, count: Int) -> [Entry]? {
        guard let data = GatewayJSON.object(text)?["data"] as? [[String: Any]], data.count == count else { return nil }
        return data.map { entry in
            if let fp = entry["fingerprint"] as? String { return .fingerprint(fp, all: entry["fingerprints"] as? [String] ?? [fp]) }
            if entry["withheld"] != nil { return .withheld }
            let e = entry["error"] as? [String: Any]
            return .refused(GatewayJSON.code(e?["code"]), e?["message"] as? String ?? "the gateway refused the envelope")
        }
    }
}

/// `GET /v1/keys` → `{"primary":"<kid>"|null,"opens":["<kid>",…]}`: the kids the gateway opens now.
public enum KeysAnswer {
    public static func json(primary: String?, opens: [String]) -> String {
        var out = "{\"primary\":"
        if let primary { JSONText.appendString(primary, to: &out) } else { out += "null" }
        return out + ",\"opens\":[" + opens.map { "\"\($0)\"" }.joined(separator: ",") + "]}"
    }
}
