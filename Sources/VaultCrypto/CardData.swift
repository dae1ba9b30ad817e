import CardRules

/// A card in clear, as it exists between reading it and sealing it (or opening and charging it).
///
/// The number, CVC and name live in `SecureBytes`; the expiry is also metadata in clear
/// (docs/envelope-v1.md).
public struct CardData: Sendable {
    /// ASCII digits only, 12…19 of them once validated.
    public let number: SecureBytes
    /// Expiry month and four-digit year.
    public let expiry: CardExpiry
    /// ASCII digits, or nil when not given (stored instruments never have one).
    public let cvc: SecureBytes?
    /// UTF-8 cardholder name, or nil.
    public let name: SecureBytes?

    /// Longest cardholder name accepted, in UTF-8 bytes.
    public static let maxNameBytes = 256

    /// A card from its parts. `number` may contain spaces or dashes: they are dropped here.
    /// - Throws: `NON_DIGIT_CHARACTERS`, `CARD_NUMBER_EMPTY`, `CARD_NUMBER_TOO_LONG` (field `card.number`).
    public init(number: SecureBytes, expiry: CardExpiry, cvc: SecureBytes? = nil, name: SecureBytes? = nil) throws(VaultError) {
        self.number = try number.withUnsafeBytes { (raw) throws(VaultError) -> SecureBytes in
            try SecureBytes(capacity: max(raw.count, 19)) { (out) throws(VaultError) -> Int in
                do throws(CardRulesError) { return try PANNormalizer.normalize(raw, into: out) } catch { throw VaultError(cardRules: error, field: "card.number") }
            }
        }
        self.expiry = expiry
        self.cvc = cvc
        self.name = name
    }

    /// Reads a card object `{"number","exp_month","exp_year","cvc","name"}` (cvc and name optional)
    /// from JSON bytes, with the number, CVC and name going straight into `SecureBytes`.
    /// `exp_year` may have two or four digits; months and years may be numbers or digit strings.
    /// - Throws: `CARD_MALFORMED`, `CARD_FIELD_UNKNOWN`, `CARD_FIELD_MISSING`, `INPUT_TOO_LARGE`,
    ///   card-number codes, `EXPIRY_MALFORMED`, `INVALID_EXPIRY_MONTH`.
    public static func parseJSON(_ bytes: UnsafeRawBufferPointer) throws(VaultError) -> CardData {
        var reader = JSONReader(bytes, errorCode: .cardMalformed)
        let card = try parse(from: &reader, fieldPrefix: "card.")
        try reader.finish()
        return card
    }

    /// Reads a card object at the reader's position (used for nested `{"card":{…}}` bodies too).
    public static func parse(from reader: inout JSONReader, fieldPrefix: String) throws(VaultError) -> CardData {
        var number: SecureBytes?, cvc: SecureBytes?, name: SecureBytes?
        var month: Int?, year: Int?
        try reader.readObject { (r, key) throws(VaultError) in
            switch key {
            case "number":
                number = try field(fieldPrefix + key) { () throws(VaultError) in try r.readSecureString(maxBytes: 64) }
            case "cvc":
                if !r.readNullIfPresent() {
                    cvc = try field(fieldPrefix + key) { () throws(VaultError) in try r.readSecureString(maxBytes: 8) }
                }
            case "name":
                if !r.readNullIfPresent() {
                    name = try field(fieldPrefix + key) { () throws(VaultError) in try r.readSecureString(maxBytes: maxNameBytes) }
                }
            case "exp_month":
                month = try field(fieldPrefix + key) { () throws(VaultError) in try readSmallInt(&r) }
            case "exp_year":
                year = try field(fieldPrefix + key) { () throws(VaultError) in try readSmallInt(&r) }
            default:
                // The key is not echoed: it could be card data sent in the wrong place.
                throw VaultError(.cardFieldUnknown, "a card has only number, exp_month, exp_year, cvc and name", field: String(fieldPrefix.dropLast()))
            }
        }
        guard let number else { throw VaultError(.cardFieldMissing, "the card number is missing", field: fieldPrefix + "number") }
        guard let month else { throw VaultError(.cardFieldMissing, "exp_month is missing", field: fieldPrefix + "exp_month") }
        guard let year else { throw VaultError(.cardFieldMissing, "exp_year is missing", field: fieldPrefix + "exp_year") }
        let fullYear = year < 100 ? 2000 + year : year
        let expiry: CardExpiry
        do throws(CardRulesError) {
            expiry = try CardExpiry(month: month, year: fullYear)
        } catch {
            let which = error.code == .invalidMonth ? "exp_month" : "exp_year"
            throw VaultError(cardRules: error, field: fieldPrefix + which)
        }
        do throws(VaultError) {
            return try CardData(number: number, expiry: expiry, cvc: cvc, name: name)
        } catch {
            throw VaultError(error.code, error.message, field: fieldPrefix + "number")
        }
    }

    /// An integer given as a JSON number or a string of up to 4 digits.
    private static func readSmallInt(_ r: inout JSONReader) throws(VaultError) -> Int {
        if r.peekValueStart() == UInt8(ascii: "\"") {
            let s = try r.readString(maxBytes: 4)
            guard !s.isEmpty, s.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let v = Int(s) else {
                throw VaultError(.expiryMalformed, "expiry month and year are digits")
            }
            return v
        }
        return try r.readInt(in: 0...9999)
    }

    private static func field<T>(_ name: String, _ body: () throws(VaultError) -> T) throws(VaultError) -> T {
        do throws(VaultError) { return try body() } catch { throw VaultError(error.code, error.message, field: error.field ?? name) }
    }
}

extension VaultError {
    /// Carries a card-rules error over, keeping its code.
    public init(cardRules error: CardRulesError, field: String?) {
        self.init(ErrorCode(cardRules: error.code), error.message, field: field)
    }
}
