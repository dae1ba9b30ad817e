#if canImport(Glibc)
import Store
import Glibc
#endif
import Foundation
import Gateway
import Logging
import Sidecar
import SocketHTTP
import Tokenizer
import VaultCrypto

/// `vault.json`: one configuration file for the sidecar and the gateway (docs/configuration.md).
///
/// Every setting has an embedded default; the file overrides it, an environment variable
/// `VAULT_<SECTION>_<KEY>` overrides the file, and a command-line flag overrides both. Everything
/// is checked at start, and an error names the setting and where its value came from.
struct ConfigFile {
    /// The settings of each section (snake_case, as in the file).
    static let keys: [String: [String]] = [
        "sidecar": [
            "socket", "socket_mode", "socket_group", "store", "keys", "token_ttl", "cvc_ttl", "allow", "gateway", "reconcile_after",
            "session_max_attempts", "audit_log", "log_level", "log_requests",
        ],
        "gateway": [
            "socket", "socket_mode", "socket_group", "keys", "ring", "passphrase_file", "processor", "store", "ledger", "settle_interval",
            "allow_uid", "allow_user", "audit_log", "log_level", "log_requests",
        ],
    ]

    var sections: [String: [String: Any]] = [:]
    var path: String?

    /// Reads and checks the file's shape (known sections and keys only).
    /// - Throws: `CONFIG_NOT_FOUND`, `CONFIG_INVALID` naming the setting.
    static func load(_ path: String) throws(VaultError) -> ConfigFile {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw VaultError(.configNotFound, "cannot read the configuration file \(path)", field: path)
        }
        guard let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw VaultError(.configInvalid, "\(path) is not a JSON object", field: path)
        }
        var file = ConfigFile(path: path)
        for (name, value) in root {
            guard let known = keys[name] else {
                throw VaultError(.configInvalid, "\(path): unknown section \"\(name)\" (sections: sidecar, gateway)", field: name)
            }
            guard let section = value as? [String: Any] else {
                throw VaultError(.configInvalid, "\(path): \"\(name)\" must be an object", field: name)
            }
            if let extra = Set(section.keys).subtracting(known).sorted().first {
                throw VaultError(.configInvalid, "\(path): unknown setting \"\(name).\(extra)\"", field: "\(name).\(extra)")
            }
            file.sections[name] = section
        }
        return file
    }
}

/// One section's settings as resolved from flag, environment, file and default.
struct Settings {
    let section: String
    let file: [String: Any]
    let filePath: String?
    let environment: [String: String]
    /// What was used, for `vault config check`: setting, value, source.
    private(set) var report: [(String, String, String)] = []

    init(section: String, config: ConfigFile?, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.section = section
        self.file = config?.sections[section] ?? [:]
        self.filePath = config?.path
        self.environment = environment
    }

    func envName(_ key: String) -> String { "VAULT_\(section.uppercased())_\(key.uppercased())" }

    /// Where a setting's value comes from: 3 a flag, 2 the environment, 1 the file, 0 nowhere (the
    /// default). For aliases: the value from the highest source wins.
    func precedence(_ key: String, flag: String?) -> Int {
        if flag != nil { return 3 }
        if environment[envName(key)] != nil { return 2 }
        return file[key] != nil ? 1 : 0
    }

    /// The raw value and where it came from.
    private func lookup(_ key: String, flag: String?) -> (Any, String)? {
        if let flag { return (flag, "--" + key.replacingOccurrences(of: "_", with: "-")) }
        if let e = environment[envName(key)] { return (e, envName(key)) }
        if let f = file[key] { return (f, "\(filePath ?? "config"): \(section).\(key)") }
        return nil
    }

    private func invalid(_ key: String, _ source: String, _ why: String) -> VaultError {
        VaultError(.configInvalid, "\(section).\(key) (from \(source)): \(why)", field: "\(section).\(key)")
    }

