/// The JSON form of card envelope v1 (docs/envelope-v1.md), written and read without Foundation.
extension CardEnvelope {
    /// Most bytes an envelope's JSON may have (a name of 256 bytes fits many times over).
    public static let maxJSONBytes = 8192

    /// The envelope as one line of JSON, keys in the order of docs/envelope-v1.md.
    public var json: String {
        var out = "{\"v\":\(version),\"id\":"
        JSONText.appendString(id, to: &out)
        out += ",\"kid\":\"\(kid.rawValue)\",\"key\":"
        JSONText.appendString(sealedKey, to: &out)
        out += ",\"fields\":{"
        var first = true
        for field in Field.allCases {
            guard let value = fields[field] else { continue }
            out += first ? "\"" : ",\""
            out += field.rawValue + "\":"
            // Base64 for every envelope the vault makes or parses; escaped anyway, so a hand-built
            // envelope cannot break out of its string.
            JSONText.appendString(value, to: &out)
            first = false
        }
        out += "},\"card\":" + card.json + "}"
        return out
    }

    /// Parses an envelope from JSON bytes, strictly: unknown keys, a missing `pan` or `exp`,
    /// a malformed id, kid or base64 are refused. It does not open anything.
    /// - Throws: `ENVELOPE_MALFORMED`, `ENVELOPE_UNSUPPORTED_VERSION`, `INPUT_TOO_LARGE`.
    public init(json bytes: UnsafeRawBufferPointer) throws(VaultError) {
        guard bytes.count <= Self.maxJSONBytes else {
            throw VaultError(.inputTooLarge, "an envelope is at most \(Self.maxJSONBytes) bytes")
        }
        var reader = JSONReader(bytes, errorCode: .envelopeMalformed)
        self = try Self.parse(from: &reader)
        try reader.finish()
    }

    /// Parses an envelope from a JSON string.
    /// - Throws: as `init(json:)`.
    public init(json text: String) throws(VaultError) {
        let bytes = Array(text.utf8)
        self = try bytes.withUnsafeBytes { b in Result { () throws(VaultError) in try CardEnvelope(json: b) } }.get()
    }

    /// Reads an envelope object at the reader's position (also used for `{"envelope":{…}}` bodies).
    public static func parse(from reader: inout JSONReader) throws(VaultError) -> CardEnvelope {
        var version: Int?, id: String?, kid: KeyID?, key: String?
        var fields: [Field: String]?, card: CardMetadata?
        var unknownKey = false
        try reader.readObject { (r, name) throws(VaultError) in
            switch name {
            case "v": version = try r.readInt(in: 0...Int(Int32.max))
            case "id": id = try r.readString(maxBytes: 68)
            case "kid":
                guard let k = KeyID(try r.readString(maxBytes: 16)) else { throw r.fail("kid is not 16 lowercase hex characters") }
                kid = k
            case "key": key = try r.readString(maxBytes: 256)
            case "fields":
                var found: [Field: String] = [:]
                try r.readObject { (r, name) throws(VaultError) in
                    guard let field = Field(rawValue: name) else { throw r.fail("fields has only pan, exp, cvc and name") }
                    found[field] = try r.readString(maxBytes: 2048)
                }
                fields = found
            case "card": card = try CardMetadata.parse(from: &r)
            default:
                // Decided after `v` is known: a later version may add keys.
                unknownKey = true
                try r.skipValue()
            }
        }
        guard let version else { throw reader.fail("an envelope needs \"v\"") }
        guard version == 1 else {
            throw VaultError(.envelopeUnsupportedVersion, "envelope version \(version) is not supported (this build reads v1)")
        }
        guard !unknownKey else { throw reader.fail("an envelope v1 has only v, id, kid, key, fields and card") }
        guard let id, let kid, let key, let fields, let card else {
            throw reader.fail("an envelope needs id, kid, key, fields and card")
        }
        guard id.hasPrefix("env_"), id.utf8.count >= 26, id.utf8.dropFirst(4).allSatisfy(Self.isIDCharacter) else {
            throw reader.fail("id is env_ followed by at least 22 of [0-9A-Za-z_-]")
        }
        guard fields[.pan] != nil, fields[.exp] != nil else { throw reader.fail("fields needs pan and exp") }
        guard Base64.decode(key)?.count == 32 + SealedValue.overhead else {
            throw reader.fail("key is base64 of an 80-byte sealed box")
        }
        for (field, value) in fields {
            guard let raw = Base64.decode(value), raw.count >= 40 else {
                throw reader.fail("fields.\(field.rawValue) is not base64 of nonce, ciphertext and tag")
            }
        }
        return CardEnvelope(version: version, id: id, kid: kid, sealedKey: key, fields: fields, card: card)
    }

    private static func isIDCharacter(_ c: UInt8) -> Bool {
        (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c == 95 || c == 45
    }
}
