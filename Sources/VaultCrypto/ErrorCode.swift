import CardRules

/// Every error code of the vault, in one catalogue: each is declared here once, with the HTTP
/// status it answers with, the `vault` command's exit code and its one-line meaning.
///
/// Codes are stable upper-snake identifiers (docs/errors.md): new ones are added, none is renamed.
/// No other module makes a code: they throw these (`VaultError`, `APIError`, `StoreError`,
/// `ProcessorError`, …). `ErrorCatalogueTests` checks docs/errors.md and docs/cli.md against it.
public enum ErrorCode: String, CaseIterable, Sendable, CustomStringConvertible {
    // Card rules (CardRulesError, mapped by `init(cardRules:)`)
    case nonDigitCharacters = "NON_DIGIT_CHARACTERS"
    case cardNumberEmpty = "CARD_NUMBER_EMPTY"
    case cardNumberTooShort = "CARD_NUMBER_TOO_SHORT"
    case cardNumberTooLong = "CARD_NUMBER_TOO_LONG"
    case unknownCardBrand = "UNKNOWN_CARD_BRAND"
    case invalidCardLength = "INVALID_CARD_LENGTH"
    case luhnCheckFailed = "LUHN_CHECK_FAILED"
    case brandNotAccepted = "BRAND_NOT_ACCEPTED"
    case expiryMalformed = "EXPIRY_MALFORMED"
    case invalidExpiryMonth = "INVALID_EXPIRY_MONTH"
    case cardExpired = "CARD_EXPIRED"
    case expiryTooFar = "EXPIRY_TOO_FAR"
    case cvcMalformed = "CVC_MALFORMED"
    case invalidCVCLength = "INVALID_CVC_LENGTH"
    case binTableInvalid = "BIN_TABLE_INVALID"

    // Key files, keys directories
    case keyFileNotFound = "KEY_FILE_NOT_FOUND"
    case keyFileUnreadable = "KEY_FILE_UNREADABLE"
    case keyFileWrongKind = "KEY_FILE_WRONG_KIND"
    case keyFileMalformed = "KEY_FILE_MALFORMED"
    case keyFilePermissions = "KEY_FILE_PERMISSIONS"
    case keyFileExists = "KEY_FILE_EXISTS"
    case keysDirectoryUnsafe = "KEYS_DIRECTORY_UNSAFE"
    case fingerprintKeyMissing = "FINGERPRINT_KEY_MISSING"
    case fingerprintWithheld = "FINGERPRINT_WITHHELD"
    case fingerprintKeyRefused = "FINGERPRINT_KEY_REFUSED"
    case keyPassphraseRequired = "KEY_PASSPHRASE_REQUIRED"
    case keyPassphraseWrong = "KEY_PASSPHRASE_WRONG"
    case secretKeyRefused = "SECRET_KEY_REFUSED"

    // Kids and the key ring
    case keyMismatch = "KEY_MISMATCH"
    case kidMalformed = "KID_MALFORMED"
    case keyNotInRing = "KEY_NOT_IN_RING"
    case keyRetired = "KEY_RETIRED"
    case keyRingNotFound = "KEY_RING_NOT_FOUND"
    case keyRingInvalid = "KEY_RING_INVALID"
    case keyRingChangeRefused = "KEY_RING_CHANGE_REFUSED"
    case keyInUse = "KEY_IN_USE"
    case rewrapIncomplete = "REWRAP_INCOMPLETE"
    case importMappingInvalid = "IMPORT_MAPPING_INVALID"
    case importRowMalformed = "IMPORT_ROW_MALFORMED"
    case importRowsRejected = "IMPORT_ROWS_REJECTED"
    case outputFileExists = "OUTPUT_FILE_EXISTS"

    // Configuration, audit log, process
    case configNotFound = "CONFIG_NOT_FOUND"
    case configInvalid = "CONFIG_INVALID"
    case auditLogUnavailable = "AUDIT_LOG_UNAVAILABLE"
    case auditLogWriteFailed = "AUDIT_LOG_WRITE_FAILED"
    case auditLogTailInvalid = "AUDIT_LOG_TAIL_INVALID"
    case auditProcessInvalid = "AUDIT_PROCESS_INVALID"
    case auditLogClosed = "AUDIT_LOG_CLOSED"
    case hardeningFailed = "HARDENING_FAILED"

