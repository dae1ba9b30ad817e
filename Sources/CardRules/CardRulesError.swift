/// The error of the card rules: a stable code and a message that never contains card digits.
public struct CardRulesError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A stable upper-snake identifier (docs/errors.md). New codes are added, never renamed.
    public struct Code: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// A character other than digits, spaces and dashes.
        public static let nonDigit = Code(rawValue: "NON_DIGIT_CHARACTERS")
        /// No digits at all.
        public static let empty = Code(rawValue: "CARD_NUMBER_EMPTY")
        /// Fewer digits than any card number has.
        public static let tooShort = Code(rawValue: "CARD_NUMBER_TOO_SHORT")
        /// More than 19 digits.
        public static let tooLong = Code(rawValue: "CARD_NUMBER_TOO_LONG")
        /// The prefix belongs to no known brand.
        public static let unknownBrand = Code(rawValue: "UNKNOWN_CARD_BRAND")
        /// A length the brand does not issue.
        public static let invalidLength = Code(rawValue: "INVALID_CARD_LENGTH")
        /// The Luhn check digit is wrong.
        public static let luhnFailed = Code(rawValue: "LUHN_CHECK_FAILED")
        /// The brand is outside the accepted set.
        public static let brandNotAccepted = Code(rawValue: "BRAND_NOT_ACCEPTED")
        /// The expiry is not MM/YY, MM/YYYY or MMYY.
        public static let expiryMalformed = Code(rawValue: "EXPIRY_MALFORMED")
        /// The month is not 1…12 (or the year is out of range).
        public static let invalidMonth = Code(rawValue: "INVALID_EXPIRY_MONTH")
        /// The card's expiry month has passed.
        public static let expired = Code(rawValue: "CARD_EXPIRED")
        /// The expiry is further ahead than any issuer goes.
        public static let expiryTooFar = Code(rawValue: "EXPIRY_TOO_FAR")
        /// The CVC has characters other than digits.
        public static let cvcMalformed = Code(rawValue: "CVC_MALFORMED")
        /// The CVC has the wrong length for the brand.
        public static let cvcLength = Code(rawValue: "INVALID_CVC_LENGTH")
        /// A BIN table CSV could not be read.
        public static let binTableInvalid = Code(rawValue: "BIN_TABLE_INVALID")
    }

    /// What went wrong.
    public let code: Code
    /// For people; never contains card digits.
    public let message: String

    /// An error. Never put card digits in `message`.
    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
