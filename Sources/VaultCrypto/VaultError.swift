/// The error of the vault's modules below the servers (VaultCrypto, VaultOpen, VaultClient, the CLI).
///
/// `code` is a code of the catalogue (`ErrorCode`, documented in `docs/errors.md`); new codes are added,
/// never renamed. `message` is for people and never contains card data or key bytes. `field`
/// names the input the error is about (`card.number`, `fields.pan`, a file path) when there is one.
public struct VaultError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A stable error identifier: a code of the catalogue (`ErrorCode`), the only place codes are made.
    public typealias Code = ErrorCode

    /// What went wrong, as a stable code.
    public let code: Code
    /// A human message without card data or key bytes.
    public let message: String
    /// The input the error is about, when there is one.
    public let field: String?
    /// Seconds to wait before retrying, answered as `Retry-After` (`VELOCITY_LIMIT`); nil: the server's usual.
    public var retryAfter: Int?

    /// Makes an error. Never put card data or key bytes in `message`.
    public init(_ code: Code, _ message: String, field: String? = nil, retryAfter: Int? = nil) {
        self.code = code
        self.message = message
        self.field = field
        self.retryAfter = retryAfter
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
