import ArgumentParser
import Sidecar

/// One setting of the servers, defined once: its key in `vault.json` (snake_case), hence its flag
/// (`--socket-mode`) and its environment variable (`VAULT_SIDECAR_SOCKET_MODE`), its default and its
/// help. The option groups, the resolver, `vault.json`'s check of known keys and `vault config
/// check` all read these tables (docs/configuration.md).
public struct Setting: Sendable {
    public enum Section: String, Sendable, CaseIterable {
        case sidecar, gateway
    }

    public let section: Section
    /// The key in the file's section, snake_case.
    public let key: String
    /// The default the resolver uses (nil: none).
    public let defaultValue: String?
    /// What happens without a value, when that is not a value (e.g. "the process's group").
    public let defaultDescription: String?
    /// What the flag does, for `--help`.
    public let help: String
    /// The largest value a number setting takes (docs/configuration.md), if bounded.
    public let maximum: Double?

    init(_ section: Section, _ key: String, default value: String? = nil, otherwise description: String? = nil, maximum: Double? = nil, help: String) {
        self.section = section
        self.key = key
        self.defaultValue = value
        self.defaultDescription = description
        self.maximum = maximum
        self.help = help
    }

    /// A day and a year in seconds, the bounds of the lifetimes and intervals.
    static let day = 86_400.0, year = 31_536_000.0

    /// The flag's name without its dashes: `socket_mode` → `socket-mode`.
    public var flag: String { key.replacingOccurrences(of: "_", with: "-") }
    /// `VAULT_<SECTION>_<KEY>`.
    public var environmentVariable: String { "VAULT_\(section.rawValue.uppercased())_\(key.uppercased())" }
    /// How `vault config check` and `--help` name the default.
    public var defaultText: String { defaultValue ?? defaultDescription ?? "none" }

    /// The flag's help: what it does, its default and its environment variable.
    public var argumentHelp: ArgumentHelp {
        ArgumentHelp("\(help) Default: \(defaultText). Environment: \(environmentVariable).")
    }
}

/// The settings a section of `vault.json` has, and those of them that both servers share (their
/// option groups are generic over the section: `SocketOptions<SidecarSettings>`).
public protocol SettingsSection {
    static var section: Setting.Section { get }
    static var socket: Setting { get }
    static var socketMode: Setting { get }
    static var socketGroup: Setting { get }
    static var store: Setting { get }
    static var keys: Setting { get }
    static var auditLog: Setting { get }
    static var logLevel: Setting { get }
    static var logFormat: Setting { get }
    static var logRequests: Setting { get }
    /// Every setting of the section, in the order `vault config check` prints them.
    static var all: [Setting] { get }
}

