import VaultCrypto

/// The one error of the store layer: a stable code and a message without card data, statements
/// or bound values (a database error is reduced to its result code or SQLSTATE).
public struct StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A stable identifier (docs/errors.md).
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }
        /// The store cannot be reached or refused the operation.
        public static let unavailable = Code(rawValue: "STORE_UNAVAILABLE")
        /// A stored row could not be read back (not what this version wrote).
        public static let corruptRow = Code(rawValue: "STORE_ROW_CORRUPT")
        /// A unique key is taken (the stores turn it into their own meaning below).
        public static let duplicate = Code(rawValue: "STORE_DUPLICATE")
        /// A token with that id already exists.
        public static let tokenExists = Code(rawValue: "TOKEN_EXISTS")
        /// A single-use token already has a live or successful payment.
        public static let tokenInUse = Code(rawValue: "TOKEN_IN_USE")
        /// The store was made by a newer version (a migration this version does not know).
        public static let tooNew = Code(rawValue: "STORE_TOO_NEW")
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
        self.init(Code(rawValue: error.code.rawValue), error.message)
    }
}
