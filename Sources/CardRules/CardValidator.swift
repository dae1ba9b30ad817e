/// Checks card numbers and CVCs against a brand table, an optional BIN table and an optional set
/// of accepted brands. Pure: it stores nothing and makes no `String` of more than BIN and last 4.
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

    /// Shortest card number any brand issues.
    public static let minimumLength = 12

    /// Validates normalized ASCII digits.
    ///
    /// With `partial`, the number is still being typed: `errors` lists only what no further digit
    /// can fix (no brand can match, no accepted brand can match, too long, a non-digit), and
    /// `valid` still says whether it is complete and valid as it stands.
    public func validate(digits: some Collection<UInt8>, partial: Bool = false) -> CardNumberInfo {
        let length = digits.count
        let allDigits = digits.allSatisfy { $0 >= 48 && $0 <= 57 }
        let brand = allDigits ? table.brand(of: digits) : nil
        let candidates = allDigits ? table.candidates(for: digits) : []
        let spec = brand.flatMap { table.spec(for: $0) }
        let luhn = allDigits && Luhn.isValid(digits)

        var complete: [CardRulesError.Code] = []
        if !allDigits {
            complete.append(.nonDigit)
        } else if length == 0 {
            complete.append(.empty)
        } else if length > PANNormalizer.maxDigits {
            complete.append(.tooLong)
        } else if brand == nil {
            complete.append(length < Self.minimumLength ? .tooShort : .unknownBrand)
        } else if let spec {
            if let accepted = acceptedBrands, !accepted.contains(spec.brand) {
                complete.append(.brandNotAccepted)
            } else if !spec.lengths.contains(length) {
                complete.append(length < Self.minimumLength ? .tooShort : .invalidLength)
            } else if spec.luhn && !luhn {
                complete.append(.luhnFailed)
            }
        }

        var errors = complete
        if partial {
            errors = []
            if !allDigits {
                errors.append(.nonDigit)
            } else if length > PANNormalizer.maxDigits {
                errors.append(.tooLong)
            } else if candidates.isEmpty {
                errors.append(.unknownBrand)
            } else if let accepted = acceptedBrands, candidates.allSatisfy({ !accepted.contains($0) }) {
                errors.append(.brandNotAccepted)
            } else {
                let longest = candidates.compactMap { table.spec(for: $0)?.lengths.last }.max() ?? PANNormalizer.maxDigits
                if length > longest { errors.append(.invalidLength) }
            }
        }

        var bin: String?, last4: String?, binInfo: BINInfo?
        if allDigits, length >= Self.minimumLength {
            bin = Self.ascii(digits.prefix(CardNumberInfo.binLength(forLength: length)))
            last4 = Self.ascii(digits.suffix(4))
        }
        if allDigits, length >= 8 || (length >= 6 && !partial), let binTable {
            binInfo = binTable.lookup(digits)
        }
        return CardNumberInfo(
            brand: brand, candidates: candidates, length: length, luhn: luhn, valid: complete.isEmpty,
            bin: bin, last4: last4, cvcLength: spec?.cvcLength, binInfo: binInfo, errors: errors)
    }

    /// Checks a CVC: digits only, the brand's length (3 or 4 when the brand is unknown).
    /// Returns nil when it is fine.
    public func validateCVC(_ digits: some Collection<UInt8>, brand: CardBrand?) -> CardRulesError.Code? {
        guard !digits.isEmpty, digits.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return .cvcMalformed }
        if let brand, let spec = table.spec(for: brand) {
            return digits.count == spec.cvcLength ? nil : .cvcLength
        }
        return digits.count == 3 || digits.count == 4 ? nil : .cvcLength
    }

    private static func ascii(_ bytes: some Collection<UInt8>) -> String { String(decoding: bytes, as: UTF8.self) }
}
