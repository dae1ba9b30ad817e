/// The error of the audit log (module Audit): opening or resuming a log file.
///
/// `code` is a stable upper-snake identifier (docs/audit-log.md); new codes are added, never
/// renamed. `message` names the file and the reason; audit lines never hold card data, and
/// neither does a message.
public struct AuditError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A stable error identifier.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The log file cannot be opened, read, locked or examined (the message has the system's reason).
        public static let logUnavailable = Code(rawValue: "AUDIT_LOG_UNAVAILABLE")
        /// Appending a line failed (a full disk, an I/O error); the line is not in the file.
        public static let logWriteFailed = Code(rawValue: "AUDIT_LOG_WRITE_FAILED")
        /// The file's last line is not an audit line (another file, an edit, or two torn writes in
        /// a row): the writer will not chain onto it.
        public static let logTailInvalid = Code(rawValue: "AUDIT_LOG_TAIL_INVALID")
        /// `process` is not `sidecar`, `gateway` or `cli`.
        public static let processInvalid = Code(rawValue: "AUDIT_PROCESS_INVALID")
        /// `record` after `close()`.
        public static let logClosed = Code(rawValue: "AUDIT_LOG_CLOSED")
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