    // Sealed values, envelopes, card input
    case sealedValueMalformed = "SEALED_VALUE_MALFORMED"
    case sealedValueCorrupt = "SEALED_VALUE_CORRUPT"
    case envelopeMalformed = "ENVELOPE_MALFORMED"
    case envelopeUnsupportedVersion = "ENVELOPE_UNSUPPORTED_VERSION"
    case envelopeKeyCorrupt = "ENVELOPE_KEY_CORRUPT"
    case envelopeFieldCorrupt = "ENVELOPE_FIELD_CORRUPT"
    case envelopeFieldInvalid = "ENVELOPE_FIELD_INVALID"
    case envelopeMetadataMismatch = "ENVELOPE_METADATA_MISMATCH"
    case envelopeMetadataInvalid = "ENVELOPE_METADATA_INVALID"
    case cardMalformed = "CARD_MALFORMED"
    case cardFieldUnknown = "CARD_FIELD_UNKNOWN"
    case cardFieldMissing = "CARD_FIELD_MISSING"
    case cardNameInvalid = "CARD_NAME_INVALID"
    case invalidCardNumber = "INVALID_CARD_NUMBER"
    case inputTooLarge = "INPUT_TOO_LARGE"
    case ioError = "IO_ERROR"

    // Tokens and the store
    case tokenNotFound = "TOKEN_NOT_FOUND"
    case tokenExists = "TOKEN_EXISTS"
    case tokenInUse = "TOKEN_IN_USE"
    case cardTokenSpaceTooSmall = "CARD_TOKEN_SPACE_TOO_SMALL"
    case tokenSpaceExhausted = "TOKEN_SPACE_EXHAUSTED"
    case cardTokenNeedsCard = "CARD_TOKEN_NEEDS_CARD"
    case cardTokenBrandUnsupported = "CARD_TOKEN_BRAND_UNSUPPORTED"
    case cardNumberIsToken = "CARD_NUMBER_IS_TOKEN"
    case storeUnavailable = "STORE_UNAVAILABLE"
    case storeRowCorrupt = "STORE_ROW_CORRUPT"
    case storeDuplicate = "STORE_DUPLICATE"
    case storeTooNew = "STORE_TOO_NEW"
    case storeLocationInvalid = "STORE_LOCATION_INVALID"
    case storeTLSInvalid = "STORE_TLS_INVALID"

    // Sockets, peers, requests
    case socketPathInUse = "SOCKET_PATH_IN_USE"
    case socketUnavailable = "SOCKET_UNAVAILABLE"
    case socketPathTooLong = "SOCKET_PATH_TOO_LONG"
    case socketGroupUnknown = "SOCKET_GROUP_UNKNOWN"
    case peerNotAllowed = "PEER_NOT_ALLOWED"
    case peerPolicyInvalid = "PEER_POLICY_INVALID"
    case sidecarUnreachable = "SIDECAR_UNREACHABLE"
    case sidecarError = "SIDECAR_ERROR"
    case requestMalformed = "REQUEST_MALFORMED"
    case requestFieldUnknown = "REQUEST_FIELD_UNKNOWN"
    case requestFieldMissing = "REQUEST_FIELD_MISSING"
    case requestFieldInvalid = "REQUEST_FIELD_INVALID"
    case requestAmbiguous = "REQUEST_AMBIGUOUS"
    case requestFieldCardNumber = "REQUEST_FIELD_CARD_NUMBER"
    case metadataInvalid = "METADATA_INVALID"
    case bodyTooLarge = "BODY_TOO_LARGE"
    case unsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE"
    case routeNotFound = "ROUTE_NOT_FOUND"
    case methodNotAllowed = "METHOD_NOT_ALLOWED"
    case notReady = "NOT_READY"

