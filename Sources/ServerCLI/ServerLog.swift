#if canImport(Glibc)
import Glibc
#endif
import Logging
import SocketHTTP
import Synchronization
import VaultCrypto

/// How both servers write their log: one line per entry on standard error, as text (the default)
/// or as JSON (`--log-format json`), with a millisecond UTC timestamp. Under systemd (standard
/// error is the journal's stream, `JOURNAL_STREAM`), each line starts with its syslog priority
/// (`<6>` for info, `<3>` for error…), which journald takes as the entry's priority and strips.
///
/// Log lines carry what the code logs: never card data (the servers never log a request body or
/// path, only route templates and codes).
public enum LogFormat: String, Sendable, CaseIterable {
    case text, json
}

/// The logging part of a server's configuration.
public struct LogSetup: Sendable {
    public var level: Logger.Level
    public var format: LogFormat

    public init(level: Logger.Level = .info, format: LogFormat = .text) {
        self.level = level
        self.format = format
    }

    /// A logger named `label` writing with this setup. The first call in a process also makes
    /// it the process's logging system, so loggers made elsewhere (`Logger(label:)`) write the
    /// same way.
    public func logger(_ label: String) -> Logger {
        let format = self.format
        let journal = ServerLogHandler.stderrIsJournal()
        ServerLogHandler.bootstrapOnce { label in ServerLogHandler(label: label, format: format, journal: journal) }
        var logger = Logger(label: label) { label in ServerLogHandler(label: label, format: format, journal: journal) }
        logger.logLevel = level
        return logger
    }
}

/// The log handler of `LogSetup`: formats an entry and writes it with one `write(2)`, so lines
/// from concurrent tasks never interleave.
public struct ServerLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    public var metadataProvider: Logger.MetadataProvider?
    let label: String
    let format: LogFormat
    let journal: Bool
    let fd: Int32

    public init(label: String, format: LogFormat, journal: Bool, fd: Int32 = 2) {
        self.label = label
        self.format = format
        self.journal = journal
        self.fd = fd
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var all = metadata
        if let provided = metadataProvider?.get() { all.merge(provided) { _, new in new } }
        if let extra = event.metadata { all.merge(extra) { _, new in new } }
        // Logged while a request is handled: its `Request-Id`, whichever logger wrote the line.
        if all["request_id"] == nil, let id = RequestScope.requestID { all["request_id"] = "\(id)" }
        var line = journal ? "<\(Self.syslogPriority(event.level))>" : ""
        line += Self.format(
            format, timestamp: Self.timestamp(), level: event.level, label: label, message: event.message.description,
            metadata: all, source: event.source)
        line += "\n"
        var bytes = Array(line.utf8)
        bytes.withUnsafeMutableBytes { buffer in
            var at = 0
            while at < buffer.count {
                let n = write(fd, buffer.baseAddress! + at, buffer.count - at)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return }
                at += n
            }
        }
    }

    /// One entry as a line (without the newline).
    static func format(
        _ format: LogFormat, timestamp: String, level: Logger.Level, label: String, message: String,
        metadata: Logger.Metadata, source: String
    ) -> String {
        let keys = metadata.keys.sorted()
        switch format {
        case .text:
            var line = "\(timestamp) \(level) \(label):"
            for key in keys { line += " \(key)=\(metadata[key]!)" }
            line += " [\(source)] \(message)"
            return line
        case .json:
            var line = "{\"ts\":\"\(timestamp)\",\"level\":\"\(level)\",\"logger\":"
            appendJSONString(label, to: &line)
            line += ",\"msg\":"
            appendJSONString(message, to: &line)
            line += ",\"source\":"
            appendJSONString(source, to: &line)
            for key in keys where !["ts", "level", "logger", "msg", "source"].contains(key) {
                line += ","
                appendJSONString(key, to: &line)
                line += ":"
                appendJSON(metadata[key]!, to: &line)
            }
            line += "}"
            return line
        }
    }

    static func appendJSON(_ value: Logger.MetadataValue, to out: inout String) {
        switch value {
        case .string(let s): appendJSONString(s, to: &out)
        case .stringConvertible(let c): appendJSONString(c.description, to: &out)
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                appendJSON(item, to: &out)
            }
            out += "]"
        case .dictionary(let dict):
            out += "{"
            for (i, key) in dict.keys.sorted().enumerated() {
                if i > 0 { out += "," }
                appendJSONString(key, to: &out)
                out += ":"
                appendJSON(dict[key]!, to: &out)
            }
            out += "}"
        }
    }

    static func appendJSONString(_ s: String, to out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F || (0x2028...0x2029).contains(scalar.value):
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }

    /// Now, as `2026-11-24T23:40:01.123Z`.
    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var t = now.tv_sec
        var parts = tm()
        gmtime_r(&t, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let ms = Int(now.tv_nsec / 1_000_000)
        let msText = ms < 10 ? "00\(ms)" : ms < 100 ? "0\(ms)" : "\(ms)"
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(msText)Z"
    }

    /// The syslog priority journald reads from a `<N>` prefix (sd-daemon(3)).
    static func syslogPriority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    /// Whether standard error is the journal's stream: `JOURNAL_STREAM` (set by systemd) names
    /// its device and inode (systemd.exec(5)).
    static func stderrIsJournal() -> Bool {
        guard let value = getenv("JOURNAL_STREAM").map({ String(cString: $0) }) else { return false }
        let parts = value.split(separator: ":")
        guard parts.count == 2, let dev = UInt64(parts[0]), let ino = UInt64(parts[1]) else { return false }
        var st = stat()
        guard fstat(2, &st) == 0 else { return false }
        return UInt64(st.st_dev) == dev && UInt64(st.st_ino) == ino
    }

    private static let bootstrapped = Mutex(false)

    /// `LoggingSystem.bootstrap`, at most once per process (a second call would trap).
    static func bootstrapOnce(_ factory: @escaping @Sendable (String) -> any LogHandler) {
        let first = bootstrapped.withLock { done in
            defer { done = true }
            return !done
        }
        if first { LoggingSystem.bootstrap(factory) }
    }
}
