/// Issuer information for one BIN range of a `BINTable`.
public struct BINInfo: Sendable, Equatable, Codable {
    /// First BIN of the range (6 to 11 digits, as the table gives it).
    public var rangeStart: String
    /// Last BIN of the range (as many digits as `rangeStart`).
    public var rangeEnd: String
    /// Brand as the table gives it (free text, not necessarily a `CardBrand` code).
    public var brand: String?
    /// `credit`, `debit`, `prepaid`… as the table gives it.
    public var type: String?
    /// Issuing bank.
    public var issuer: String?
    /// Country (ISO code or name, as the table gives it).
    public var country: String?

    /// BIN information; empty strings are kept as given.
    public init(rangeStart: String, rangeEnd: String, brand: String?, type: String?, issuer: String?, country: String?) {
        self.rangeStart = rangeStart
        self.rangeEnd = rangeEnd
        self.brand = brand
        self.type = type
        self.issuer = issuer
        self.country = country
    }
}