    // The gateway adapter and its processors
    case amountInvalid = "AMOUNT_INVALID"
    case currencyInvalid = "CURRENCY_INVALID"
    case gatewayUnavailable = "GATEWAY_UNAVAILABLE"
    case gatewayError = "GATEWAY_ERROR"
    case gatewayLedgerUnavailable = "GATEWAY_LEDGER_UNAVAILABLE"
    case authorizationInProgress = "AUTHORIZATION_IN_PROGRESS"
    case authorizationPending = "AUTHORIZATION_PENDING"
    case authorizationNotFound = "AUTHORIZATION_NOT_FOUND"
    case paymentIDReused = "PAYMENT_ID_REUSED"
    case relayTemplateInvalid = "RELAY_TEMPLATE_INVALID"
    case relayURLNotAllowed = "RELAY_URL_NOT_ALLOWED"
    case settleConflict = "SETTLE_CONFLICT"
    case settleInFlight = "SETTLE_IN_FLIGHT"
    case notSandbox = "NOT_SANDBOX"
    case paymentNotAwaitingAction = "PAYMENT_NOT_AWAITING_ACTION"
    case threeDSJWTInvalid = "THREE_DS_JWT_INVALID"
    case threeDSJWTMismatch = "THREE_DS_JWT_MISMATCH"
    case threeDSJWTExpired = "THREE_DS_JWT_EXPIRED"
    case threeDSJWTReplayed = "THREE_DS_JWT_REPLAYED"
    case threeDSActionInvalid = "THREE_DS_ACTION_INVALID"
    case threeDSTransactionNotFound = "THREE_DS_TRANSACTION_NOT_FOUND"

    // Payments, customers, sessions, mandates
    case idempotencyKeyReused = "IDEMPOTENCY_KEY_REUSED"
    case idempotencyKeyConflict = "IDEMPOTENCY_KEY_CONFLICT"
    case paymentInProgress = "PAYMENT_IN_PROGRESS"
    case paymentNotFound = "PAYMENT_NOT_FOUND"
    case customerNotFound = "CUSTOMER_NOT_FOUND"
    case instrumentNotFound = "INSTRUMENT_NOT_FOUND"
    case customerReferenceTaken = "CUSTOMER_REFERENCE_TAKEN"
    case customerPaymentInFlight = "CUSTOMER_PAYMENT_IN_FLIGHT"
    case customerHasNoInstrument = "CUSTOMER_HAS_NO_INSTRUMENT"
    case sessionNotFound = "SESSION_NOT_FOUND"
    case sessionExpired = "SESSION_EXPIRED"
    case sessionUsed = "SESSION_USED"
    case sessionAttemptsExceeded = "SESSION_ATTEMPTS_EXCEEDED"
    case sessionBrandNotAccepted = "SESSION_BRAND_NOT_ACCEPTED"
    case velocityLimit = "VELOCITY_LIMIT"
    case mandateNotFound = "MANDATE_NOT_FOUND"
    case mandateCycleInvalid = "MANDATE_CYCLE_INVALID"
    case mandateCycleNotDue = "MANDATE_CYCLE_NOT_DUE"
    case mandateAmountExceeded = "MANDATE_AMOUNT_EXCEEDED"
    case mandateExpired = "MANDATE_EXPIRED"
    case mandateCancelled = "MANDATE_CANCELLED"
    case mandateInstrumentGone = "MANDATE_INSTRUMENT_GONE"

    // The payment lifecycle: capture, cancel (void), refund
    case paymentNotCapturable = "PAYMENT_NOT_CAPTURABLE"
    case paymentNotCancelable = "PAYMENT_NOT_CANCELABLE"
    case paymentNotRefundable = "PAYMENT_NOT_REFUNDABLE"
    case authorizationExpired = "AUTHORIZATION_EXPIRED"
    case captureExceedsAuthorized = "CAPTURE_EXCEEDS_AUTHORIZED"
    case refundExceedsCaptured = "REFUND_EXCEEDS_CAPTURED"
    case refundNotFound = "REFUND_NOT_FOUND"
    case operationNotSupported = "OPERATION_NOT_SUPPORTED"

    // Events
    case eventNotFound = "EVENT_NOT_FOUND"