/// `vault serve` (`vault-sidecar`): the `sidecar` section.
public enum SidecarSettings: SettingsSection {
    public static let section = Setting.Section.sidecar
    public static let socket = Setting(.sidecar, "socket", default: "vault.sock", help: "Unix socket path.")
    public static let socketMode = Setting(.sidecar, "socket_mode", default: "660", help: "Socket file mode, octal.")
    public static let socketGroup = Setting(
        .sidecar, "socket_group", otherwise: "the process's group",
        help: "Group owning the socket (name or gid); with mode 660 its members may connect.")
    public static let store = Setting(
        .sidecar, "store", default: "sqlite:vault.sqlite",
        help: "Token store: sqlite:PATH or postgres://user@host/db (or ?host=/socket/dir).")
    public static let keys = Setting(
        .sidecar, "keys", default: "Keys", help: "Keys directory (public keys and ring.json; never secret or fingerprint keys).")
    public static let tokenTTL = Setting(.sidecar, "token_ttl", default: "900", maximum: Setting.year, help: "Token lifetime in seconds, 1 to 31536000 (a year).")
    public static let cvcTTL = Setting(.sidecar, "cvc_ttl", default: "300", maximum: Setting.day, help: "CVC lifetime in seconds, 1 to 86400 (a day), ≤ token lifetime.")
    public static let heldCVCsMax = Setting(
        .sidecar, "held_cvcs_max", default: "1000000", maximum: 10_000_000,
        help: "Most CVCs held in memory at once, 1 to 10000000 (about 220 bytes each); past it the oldest are dropped first and their tokens pay without a CVC.")
    public static let tokenFormat = Setting(
        .sidecar, "token_format", default: "tok",
        help: "Form of new tokens when a request names none: tok (tok_ + 128 random bits) or card (card-shaped: the card's length, visible prefix and last 4, a random middle that passes no brand's card rules; docs/card-tokens.md).")
    public static let cardTokenLuhnValid = Setting(
        .sidecar, "card_token_luhn_valid", default: "false",
        help: "Accept the names of card-shaped tokens made by earlier versions that pass a brand's card rules (Luhn-valid ones). New card-shaped tokens never pass any brand's rules, whatever this says (docs/card-tokens.md).")
    public static let tokenLookupMisses = Setting(
        .sidecar, "token_lookup_misses", default: VelocityRule.defaultLookupMisses,
        help: "Lookups of tokens that do not exist one caller (uid) may make: limit/window (e.g. 100/10m), or off. Past it, 429 VELOCITY_LIMIT with Retry-After (docs/velocity.md).")
    public static let allow = Setting(
        .sidecar, "allow", otherwise: "this process's uid, every role",
        help: "Allow a local user or group: uid:N=roles or gid:N=roles (roles: tokenize,pay,admin). Repeatable.")
    public static let gateway = Setting(
        .sidecar, "gateway", default: "gateway.sock", help: "The gateway adapter's socket (vault gateway), for payments.")
    public static let reconcileAfter = Setting(
        .sidecar, "reconcile_after", default: "60", maximum: Setting.day, help: "Reconcile a payment still processing after this many seconds, 1 to 86400.")
    public static let authorizationTTL = Setting(
        .sidecar, "authorization_ttl", default: "604800", maximum: 31 * Setting.day,
        help: "Seconds an authorization made with capture: false waits for its capture before it expires (canceled), 1 to 2678400 (31 days).")
    public static let sessionMaxAttempts = Setting(
        .sidecar, "session_max_attempts", default: String(SessionService.defaultMaxAttempts), maximum: 1000,
        help: "Failed payment attempts a checkout session allows before it is closed (SESSION_ATTEMPTS_EXCEEDED), 1 to 1000.")
    public static let velocity = Setting(
        .sidecar, "velocity", otherwise: VelocityRule.defaults.map(\.description).joined(separator: ","),
        help: "A velocity limit scope:action:count=limit/window (e.g. session:tokenize:attempts=10/10m; docs/velocity.md), repeatable; off: none. Given ones replace the defaults.")
    public static let customerReferenceUnique = Setting(
        .sidecar, "customer_reference_unique", default: "false",
        help: "A customer reference names at most one customer of the store (CUSTOMER_REFERENCE_TAKEN); existing ones are adopted at start, the oldest customer keeping a shared one.")
    public static let webhook = Setting(
        .sidecar, "webhook", otherwise: "none (events are kept for GET /v1/events only)",
        help: "Deliver events to this endpoint: http://127.0.0.1[:port]/path (loopback only) or unix:/path/to.sock[:/path] (docs/events.md).")
    public static let webhookSecretFile = Setting(
        .sidecar, "webhook_secret_file",
        help: "File holding the webhook signing secret (at least 32 bytes, not readable by others); required with --webhook.")
    public static let webhookMaxBackoff = Setting(
        .sidecar, "webhook_max_backoff", default: "300", maximum: Setting.day,
        help: "Longest wait in seconds between two attempts of a webhook delivery (1 s doubling up to this, with jitter), 1 to 86400.")
    public static let eventRetention = Setting(
        .sidecar, "event_retention", default: "2592000", maximum: Setting.year,
        help: "Seconds an event is kept (GET /v1/events, webhook retries), delivered or not, 3600 to 31536000 (a year); 30 days by default.")
    public static let auditLog = Setting(
        .sidecar, "audit_log",
        help: "Append an audit line per tokenize, read, delete, pay, confirm and key reload to this file (docs/audit-log.md).")
    public static let logLevel = Setting(
        .sidecar, "log_level", default: "info", help: "Log level: trace, debug, info, notice, warning, error, critical.")
    public static let logFormat = Setting(
        .sidecar, "log_format", default: "text",
        help: "Log line format: text, or json (one object per line). Both have millisecond UTC timestamps; under systemd each line carries its journald priority.")
    public static let logRequests = Setting(
        .sidecar, "log_requests", default: "false", help: "Log every request (route template, status, duration, request id, error code) at info level.")

