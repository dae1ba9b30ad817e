/// The error of the card rules: a stable code and a message for people.
///
/// Messages are written from fixed text only: they never contain card digits (nor any other input
/// the caller passed), so they are safe to log. A BIN table error names the line, not its content.
public struct CardRulesError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A stable upper-snake identifier (docs/errors.md). New codes are added, none is renamed.
    public struct Code: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
        /// The identifier, e.g. `LUHN_CHECK_FAILED`.
        public let rawValue: String
        /// A code from its identifier.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The identifier.
        public var description: String { rawValue }

        /// A character other than digits, spaces, tabs and dashes.
        public static let nonDigit = Code(rawValue: "NON_DIGIT_CHARACTERS")
        /// No digits at all.
        public static let empty = Code(rawValue: "CARD_NUMBER_EMPTY")
        /// Fewer digits than any card number of its brand (or of any brand) has.
        public static let tooShort = Code(rawValue: "CARD_NUMBER_TOO_SHORT")
        /// More than 19 digits.
        public static let tooLong = Code(rawValue: "CARD_NUMBER_TOO_LONG")
        /// The prefix belongs to no brand of the table.
        public static let unknownBrand = Code(rawValue: "UNKNOWN_CARD_BRAND")
        /// A length the brand does not issue.
        public static let invalidLength = Code(rawValue: "INVALID_CARD_LENGTH")
        /// The Luhn check digit is wrong.
        public static let luhnFailed = Code(rawValue: "LUHN_CHECK_FAILED")
        /// The brand is outside the accepted set.
        public static let brandNotAccepted = Code(rawValue: "BRAND_NOT_ACCEPTED")
        /// The expiry is not `MM/YY`, `MM/YYYY`, `M/YY` or `MMYY`, or its year is outside 2000…2199.
        public static let expiryMalformed = Code(rawValue: "EXPIRY_MALFORMED")
        /// The expiry month is not 1…12.
        public static let invalidMonth = Code(rawValue: "INVALID_EXPIRY_MONTH")
        /// The card's expiry month has passed.
        public static let expired = Code(rawValue: "CARD_EXPIRED")
        /// The expiry is further ahead than issuers go.
        public static let expiryTooFar = Code(rawValue: "EXPIRY_TOO_FAR")
        /// The CVC has characters other than digits.
        public static let cvcMalformed = Code(rawValue: "CVC_MALFORMED")
        /// The CVC has the wrong number of digits for the brand.
        public static let cvcLength = Code(rawValue: "INVALID_CVC_LENGTH")
        /// A BIN table CSV could not be read; the message names the line.
        public static let binTableInvalid = Code(rawValue: "BIN_TABLE_INVALID")
    }

    /// What went wrong.
    public let code: Code
    /// For people; never contains card digits.
    public let message: String

    /// An error. `message` must be fixed text: never put card digits (or other caller input) in it.
    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    /// `CODE: message`.
    public var description: String { "\(code.rawValue): \(message)" }
}