    /// What the catalogue says of a code.
    public struct Entry: Sendable, Equatable {
        /// The HTTP status it answers with.
        public let status: Int
        /// Another status it answers with in one documented case (e.g. 504 for an unknown outcome).
        public let otherStatus: Int?
        /// The `vault` command's exit code (docs/cli.md).
        public let exit: ExitStatus
        /// One line for people.
        public let meaning: String
    }

    /// The `vault` command's exit codes (docs/cli.md, "Exit codes").
    public enum ExitStatus: Int32, CaseIterable, Sendable {
        /// Any other failure (and `validate`: not valid).
        case failure = 1
        case keyFile = 2
        case keyMismatch = 3
        case tampered = 4
        case notOfTheFormat = 5
        case invalidInput = 6
        case io = 7
        case unreachable = 8
        case tokenNotFound = 9
        case peerNotAllowed = 10
        case configuration = 11
        case keyRing = 12
        case auditLog = 13
        /// A server's socket path is held by a live server (a restart may cure it).
        case socketInUse = 14
        /// This version or host cannot run it: the store needs a newer vault, or the kernel
        /// refuses the process hardening (a restart cannot cure either).
        case cannotRunHere = 15
        /// A server answers but is not ready (`vault health --ready`: `NOT_READY`).
        case notReady = 16

        /// argument-parser's usage error (not a code of the catalogue).
        public static let usage: Int32 = 64

        /// The exit codes a server's start-up failure ends with that a restart cannot cure: a key
        /// file, the configuration, the key ring, a store or host this version cannot run on, a usage error. The systemd units'
        /// `RestartPreventExitStatus=` lists exactly these (DeployConfigTests); the others
        /// (`STORE_UNAVAILABLE` 8, `SOCKET_PATH_IN_USE` 14, an audit log that cannot be written
        /// 13, 1) may pass, so systemd restarts on them.
        public static let restartCannotCure: [Int32] = [
            ExitStatus.keyFile.rawValue, ExitStatus.configuration.rawValue, ExitStatus.keyRing.rawValue, ExitStatus.cannotRunHere.rawValue, usage,
        ]
    }