    public static let all = [
        socket, socketMode, socketGroup, store, keys, tokenTTL, cvcTTL, heldCVCsMax, tokenFormat, cardTokenLuhnValid, tokenLookupMisses, allow, gateway, reconcileAfter, authorizationTTL, sessionMaxAttempts,
        velocity, customerReferenceUnique, webhook, webhookSecretFile, webhookMaxBackoff, eventRetention, auditLog, logLevel, logFormat, logRequests,
    ]
}

/// `vault gateway`: the `gateway` section.
public enum GatewaySettings: SettingsSection {
    public static let section = Setting.Section.gateway
    public static let socket = Setting(.gateway, "socket", default: "gateway.sock", help: "Unix socket path.")
    public static let socketMode = Setting(.gateway, "socket_mode", default: "600", help: "Socket file mode, octal.")
    public static let socketGroup = Setting(.gateway, "socket_group", otherwise: "the process's group", help: "Group owning the socket (name or gid).")
    public static let store = Setting(
        .gateway, "store", default: "sqlite:gateway-ledger.sqlite",
        help: "The store of the processor ledger: sqlite:PATH or postgres://user@host/db. Gateways sharing a PostgreSQL store charge a payment id at most once whichever gets it.")
    public static let keys = Setting(
        .gateway, "keys", otherwise: "$CREDENTIALS_DIRECTORY", help: "Keys directory with *.key files and fingerprint.fk.")
    public static let ring = Setting(
        .gateway, "ring", otherwise: "KEYS/ring.json if present",
        help: "The key ring (ring.json): only its primary and active kids open.")
    public static let passphraseFile = Setting(
        .gateway, "passphrase_file", otherwise: "the `passphrase` credential, if any",
        help: "File with the passphrase of protected secret keys.")
    public static let processor = Setting(
        .gateway, "processor", default: "sandbox",
        help: "Processor: sandbox, or relay:TEMPLATE.json for a real processor's API (templates in deploy/relay/). sandbox:PATH is an alias of --processor sandbox --store sqlite:PATH.")
    public static let ledger = Setting(.gateway, "ledger", help: "Alias of --store sqlite:PATH (kept for existing set-ups).")
    public static let settleInterval = Setting(
        .gateway, "settle_interval", default: "2", maximum: 3600, help: "Seconds between rounds of the background settler of unknown outcomes, 0.05 to 3600.")
    public static let fingerprintGuessLimit = Setting(
        .gateway, "fingerprint_guess_limit", default: "20", maximum: 1_000_000,
        help: "The guessing limit: distinct cards per truncation group (visible prefix, last 4, length) whose fingerprints are answered in the window; past it a new card's is withheld (docs/threat-model.md), 1 to 1000000.")
    public static let fingerprintGuessWindow = Setting(
        .gateway, "fingerprint_guess_window", default: "86400", maximum: 7 * Setting.day,
        help: "The guessing limit's sliding window in seconds, 60 to 604800 (a week).")
    public static let allowUid = Setting(
        .gateway, "allow_uid", otherwise: "this process's uid", help: "A uid allowed to call the gateway (repeatable).")
    public static let allowUser = Setting(
        .gateway, "allow_user", otherwise: "none", help: "A user (name) allowed to call the gateway, e.g. vault-sidecar (repeatable).")
    public static let auditLog = Setting(
        .gateway, "audit_log", help: "Append an audit line per authorize/confirm and key reload to this file (docs/audit-log.md).")
    public static let logLevel = Setting(
        .gateway, "log_level", default: "info", help: "Log level: trace, debug, info, notice, warning, error, critical.")
    public static let logFormat = Setting(
        .gateway, "log_format", default: "text",
        help: "Log line format: text, or json (one object per line). Both have millisecond UTC timestamps; under systemd each line carries its journald priority.")
    public static let logRequests = Setting(
        .gateway, "log_requests", default: "false", help: "Log every request (route template, status, duration, request id, error code) at info level.")

    public static let all = [
        socket, socketMode, socketGroup, keys, ring, passphraseFile, processor, store, ledger, settleInterval, fingerprintGuessLimit, fingerprintGuessWindow, allowUid, allowUser,
        auditLog, logLevel, logFormat, logRequests,
    ]
}

extension Setting.Section {
    /// The section's table.
    public var settings: [Setting] {
        switch self {
        case .sidecar: SidecarSettings.all
        case .gateway: GatewaySettings.all
        }
    }
}
