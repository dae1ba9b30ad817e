import VaultCrypto

/// The one error of the store layer: a stable code and a message without card data, statements
/// or bound values (a database error is reduced to its result code or SQLSTATE).
public struct StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The store's codes: a part of the catalogue (`ErrorCode`), each naming its catalogue code.
    public enum Code: Sendable, Hashable, CaseIterable, CustomStringConvertible {
        /// The store cannot be reached or refused the operation.
        case unavailable
        /// A stored row could not be read back (not what this version wrote).
        case corruptRow
        /// A unique key is taken (the stores turn it into their own meaning).
        case duplicate
        /// A token with that id already exists.
        case tokenExists
        /// A single-use token already has a live or successful payment.
        case tokenInUse
        /// The store was made by a newer version (a migration this version does not know).
        case tooNew

        /// The catalogue's code.
        public var code: ErrorCode {
            switch self {
            case .unavailable: .storeUnavailable
            case .corruptRow: .storeRowCorrupt
            case .duplicate: .storeDuplicate
            case .tokenExists: .tokenExists
            case .tokenInUse: .tokenInUse
            case .tooNew: .storeTooNew
            }
        }
        /// The identifier, e.g. `STORE_UNAVAILABLE`.
        public var rawValue: String { code.rawValue }
        public var description: String { rawValue }
    }

    /// What went wrong.
    public let code: Code
    /// For people; never card data.
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }
}

extension VaultError {
    /// A store error carried over with its code (the HTTP status and exit code follow from it).
    public init(store error: StoreError) {
        self.init(error.code.code, error.message)
    }
}
