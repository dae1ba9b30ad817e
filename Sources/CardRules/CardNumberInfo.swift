/// What the rules say about a card number: safe metadata only.
///
/// It never holds more of the number than leaves the gateway zone (DESIGN §1): the visible prefix
/// (`bin`: min(6, length − 10) digits, so at least 6 digits stay hidden) and the last 4, and only
/// once the number is long enough (12 digits) for them not to overlap. `binInfo` is the issuer
/// the validator's table names for the first 6 (or 8) digits; it is never stored with a token.
public struct CardNumberInfo: Sendable, Equatable, Codable {
    /// The brand of the most specific prefix range the number contains; nil while none matches.
    public var brand: CardBrand?
    /// Brands the number (or, when partial, some completion of it) could belong to, most
    /// specific first (`BrandTable.candidates(for:)`); empty for a number with non-digits.
    public var candidates: [CardBrand]
    /// Number of digits (bytes, when some are not digits).
    public var length: Int
    /// Whether the digits pass the Luhn check (whatever the brand's rule).
    public var luhn: Bool
    /// Complete and valid: a known, accepted brand, one of its lengths, and the Luhn check where
    /// the brand has it. Also for partial validation, where it says the number as it stands is complete.
    public var valid: Bool
    /// The visible prefix: the first min(6, length − 10) digits (6 of a number of 16 or more, 2 of
    /// one of 12); nil for shorter numbers, partial or not (a partial number's final length is
    /// unknown, so nothing is shown before it has 12 digits).
    public var bin: String?
    /// The last 4 digits of a number of 12 or more; else nil (they would overlap the BIN).
    public var last4: String?
    /// CVC length of the brand.
    public var cvcLength: Int?
    /// Issuer information from the validator's BIN table, when it has one and lists the number;
    /// looked up from the first 6 digits (first 8 once the number has 16), once 6 are there.
    /// Answered to whoever typed the number (`POST /v1/validate`); never stored.
    public var binInfo: BINInfo?
    /// Why it is not valid, most fundamental first; empty when valid. With partial validation,
    /// only what no further typing can fix.
    public var errors: [CardRulesError.Code]

    /// Metadata from its parts.
    public init(
        brand: CardBrand?, candidates: [CardBrand], length: Int, luhn: Bool, valid: Bool, bin: String?, last4: String?,
        cvcLength: Int?, binInfo: BINInfo?, errors: [CardRulesError.Code]
    ) {
        self.brand = brand
        self.candidates = candidates
        self.length = length
        self.luhn = luhn
        self.valid = valid
        self.bin = bin
        self.last4 = last4
        self.cvcLength = cvcLength
        self.binInfo = binInfo
        self.errors = errors
    }

    /// Nothing known: no brand, no digits, not valid, no errors. A base for reporting a number
    /// that could not be read (set `errors`).
    public static let empty = CardNumberInfo(
        brand: nil, candidates: [], length: 0, luhn: false, valid: false, bin: nil, last4: nil,
        cvcLength: nil, binInfo: nil, errors: [])

    /// Shortest number that gets a BIN and last 4 (and shortest any standard brand issues).
    public static let minimumDisplayLength = 12

    /// The digits of the visible prefix of a number of `length` digits (DESIGN §1): min(6, length
    /// − 10), so that with the last 4 at least 6 digits stay hidden (0 below 11 digits).
    public static func binLength(forLength length: Int) -> Int { max(0, min(6, length - 10)) }

    /// The BIN length envelopes sealed by earlier versions carry (8 from 16 digits, else 6):
    /// accepted, and cut to `binLength` before anything is stored.
    public static func legacyBINLength(forLength length: Int) -> Int { length >= 16 ? 8 : 6 }

    /// The prefix the issuer table is looked up by (8 digits from 16, else 6).
    public static func issuerPrefixLength(forLength length: Int) -> Int { legacyBINLength(forLength: length) }

    /// `bin` cut to the visible prefix of a card of `length` digits: a longer one (an envelope
    /// sealed by an earlier version) loses its extra digits; a shorter one is left as it is.
    public static func visiblePrefix(_ bin: String, length: Int) -> String {
        let n = binLength(forLength: length)
        return bin.utf8.count > n ? String(bin.prefix(n)) : bin
    }
}
