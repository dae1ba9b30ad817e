/// What the rules say about a card number: safe metadata only (BIN ≤ 8 digits, last 4).
public struct CardNumberInfo: Sendable, Equatable, Codable {
    /// The brand, once the prefix decides it.
    public var brand: CardBrand?
    /// Brands the number could belong to (for a complete number, those its prefix matches).
    public var candidates: [CardBrand]
    /// Number of digits.
    public var length: Int
    /// Whether the digits pass the Luhn check.
    public var luhn: Bool
    /// Complete and valid: known brand, accepted, a length of the brand, Luhn where the brand needs it.
    public var valid: Bool
    /// First 8 digits of a number of 16 or more digits, first 6 of a shorter one of 12 or more; else nil.
    public var bin: String?
    /// Last 4 digits of a number of 12 or more digits; else nil (it would overlap the BIN).
    public var last4: String?
    /// CVC length of the brand.
    public var cvcLength: Int?
    /// Issuer information from a BIN table, when one is configured and lists the number.
    public var binInfo: BINInfo?
    /// Why it is not valid (empty when valid; with `partial`, only what typing cannot fix).
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

    /// The BIN length shown for a number of `length` digits (PCI DSS: 8 for 16+ digits, else 6).
    public static func binLength(forLength length: Int) -> Int { length >= 16 ? 8 : 6 }
}