    mutating func string(_ key: String, flag: String?, default value: String?) throws(VaultError) -> String? {
        guard let (raw, source) = lookup(key, flag: flag) else {
            if let value { report.append((key, value, "default")) }
            return value
        }
        guard let s = raw as? String, !s.isEmpty else { throw invalid(key, source, "must be a non-empty string") }
        report.append((key, Self.redacted(s), source))
        return s
    }

    /// A URL's password is never printed (`postgres://vault:secret@db/…` → `postgres://vault:***@db/…`).
    static func redacted(_ value: String) -> String {
        guard let scheme = value.range(of: "://"), let at = value[scheme.upperBound...].firstIndex(of: "@"),
              let colon = value[scheme.upperBound..<at].firstIndex(of: ":")
        else { return value }
        return String(value[..<value.index(after: colon)]) + "***" + String(value[at...])
    }

    mutating func number(_ key: String, flag: Double?, default value: Double, atLeast minimum: Double) throws(VaultError) -> Double {
        guard let (raw, source) = lookup(key, flag: flag.map { String($0) }) else {
            report.append((key, String(value), "default"))
            return value
        }
        let n: Double? = (raw as? String).flatMap(Double.init) ?? (raw as? NSNumber)?.doubleValue
        guard let n, n.isFinite, n >= minimum else { throw invalid(key, source, "must be a number ≥ \(minimum)") }
        report.append((key, String(n), source))
        return n
    }

    mutating func bool(_ key: String, flag: Bool, default value: Bool) throws(VaultError) -> Bool {
        guard let (raw, source) = lookup(key, flag: flag ? "true" : nil) else {
            report.append((key, String(value), "default"))
            return value
        }
        let b: Bool?
        switch raw {
        case let s as String: b = ["true", "1", "yes"].contains(s) ? true : ["false", "0", "no"].contains(s) ? false : nil
        case let v as Bool: b = v
        default: b = nil
        }
        guard let b else { throw invalid(key, source, "must be true or false") }
        report.append((key, String(b), source))
        return b
    }

    /// A list: repeated flags, a comma-separated environment variable, or a JSON array of strings (or numbers).
    mutating func list(_ key: String, flag: [String], default value: [String]) throws(VaultError) -> [String] {
        let values: [String]
        let source: String
        if !flag.isEmpty {
            (values, source) = (flag, "--" + key.replacingOccurrences(of: "_", with: "-"))
        } else if let e = environment[envName(key)] {
            (values, source) = (e.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }, envName(key))
        } else if let f = file[key] {
            source = "\(filePath ?? "config"): \(section).\(key)"
            guard let array = f as? [Any] else { throw invalid(key, source, "must be a list") }
            var out: [String] = []
            for item in array {
                if let s = item as? String { out.append(s) } else if let n = item as? Int { out.append(String(n)) } else {
                    throw invalid(key, source, "must be a list of strings")
                }
            }
            values = out
        } else {
            report.append((key, value.joined(separator: ","), "default"))
            return value
        }
        report.append((key, values.joined(separator: ","), source))
        return values
    }

    mutating func logLevel(flag: String?) throws(VaultError) -> Logger.Level {
        let text = try string("log_level", flag: flag, default: "info")!
        guard let level = Logger.Level(rawValue: text) else {
            throw invalid("log_level", lookup("log_level", flag: flag)?.1 ?? "default", "must be trace, debug, info, notice, warning, error or critical")
        }
        return level
    }

    mutating func mode(_ key: String, flag: String?, default value: String) throws(VaultError) -> mode_t {
        let text = try string(key, flag: flag, default: value)!
        guard let mode = mode_t(text, radix: 8), mode <= 0o777 else {
            throw invalid(key, lookup(key, flag: flag)?.1 ?? "default", "must be an octal file mode, like 660")
        }
        return mode
    }

    /// Runs a parser over a setting's value, naming the setting in its error.
    func checked<T>(_ key: String, flag: String?, _ body: () throws(VaultError) -> T) throws(VaultError) -> T {
        do throws(VaultError) { return try body() } catch {
            throw invalid(key, lookup(key, flag: flag)?.1 ?? "default", "\(error.code): \(error.message)")
        }
    }
}

