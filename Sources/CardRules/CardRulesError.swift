/// The error of the card rules: a stable code and a message for people.
///
/// Messages are written from fixed text only: they never contain card digits (nor any other input
/// the caller passed), so they are safe to log. A BIN table error names the line, not its content.
public struct CardRulesError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A stable upper-snake identifier (docs/errors.md). New codes are added, none is renamed.
    /// Each is also in the vault's error catalogue (`ErrorCode(cardRules:)` in VaultCrypto).
    public enum Code: String, CaseIterable, Hashable, Sendable, Codable, CustomStringConvertible {
        /// The identifier.
        public var description: String { rawValue }

        /// A character other than digits, spaces, tabs and dashes.
        case nonDigit = "NON_DIGIT_CHARACTERS"
        /// No digits at all.
        case empty = "CARD_NUMBER_EMPTY"
        /// Fewer digits than any card number of its brand (or of any brand) has.
        case tooShort = "CARD_NUMBER_TOO_SHORT"
        /// More than 19 digits.
        case tooLong = "CARD_NUMBER_TOO_LONG"
        /// The prefix belongs to no brand of the table.
        case unknownBrand = "UNKNOWN_CARD_BRAND"
        /// A length the brand does not issue.
        case invalidLength = "INVALID_CARD_LENGTH"
        /// The Luhn check digit is wrong.
        case luhnFailed = "LUHN_CHECK_FAILED"
        /// The brand is outside the accepted set.
        case brandNotAccepted = "BRAND_NOT_ACCEPTED"
        /// The expiry is not `MM/YY`, `MM/YYYY`, `M/YY` or `MMYY`, or its year is outside 2000…2199.
        case expiryMalformed = "EXPIRY_MALFORMED"
        /// The expiry month is not 1…12.
        case invalidMonth = "INVALID_EXPIRY_MONTH"
        /// The card's expiry month has passed.
        case expired = "CARD_EXPIRED"
        /// The expiry is further ahead than issuers go.
        case expiryTooFar = "EXPIRY_TOO_FAR"
        /// The CVC has characters other than digits.
        case cvcMalformed = "CVC_MALFORMED"
        /// The CVC has the wrong number of digits for the brand.
        case cvcLength = "INVALID_CVC_LENGTH"
        /// A BIN table CSV could not be read; the message names the line.
        case binTableInvalid = "BIN_TABLE_INVALID"
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
