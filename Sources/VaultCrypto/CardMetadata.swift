import CardRules

/// What may be known about a card without opening it (`card` of docs/envelope-v1.md): brand, BIN (≤
/// 8 digits), last 4, length, expiry and the keyed fingerprint. Safe to store, log and return.
public struct CardMetadata: Sendable, Hashable {
    /// Stable lowercase brand code.
    public var brand: CardBrand
    /// First 8 digits (16+ digit PANs) or first 6 (shorter).
    public var bin: String
    /// Last 4 digits.
    public var last4: String
    /// Number of digits of the PAN.
    public var length: Int
    /// Expiry month, 1…12.
    public var expMonth: Int
    /// Expiry year, four digits.
    public var expYear: Int
    /// Keyed BLAKE2b-256 of the PAN digits (hex), or nil when sealed without the fingerprint key.
    public var fingerprint: String?

    /// Metadata from its parts.
    public init(brand: CardBrand, bin: String, last4: String, length: Int, expMonth: Int, expYear: Int, fingerprint: String?) {
        self.brand = brand
        self.bin = bin
        self.last4 = last4
        self.length = length
        self.expMonth = expMonth
        self.expYear = expYear
        self.fingerprint = fingerprint
    }

    /// Derives the metadata of a card whose number has passed validation (`info.valid`).
    public init(info: CardNumberInfo, expiry: CardExpiry, fingerprint: String?) {
        self.init(
            brand: info.brand ?? CardBrand(rawValue: "unknown"), bin: info.bin ?? "", last4: info.last4 ?? "",
            length: info.length, expMonth: expiry.month, expYear: expiry.year, fingerprint: fingerprint)
    }

    /// The JSON object, keys in the order of docs/envelope-v1.md.
    public var json: String {
        var out = "{\"brand\":"
        JSONText.appendString(brand.rawValue, to: &out)
        out += ",\"bin\":"
        JSONText.appendString(bin, to: &out)
        out += ",\"last4\":"
        JSONText.appendString(last4, to: &out)
        out += ",\"length\":\(length),\"exp_month\":\(expMonth),\"exp_year\":\(expYear)"
        if let fingerprint {
            out += ",\"fingerprint\":"
            JSONText.appendString(fingerprint, to: &out)
        }
        out += "}"
        return out
    }

    /// Reads the metadata object at the reader's position; all keys but `fingerprint` required.
    public static func parse(from r: inout JSONReader) throws(VaultError) -> CardMetadata {
        var brand: String?, bin: String?, last4: String?, fingerprint: String?
        var length: Int?, month: Int?, year: Int?
        try r.readObject { (r, key) throws(VaultError) in
            switch key {
            case "brand": brand = try r.readString(maxBytes: 32)
            case "bin": bin = try r.readString(maxBytes: 8)
            case "last4": last4 = try r.readString(maxBytes: 4)
            case "length": length = try r.readInt(in: 1...19)
            case "exp_month": month = try r.readInt(in: 1...12)
            case "exp_year": year = try r.readInt(in: 2000...2199)
            case "fingerprint": if !r.readNullIfPresent() { fingerprint = try r.readString(maxBytes: 128) }
            default: throw r.fail("card metadata has only brand, bin, last4, length, exp_month, exp_year and fingerprint")
            }
        }
        guard let brand, let bin, let last4, let length, let month, let year else {
            throw r.fail("card metadata needs brand, bin, last4, length, exp_month and exp_year")
        }
        return CardMetadata(
            brand: CardBrand(rawValue: brand), bin: bin, last4: last4, length: length,
            expMonth: month, expYear: year, fingerprint: fingerprint)
    }
}