/// The sidecar's flags as given (nil: not given).
struct SidecarFlags {
    var socket, socketMode, socketGroup, store, keys, gateway, auditLog, logLevel: String?
    var tokenTTL, cvcTTL, reconcileAfter, sessionMaxAttempts: Double?
    var allow: [String] = []
    var logRequests = false
}

/// The gateway's flags as given.
struct GatewayFlags {
    var socket, socketMode, socketGroup, keys, ring, passphraseFile, processor, store, ledger, auditLog, logLevel: String?
    var settleInterval: Double?
    var allowUid: [String] = []
    var allowUser: [String] = []
    var logRequests = false
}

enum ResolvedConfiguration {
    /// The sidecar's configuration from flags, environment, file and defaults.
    static func sidecar(_ f: SidecarFlags, config: ConfigFile?) throws(VaultError) -> (SidecarServer.Configuration, Logger.Level, Settings) {
        var s = Settings(section: "sidecar", config: config)
        var c = SidecarServer.Configuration()
        c.socketPath = try s.string("socket", flag: f.socket, default: "vault.sock")!
        c.socketMode = try s.mode("socket_mode", flag: f.socketMode, default: "660")
        if let g = try s.string("socket_group", flag: f.socketGroup, default: nil) {
            c.socketGroup = try s.checked("socket_group", flag: f.socketGroup) { () throws(VaultError) in try SocketFile.groupID(g) }
        }
        let store = try s.string("store", flag: f.store, default: "sqlite:vault.sqlite")!
        c.store = try s.checked("store", flag: f.store) { () throws(VaultError) in try StoreLocation(store) }
        c.keysDirectory = try s.string("keys", flag: f.keys, default: "Keys")!
        let tokenTTL = try s.number("token_ttl", flag: f.tokenTTL, default: 900, atLeast: 1)
        let cvcTTL = try s.number("cvc_ttl", flag: f.cvcTTL, default: 300, atLeast: 1)
        guard cvcTTL <= tokenTTL else {
            throw VaultError(.configInvalid, "sidecar.cvc_ttl (\(Int(cvcTTL)) s) must not exceed sidecar.token_ttl (\(Int(tokenTTL)) s)", field: "sidecar.cvc_ttl")
        }
        c.policy = TokenPolicy(tokenTTL: tokenTTL, cvcTTL: cvcTTL)
        let allow = try s.list("allow", flag: f.allow, default: [])
        if !allow.isEmpty { c.peers = try s.checked("allow", flag: f.allow.first) { () throws(VaultError) in try PeerPolicy(parsing: allow) } }
        c.gatewaySocket = try s.string("gateway", flag: f.gateway, default: "gateway.sock")
        let reconcile = try s.number("reconcile_after", flag: f.reconcileAfter, default: 60, atLeast: 1)
        c.reconcileAfter = .milliseconds(Int(reconcile * 1000))
        let attempts = try s.number(
            "session_max_attempts", flag: f.sessionMaxAttempts, default: Double(SessionService.defaultMaxAttempts), atLeast: 1)
        guard attempts == attempts.rounded(), attempts <= 1000 else {
            throw VaultError(.configInvalid, "sidecar.session_max_attempts must be a whole number from 1 to 1000", field: "sidecar.session_max_attempts")
        }
        c.sessionMaxAttempts = Int(attempts)
        c.auditLogPath = try s.string("audit_log", flag: f.auditLog, default: nil)
        c.logRequests = try s.bool("log_requests", flag: f.logRequests, default: false)
        let level = try s.logLevel(flag: f.logLevel)
        return (c, level, s)
    }

