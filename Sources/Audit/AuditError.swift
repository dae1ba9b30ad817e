import VaultCrypto

/// The error of the audit log (module Audit): opening or resuming a log file.
///
/// `code` is a stable upper-snake identifier (docs/audit-log.md); new codes are added, never
/// renamed. `message` names the file and the reason; audit lines never hold card data, and
/// neither does a message.
public struct AuditError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The audit log's codes: a part of the catalogue (`ErrorCode`), each naming its catalogue code.
    public enum Code: Sendable, Hashable, CaseIterable, CustomStringConvertible {
        /// The log file cannot be opened, read, locked or examined (the message has the system's reason).
        case logUnavailable
        /// Appending a line failed (a full disk, an I/O error); the line is not in the file.
        case logWriteFailed
        /// The file's last line is not an audit line (another file, an edit, or two torn writes in
        /// a row): the writer will not chain onto it.
        case logTailInvalid
        /// `process` is not `sidecar`, `gateway` or `cli`.
        case processInvalid
        /// `record` after `close()`.
        case logClosed

        /// The catalogue's code.
        public var code: ErrorCode {
            switch self {
            case .logUnavailable: .auditLogUnavailable
            case .logWriteFailed: .auditLogWriteFailed
            case .logTailInvalid: .auditLogTailInvalid
            case .processInvalid: .auditProcessInvalid
            case .logClosed: .auditLogClosed
            }
        }
        /// The identifier, e.g. `AUDIT_LOG_UNAVAILABLE`.
        public var rawValue: String { code.rawValue }
        public var description: String { rawValue }
    }

    /// What went wrong, as a stable code.
    public let code: Code
    /// A human message: the file and the reason.
    public let message: String

    /// Makes an error.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
