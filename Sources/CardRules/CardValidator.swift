/// Checks card numbers and CVCs against a brand table, an optional BIN table and an optional set
/// of accepted brands.
///
/// Pure and stateless. It reads the caller's digit bytes in place and makes no `String` of them
/// beyond the BIN and last 4 that `CardNumberInfo` documents.
public struct CardValidator: Sendable {
    /// The brand rules.
    public let table: BrandTable
    /// Issuer information, when configured.
    public let binTable: BINTable?
    /// Only these brands are valid; nil accepts every brand of the table.
    public let acceptedBrands: Set<CardBrand>?

    /// A validator.
    public init(table: BrandTable = .standard, binTable: BINTable? = nil, acceptedBrands: Set<CardBrand>? = nil) {
        self.table = table
        self.binTable = binTable
        self.acceptedBrands = acceptedBrands
    }

    /// Shortest number that gets a BIN and last 4; shorter numbers of an unknown brand are
    /// reported `CARD_NUMBER_TOO_SHORT` rather than `UNKNOWN_CARD_BRAND`.
    public static let minimumLength = CardNumberInfo.minimumDisplayLength

    /// Whether `brand` is in the accepted set (always, without one).
    public func accepts(_ brand: CardBrand) -> Bool { acceptedBrands?.contains(brand) ?? true }

    /// Validates normalized ASCII digits (`PANNormalizer.normalize`'s output).
    ///
    /// Complete (`partial: false`): `errors` holds, most fundamental first, `CARD_NUMBER_EMPTY`,
    /// `NON_DIGIT_CHARACTERS`, `CARD_NUMBER_TOO_LONG`, or `UNKNOWN_CARD_BRAND` (or
    /// `CARD_NUMBER_TOO_SHORT` for a short number no range matches yet) alone; else any of
    /// `BRAND_NOT_ACCEPTED`, then `CARD_NUMBER_TOO_SHORT`/`INVALID_CARD_LENGTH` for a length the
    /// brand does not issue, or `LUHN_CHECK_FAILED` for a number of a right length.
    ///
    /// Partial (`partial: true`, a prefix being typed): `errors` holds only what no further typing
    /// can fix — a non-digit; more than 19 digits; no brand possible (`UNKNOWN_CARD_BRAND`); every
    /// possible brand unaccepted (`BRAND_NOT_ACCEPTED`); more digits than any possible accepted
    /// brand has (`INVALID_CARD_LENGTH`); and, once the number has as many digits as any possible
    /// accepted brand allows, every error of the complete check. `valid` still means "complete
    /// and valid as it stands".
    public func validate(digits: some Collection<UInt8>, partial: Bool = false) -> CardNumberInfo {
        let length = digits.count
        guard Digits.allDigits(digits) else {
            var info = CardNumberInfo.empty
            info.length = length
            info.errors = [.nonDigit]
            return info
        }
        let rule = table.match(digits)
        let spec = rule.map { table.specs[$0.spec] }
        let details = length <= PANNormalizer.maxDigits ? table.candidateDetails(digits) : []
        let luhn = Luhn.isValid(digits)
        let complete = completeErrors(length: length, rule: rule, spec: spec, candidates: details, luhn: luhn)
        let errors = partial ? partialErrors(length: length, candidates: details, complete: complete) : complete

        var bin: String?, last4: String?, binInfo: BINInfo?
        if length >= Self.minimumLength && length <= PANNormalizer.maxDigits {
            bin = Self.ascii(digits.prefix(CardNumberInfo.binLength(forLength: length)))
            last4 = Self.ascii(digits.suffix(4))
        }
        if let binTable, length >= 6 && length <= PANNormalizer.maxDigits {
            // Only the issuer prefix is looked up, so a BIN table with longer ranges cannot reveal more.
            binInfo = binTable.lookup(digits.prefix(CardNumberInfo.issuerPrefixLength(forLength: length)))
        }
        return CardNumberInfo(
            brand: spec?.brand, candidates: details.map { table.specs[$0.spec].brand }, length: length, luhn: luhn,
            valid: complete.isEmpty, bin: bin, last4: last4, cvcLength: spec?.cvcLength, binInfo: binInfo, errors: errors)
    }

    /// Checks a CVC: ASCII digits only, as many as the brand's CVC (3 or 4 when the brand is nil
    /// or not in the table). Returns nil when it is fine, else `CVC_MALFORMED` (a non-digit) or
    /// `INVALID_CVC_LENGTH` (including no digits).
    public func validateCVC(_ digits: some Collection<UInt8>, brand: CardBrand?) -> CardRulesError.Code? {
        guard Digits.allDigits(digits) else { return .cvcMalformed }
        let count = digits.count
        if let brand, let spec = table.spec(for: brand) {
            return count == spec.cvcLength ? nil : .cvcLength
        }
        return count == 3 || count == 4 ? nil : .cvcLength
    }

    private func completeErrors(
        length: Int, rule: BrandTable.Rule?, spec: BrandSpec?, candidates: [BrandTable.Candidate], luhn: Bool
    ) -> [CardRulesError.Code] {
        if length == 0 { return [.empty] }
        if length > PANNormalizer.maxDigits { return [.tooLong] }
        guard let rule, let spec else {
            return [candidates.isEmpty || length >= Self.minimumLength ? .unknownBrand : .tooShort]
        }
        var errors: [CardRulesError.Code] = []
        if !accepts(spec.brand) { errors.append(.brandNotAccepted) }
        let lengths = spec.lengths(in: rule.range)
        if !lengths.contains(length) {
            errors.append(length < lengths[0] ? .tooShort : .invalidLength)
        } else if spec.luhn && !luhn {
            errors.append(.luhnFailed)
        }
        return errors
    }

    private func partialErrors(length: Int, candidates: [BrandTable.Candidate], complete: [CardRulesError.Code]) -> [CardRulesError.Code] {
        if length > PANNormalizer.maxDigits { return [.tooLong] }
        if length == 0 { return [] }
        if candidates.isEmpty { return [.unknownBrand] }
        let open = candidates.filter { accepts(table.specs[$0.spec].brand) }
        if open.isEmpty { return [.brandNotAccepted] }
        let room = open.map(\.maxLength).max() ?? PANNormalizer.maxDigits
        if length > room { return [.invalidLength] }
        return length == room ? complete : []
    }

    /// Safe digits (a BIN or last 4) as text.
    private static func ascii(_ bytes: some Collection<UInt8>) -> String { String(decoding: bytes, as: UTF8.self) }
}