    /// The code's status, exit code and meaning.
    public var entry: Entry {
        switch self {
        case .nonDigitCharacters: Self.e(422, .invalidInput, "the number has a character other than digits, spaces and dashes")
        case .cardNumberEmpty: Self.e(422, .invalidInput, "no digits")
        case .cardNumberTooShort: Self.e(422, .invalidInput, "fewer digits than any brand has")
        case .cardNumberTooLong: Self.e(422, .invalidInput, "more than 19 digits")
        case .unknownCardBrand: Self.e(422, .invalidInput, "the prefix matches no brand")
        case .invalidCardLength: Self.e(422, .invalidInput, "a length its brand does not have")
        case .luhnCheckFailed: Self.e(422, .invalidInput, "the check digit is wrong")
        case .brandNotAccepted: Self.e(422, .invalidInput, "a brand outside the accepted set")
        case .expiryMalformed: Self.e(422, .invalidInput, "not MM/YY, MM/YYYY, M/YYYY or MMYY, or a year outside 2000…2199")
        case .invalidExpiryMonth: Self.e(422, .invalidInput, "month outside 1…12")
        case .cardExpired: Self.e(422, .invalidInput, "the expiry month has passed")
        case .expiryTooFar: Self.e(422, .invalidInput, "more than 20 years (240 months) ahead")
        case .cvcMalformed: Self.e(422, .invalidInput, "the CVC has non-digits")
        case .invalidCVCLength: Self.e(422, .invalidInput, "empty, or not the brand's CVC length")
        case .binTableInvalid: Self.e(422, .invalidInput, "a BIN table CSV row is wrong (the message names the line)")

        case .keyFileNotFound: Self.e(422, .keyFile, "no file at that path")
        case .keyFileUnreadable: Self.e(422, .keyFile, "the file cannot be read or written")
        case .keyFileWrongKind: Self.e(422, .keyFile, "another kind of key (e.g. a secret key where a public key belongs)")
        case .keyFileMalformed: Self.e(422, .keyFile, "not one `vault:<kind>:v1:<base64 of 32 bytes>` line")
        case .keyFilePermissions: Self.e(422, .keyFile, "a secret or fingerprint key readable by group or others")
        case .keyFileExists: Self.e(422, .keyFile, "keygen will not overwrite")
        case .keysDirectoryUnsafe: Self.e(422, .keyFile, "a keys directory another user owns or group or others may write: nothing is written")
        case .fingerprintKeyMissing: Self.e(503, .keyFile, "the gateway has no fingerprint key")
        case .fingerprintWithheld: Self.e(429, .failure, "the gateway's guessing limit withheld a new card's fingerprint (an entry of POST /v1/fingerprints, never an answer of the sidecar)")
        case .fingerprintKeyRefused: Self.e(422, .keyFile, "the sidecar's keys directory holds a fingerprint key: only the gateway may")
        case .keyPassphraseRequired: Self.e(422, .keyFile, "a passphrase-protected secret key and no passphrase given")
        case .keyPassphraseWrong: Self.e(422, .keyFile, "the passphrase does not open the key (or the file was altered), or it is empty")
        case .secretKeyRefused: Self.e(422, .keyFile, "a secret key in the sidecar's keys directory: `vault serve` refuses to start, `vault keygen` to write one there")

        case .keyMismatch: Self.e(422, .keyMismatch, "sealed to a kid that is not among the keys given (at the sidecar: not listed by the key ring)")
        case .kidMalformed: Self.e(422, .notOfTheFormat, "not a kid (16 lower-case hex characters)")
        case .keyNotInRing: Self.e(422, .keyRing, "a key ring change or setting names a kid the ring (ring.json) does not list")
        case .keyRetired: Self.e(422, .keyRing, "sealed to a kid the key ring retired")
        case .keyRingNotFound: Self.e(422, .keyRing, "no key ring where one is needed")
        case .keyRingInvalid: Self.e(422, .keyRing, "the ring file is not a valid ring; the message names the setting")
        case .keyRingChangeRefused: Self.e(422, .keyRing, "a ring change against its rules")
        case .keyInUse: Self.e(422, .keyRing, "`vault keys retire` while stored envelopes are still sealed to the key")
        case .rewrapIncomplete: Self.e(422, .failure, "`vault rewrap` could not rewrap every envelope (its audit outcome; exit 1)")
        case .importMappingInvalid: Self.e(422, .invalidInput, "`vault import`: a column mapping that is not field=column of a card field, or does not fit the header")
        case .importRowMalformed: Self.e(422, .invalidInput, "`vault import`: a row that cannot be read (CSV quoting or field count, not a JSON object)")
        case .importRowsRejected: Self.e(422, .failure, "`vault import` rejected some lines (its audit outcome; the rejects report names them; exit 1)")
        case .outputFileExists: Self.e(422, .io, "an output file that exists already: it is not overwritten")

        case .configNotFound: Self.e(422, .configuration, "the configuration file cannot be read")
        case .configInvalid: Self.e(422, .configuration, "a setting is unknown or its value is not valid")
        case .auditLogUnavailable: Self.e(422, .auditLog, "the audit log cannot be opened, locked, read or examined")
        case .auditLogWriteFailed: Self.e(422, .auditLog, "appending to the audit log or syncing it failed")
        case .auditLogTailInvalid: Self.e(422, .auditLog, "the audit log's last line is not an audit line: not chaining onto it")
        case .auditProcessInvalid: Self.e(422, .auditLog, "an audit log's process is not `sidecar`, `gateway` or `cli`")
        case .auditLogClosed: Self.e(422, .auditLog, "an audit record after the log was closed")
        case .hardeningFailed: Self.e(422, .cannotRunHere, "core dumps could not be disabled: no secret key is loaded")

        case .sealedValueMalformed: Self.e(422, .notOfTheFormat, "not `vault:v1:<kid>:<base64>`")
        case .sealedValueCorrupt: Self.e(422, .tampered, "does not open: tampered or truncated")
        case .envelopeMalformed: Self.e(422, .notOfTheFormat, "not an envelope v1 object")
        case .envelopeUnsupportedVersion: Self.e(422, .notOfTheFormat, "`v` is not 1")
        case .envelopeKeyCorrupt: Self.e(422, .tampered, "the data key does not open")
        case .envelopeFieldCorrupt: Self.e(422, .tampered, "a field fails authentication")
        case .envelopeFieldInvalid: Self.e(422, .tampered, "an opened field is not of its slot's form")
        case .envelopeMetadataMismatch: Self.e(422, .tampered, "`card` does not match the opened card")
        case .envelopeMetadataInvalid: Self.e(422, .invalidInput, "a caller's envelope whose metadata cannot be right")
        case .cardMalformed: Self.e(422, .invalidInput, "card JSON that is not an object of the documented fields")
        case .cardFieldUnknown: Self.e(422, .invalidInput, "a card field that does not exist")
        case .cardFieldMissing: Self.e(422, .invalidInput, "`number`, `exp_month` or `exp_year` absent")
        case .cardNameInvalid: Self.e(422, .invalidInput, "a cardholder name with control characters")
        case .invalidCardNumber: Self.e(422, .invalidInput, "the number is not valid for a reason the others do not name")
        case .inputTooLarge: Self.e(413, .invalidInput, "over the size limit of its kind")
        case .ioError: Self.e(422, .io, "reading or writing a stream failed")

        case .tokenNotFound: Self.e(404, .tokenNotFound, "no live token with that id")
        case .tokenExists: Self.e(409, .failure, "a token id collision in the store")
        case .tokenInUse: Self.e(409, .failure, "a single-use token already has a payment in progress, waiting, or succeeded")
        case .cardTokenSpaceTooSmall: Self.e(422, .invalidInput, "a card-shaped token was asked for a card too short to hide in (fewer than 15 digits)")
        case .tokenSpaceExhausted: Self.e(409, .failure, "every card-shaped token drawn for this card's first 6, last 4 and length was taken")
        case .cardTokenNeedsCard: Self.e(422, .invalidInput, "a card-shaped token that could be the card's number was asked for an envelope sealed elsewhere")
        case .cardTokenBrandUnsupported: Self.e(422, .invalidInput, "a card-shaped token was asked for a brand whose numbers need not pass the Luhn check (UnionPay)")
        case .cardNumberIsToken: Self.e(422, .invalidInput, "a card number that is one of this vault's card-shaped tokens")
        case .storeUnavailable: Self.e(503, .unreachable, "the store cannot be reached or refused the operation")
        case .storeRowCorrupt: Self.e(503, .failure, "a stored row cannot be read back")
        case .storeDuplicate: Self.e(409, .failure, "a unique key of the store is taken (the stores turn it into their own code)")
        case .storeTooNew: Self.e(503, .cannotRunHere, "the store records a migration this version does not know")
        case .storeLocationInvalid: Self.e(422, .configuration, "`--store` is neither `sqlite:PATH` nor a PostgreSQL URL")
        case .storeTLSInvalid: Self.e(422, .configuration, "a PostgreSQL TLS certificate or key file cannot be read or parsed")

        case .socketPathInUse: Self.e(422, .socketInUse, "another server listens on the socket path, or the path is not a socket")
        case .socketUnavailable: Self.e(422, .configuration, "the socket cannot be created: its directory does not exist or may not be written")
        case .socketPathTooLong: Self.e(422, .configuration, "the socket's directory is too long for a Unix socket path")
        case .socketGroupUnknown: Self.e(422, .configuration, "`--socket-group` names no group, or one this process is not in")
        case .peerNotAllowed: Self.e(403, .peerNotAllowed, "the connecting uid/gid is not allowed this request")
        case .peerPolicyInvalid: Self.e(422, .configuration, "an `--allow` value that cannot be parsed")
        case .sidecarUnreachable: Self.e(422, .unreachable, "the client cannot reach the sidecar's socket")
        case .sidecarError: Self.e(502, .failure, "the sidecar answered an error this client does not know (the message has it)")
        case .requestMalformed: Self.e(400, .invalidInput, "the body is not JSON, or not UTF-8, or nests too deep; or the HTTP framing is malformed")
        case .requestFieldUnknown: Self.e(422, .invalidInput, "a request field that does not exist")
        case .requestFieldMissing: Self.e(422, .invalidInput, "a required request field is absent")
        case .requestFieldInvalid: Self.e(422, .invalidInput, "a request field of the wrong form")
        case .requestAmbiguous: Self.e(422, .invalidInput, "both `card` and `envelope` given")
        case .requestFieldCardNumber: Self.e(422, .invalidInput, "a field that is not a card field holds what looks like a card number")
        case .metadataInvalid: Self.e(422, .invalidInput, "`metadata` out of its bounds (pairs, key or value length) or not string to string")
        case .bodyTooLarge: Self.e(413, .invalidInput, "a request body over its limit")
        case .unsupportedMediaType: Self.e(415, .invalidInput, "a body that is not `application/json`")
        case .routeNotFound: Self.e(404, .invalidInput, "no route has this path")
        case .methodNotAllowed: Self.e(405, .invalidInput, "the path's routes do not take this method")
        case .notReady: Self.e(503, .notReady, "the server answers but a readiness check failed (store, gateway, keys, processor: the message names it)")

        case .amountInvalid: Self.e(422, .failure, "an amount that is not a positive integer in minor units")
        case .currencyInvalid: Self.e(422, .failure, "not an active ISO 4217 code in upper case")
        case .gatewayUnavailable:
            Self.e(503, or: 504, .failure, "nothing was charged (503), or sent and the outcome is not known yet (504)")
        case .gatewayError: Self.e(502, .failure, "the gateway answered something the sidecar cannot read")
        case .gatewayLedgerUnavailable: Self.e(422, .failure, "no longer raised: the store's codes say why the ledger cannot be opened")
        case .authorizationInProgress: Self.e(504, .failure, "another call holds this payment id now: it is not sent again")
        case .authorizationPending: Self.e(409, or: 504, .failure, "sent, the outcome not known yet, being settled")
        case .authorizationNotFound: Self.e(404, .failure, "the ledger has no row for this payment id: nothing was charged")
        case .paymentIDReused: Self.e(409, .failure, "a payment id already charged with another amount, currency or card")
        case .relayTemplateInvalid: Self.e(422, .configuration, "a relay template that cannot be used")
        case .relayURLNotAllowed: Self.e(422, .configuration, "a relay URL the gateway does not send card data to")
        case .settleConflict: Self.e(422, .failure, "`vault payments settle`: finished with another outcome; nothing is changed")
        case .settleInFlight: Self.e(422, .failure, "`vault payments settle`: a gateway is sending or asking about it right now")
        case .notSandbox: Self.e(404, .failure, "the sandbox ACS of a gateway whose processor is not the sandbox")
        case .paymentNotAwaitingAction: Self.e(409, .failure, "a 3-D Secure confirmation for a payment that is not `requires_action`")
        case .threeDSJWTInvalid: Self.e(422, .failure, "the 3-D Secure result is not a valid JWT of the 3DS server")
        case .threeDSJWTMismatch: Self.e(422, .failure, "the 3-D Secure result belongs to another challenge")
        case .threeDSJWTExpired: Self.e(422, .failure, "the 3-D Secure result has expired, or is dated in the future")
        case .threeDSJWTReplayed: Self.e(409, .failure, "the 3-D Secure result was already used")
        case .threeDSActionInvalid: Self.e(422, .failure, "a sandbox challenge action that does not exist")
        case .threeDSTransactionNotFound: Self.e(404, .failure, "no sandbox challenge with that transaction id")

        case .idempotencyKeyReused: Self.e(409, .failure, "the idempotency key was used for a different request")
        case .idempotencyKeyConflict: Self.e(422, .invalidInput, "the Idempotency-Key header and the idempotency_key field differ")
        case .paymentInProgress: Self.e(409, .failure, "the first request under this key is still being processed")
        case .paymentNotFound: Self.e(404, .failure, "no payment with that id")
        case .customerNotFound: Self.e(404, .failure, "no customer with that id")
        case .instrumentNotFound: Self.e(404, .failure, "the customer has no instrument with that id")
        case .customerReferenceTaken: Self.e(409, .failure, "another customer has this reference (customer_reference_unique)")
        case .customerPaymentInFlight: Self.e(409, .failure, "a payment of the customer's instruments is still in flight")
        case .customerHasNoInstrument: Self.e(422, .failure, "a payment by customer, and the customer has no default instrument")
        case .sessionNotFound: Self.e(404, .failure, "no checkout session with that id")
        case .sessionExpired: Self.e(410, .failure, "the checkout session's TTL has passed")
        case .sessionUsed: Self.e(409, .failure, "the checkout session was already paid (or is being paid)")
        case .sessionAttemptsExceeded: Self.e(409, .failure, "the checkout session was closed after too many failed attempts")
        case .sessionBrandNotAccepted: Self.e(422, .failure, "the card's brand is not among the session's accepted brands")
        case .velocityLimit: Self.e(429, .failure, "a velocity limit (sidecar.velocity) was reached: nothing was stored; retry after Retry-After seconds")
        case .mandateNotFound: Self.e(404, .failure, "no mandate with that id")
        case .mandateCycleInvalid: Self.e(422, .failure, "a cycle outside 1…max_cycles")
        case .mandateCycleNotDue: Self.e(422, .failure, "the cycle's date has not come")
        case .mandateAmountExceeded: Self.e(422, .failure, "a charge (or a plan amount) above the mandate's max_amount")
        case .mandateExpired: Self.e(410, .failure, "the mandate (or the cycle's due date) is past its expiry")
        case .mandateCancelled: Self.e(409, .failure, "the mandate was cancelled")
        case .mandateInstrumentGone: Self.e(422, .failure, "the mandate's instrument was detached")

        case .paymentNotCapturable: Self.e(409, .failure, "a capture of a payment that is not `requires_capture` (or is being captured or canceled)")
        case .paymentNotCancelable: Self.e(409, .failure, "a cancel of a payment that is not `requires_capture` (or is being captured or canceled)")
        case .paymentNotRefundable: Self.e(409, .failure, "a refund of a payment that has captured nothing")
        case .authorizationExpired: Self.e(409, .failure, "the authorization expired before it was captured: the payment is `canceled`")
        case .captureExceedsAuthorized: Self.e(422, .failure, "a capture amount above the authorized amount")
        case .refundExceedsCaptured: Self.e(422, .failure, "refunds (succeeded, pending or in flight) would exceed the captured amount")
        case .refundNotFound: Self.e(404, .failure, "no refund with that id")
        case .operationNotSupported: Self.e(422, .failure, "the processor (its relay template) has no capture, void or refund request")
        case .eventNotFound: Self.e(404, .failure, "no event with that id (unknown, or past the retention)")
        }
    }