    /// The gateway's configuration from flags, environment, file and defaults.
    static func gateway(_ f: GatewayFlags, config: ConfigFile?) throws(VaultError) -> (GatewayServer.Configuration, Logger.Level, Settings) {
        var s = Settings(section: "gateway", config: config)
        var c = GatewayServer.Configuration()
        c.socketPath = try s.string("socket", flag: f.socket, default: "gateway.sock")!
        c.socketMode = try s.mode("socket_mode", flag: f.socketMode, default: "600")
        if let g = try s.string("socket_group", flag: f.socketGroup, default: nil) {
            c.socketGroup = try s.checked("socket_group", flag: f.socketGroup) { () throws(VaultError) in try SocketFile.groupID(g) }
        }
        c.keysDirectory = try s.string("keys", flag: f.keys, default: nil)
        c.ringPath = try s.string("ring", flag: f.ring, default: nil)
        c.passphraseFile = try s.string("passphrase_file", flag: f.passphraseFile, default: nil)
        let processor = try s.string("processor", flag: f.processor, default: "sandbox")!
        // The ledger's store: `store`, or its aliases `ledger PATH` and `processor sandbox:PATH`
        // (both meaning sqlite:PATH). The value from the highest source (flag, environment, file)
        // wins; two of the same source that disagree are refused.
        var candidates: [(rank: Int, value: String, setting: String)] = []
        if let store = try s.string("store", flag: f.store, default: nil) {
            candidates.append((s.precedence("store", flag: f.store), store, "gateway.store"))
        }
        if let ledger = try s.string("ledger", flag: f.ledger, default: nil) {
            candidates.append((s.precedence("ledger", flag: f.ledger), "sqlite:" + ledger, "gateway.ledger"))
        }
        if processor == "sandbox" {
            c.processor = .sandbox
        } else if processor.hasPrefix("sandbox:"), processor.count > 8 {
            c.processor = .sandbox
            candidates.append((s.precedence("processor", flag: f.processor), "sqlite:" + String(processor.dropFirst(8)), "gateway.processor"))
        } else if processor.hasPrefix("relay:"), processor.count > 6 {
            c.processor = .relay(templatePath: String(processor.dropFirst(6)))
        } else {
            throw VaultError(.configInvalid, "gateway.processor must be sandbox, sandbox:PATH or relay:TEMPLATE.json", field: "gateway.processor")
        }
        let top = candidates.map(\.rank).max() ?? 0
        let chosen = candidates.filter { $0.rank == top }
        if let first = chosen.first, let other = chosen.first(where: { $0.value != first.value }) {
            throw VaultError(
                .configInvalid,
                "\(first.setting) and \(other.setting) name different ledger stores (\(Settings.redacted(first.value)), \(Settings.redacted(other.value))): give one, gateway.store",
                field: "gateway.store")
        }
        var store = "sqlite:gateway-ledger.sqlite"
        if let first = chosen.first { store = first.value } else { _ = try s.string("store", flag: nil, default: store) }
        c.store = try s.checked("store", flag: f.store) { () throws(VaultError) in try StoreLocation(store) }
        let interval = try s.number("settle_interval", flag: f.settleInterval, default: 2, atLeast: 0.05)
        c.settleInterval = .milliseconds(Int(interval * 1000))
        var uids = Set<UInt32>()
        for text in try s.list("allow_uid", flag: f.allowUid, default: []) {
            guard let uid = UInt32(text) else {
                throw VaultError(.configInvalid, "gateway.allow_uid: \(text) is not a uid", field: "gateway.allow_uid")
            }
            uids.insert(uid)
        }
        for name in try s.list("allow_user", flag: f.allowUser, default: []) {
            guard let pw = getpwnam(name) else {
                throw VaultError(.configInvalid, "gateway.allow_user: no user \(name) on this system", field: "gateway.allow_user")
            }
            uids.insert(pw.pointee.pw_uid)
        }
        if !uids.isEmpty { c.allowedUIDs = uids }
        c.auditLogPath = try s.string("audit_log", flag: f.auditLog, default: nil)
        c.logRequests = try s.bool("log_requests", flag: f.logRequests, default: false)
        let level = try s.logLevel(flag: f.logLevel)
        return (c, level, s)
    }

    /// The configuration file named by `--config` or `$VAULT_CONFIG`, if any.
    static func file(_ flag: String?) throws(VaultError) -> ConfigFile? {
        guard let path = flag ?? ProcessInfo.processInfo.environment["VAULT_CONFIG"] else { return nil }
        return try ConfigFile.load(path)
    }
}
