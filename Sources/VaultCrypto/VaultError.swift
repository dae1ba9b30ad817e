/// The error of the vault's crypto family (VaultCrypto, VaultOpen, VaultClient).
///
/// `code` is a stable upper-snake identifier (documented in `docs/errors.md`); new codes are added,
/// never renamed. `message` is for people and never contains card data or key bytes. `field`
/// names the input the error is about (`card.number`, `fields.pan`, a file path) when there is one.
public struct VaultError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A stable error identifier.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        // Key files
        /// The key file does not exist.
        public static let keyFileNotFound = Code(rawValue: "KEY_FILE_NOT_FOUND")
        /// The key file could not be read or written (I/O error, permission denied).
        public static let keyFileUnreadable = Code(rawValue: "KEY_FILE_UNREADABLE")
        /// The file holds another kind of key (e.g. a secret key where a public key was expected).
        public static let keyFileWrongKind = Code(rawValue: "KEY_FILE_WRONG_KIND")
        /// The key file is not one `vault:<kind>:v1:<base64 of 32 bytes>` line.
        public static let keyFileMalformed = Code(rawValue: "KEY_FILE_MALFORMED")
        /// A secret or fingerprint key file readable by group or others.
        public static let keyFilePermissions = Code(rawValue: "KEY_FILE_PERMISSIONS")
        /// keygen refuses to overwrite an existing file.
        public static let keyFileExists = Code(rawValue: "KEY_FILE_EXISTS")
        /// A keys directory that group or others may write: files written there could be swapped
        /// or redirected (a planted symlink), so nothing is written into it.
        public static let keysDirectoryUnsafe = Code(rawValue: "KEYS_DIRECTORY_UNSAFE")
        /// A fingerprint key is needed and none was found.
        public static let fingerprintKeyMissing = Code(rawValue: "FINGERPRINT_KEY_MISSING")

        // Sealed values and envelopes
        /// Sealed to a key whose kid is not among the keys given.
        public static let keyMismatch = Code(rawValue: "KEY_MISMATCH")
        /// Well-formed text whose ciphertext fails to open: tampered or truncated.
        public static let sealedValueCorrupt = Code(rawValue: "SEALED_VALUE_CORRUPT")
        /// Not a `vault:v1:<kid>:<base64>` line.
        public static let sealedValueMalformed = Code(rawValue: "SEALED_VALUE_MALFORMED")
        /// Not a card envelope v1 JSON object.
        public static let envelopeMalformed = Code(rawValue: "ENVELOPE_MALFORMED")
        /// An envelope version this build does not know.
        public static let envelopeUnsupportedVersion = Code(rawValue: "ENVELOPE_UNSUPPORTED_VERSION")
        /// The sealed data key does not open with the key its kid names.
        public static let envelopeKeyCorrupt = Code(rawValue: "ENVELOPE_KEY_CORRUPT")
        /// A field fails authentication: flipped bytes, or moved from another slot or envelope.
        public static let envelopeFieldCorrupt = Code(rawValue: "ENVELOPE_FIELD_CORRUPT")
        /// A field opened but its plaintext is not of its slot's form.
        public static let envelopeFieldInvalid = Code(rawValue: "ENVELOPE_FIELD_INVALID")
        /// The `card` metadata does not match what the opened PAN and expiry give.
        public static let envelopeMetadataMismatch = Code(rawValue: "ENVELOPE_METADATA_MISMATCH")

        // Card input
        /// Card JSON that is not an object of the documented fields.
        public static let cardMalformed = Code(rawValue: "CARD_MALFORMED")
        /// A field the card object does not have.
        public static let cardFieldUnknown = Code(rawValue: "CARD_FIELD_UNKNOWN")
        /// A required card field is absent.
        public static let cardFieldMissing = Code(rawValue: "CARD_FIELD_MISSING")
        /// Input larger than the limit for its kind.
        public static let inputTooLarge = Code(rawValue: "INPUT_TOO_LARGE")
        /// Reading or writing a stream failed.
        public static let ioError = Code(rawValue: "IO_ERROR")
    }

    /// What went wrong, as a stable code.
    public let code: Code
    /// A human message without card data or key bytes.
    public let message: String
    /// The input the error is about, when there is one.
    public let field: String?

    /// Makes an error. Never put card data or key bytes in `message`.
    public init(_ code: Code, _ message: String, field: String? = nil) {
        self.code = code
        self.message = message
        self.field = field
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