    private static func e(_ status: Int, or other: Int? = nil, _ exit: ExitStatus, _ meaning: String) -> Entry {
        Entry(status: status, otherStatus: other, exit: exit, meaning: meaning)
    }

    /// The HTTP status the code answers with.
    public var status: Int { entry.status }
    /// The `vault` command's exit code for it.
    public var exitCode: Int32 { entry.exit.rawValue }
    /// One line for people.
    public var meaning: String { entry.meaning }
    /// The identifier, e.g. `KEY_MISMATCH`.
    public var description: String { rawValue }

    /// A card-rules code (module CardRules cannot see the catalogue; every one of its codes is one here).
    public init(cardRules code: CardRulesError.Code) {
        switch code {
        case .nonDigit: self = .nonDigitCharacters
        case .empty: self = .cardNumberEmpty
        case .tooShort: self = .cardNumberTooShort
        case .tooLong: self = .cardNumberTooLong
        case .unknownBrand: self = .unknownCardBrand
        case .invalidLength: self = .invalidCardLength
        case .luhnFailed: self = .luhnCheckFailed
        case .brandNotAccepted: self = .brandNotAccepted
        case .expiryMalformed: self = .expiryMalformed
        case .invalidMonth: self = .invalidExpiryMonth
        case .expired: self = .cardExpired
        case .expiryTooFar: self = .expiryTooFar
        case .cvcMalformed: self = .cvcMalformed
        case .cvcLength: self = .invalidCVCLength
        case .binTableInvalid: self = .binTableInvalid
        }
    }
}
