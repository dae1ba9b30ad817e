#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import VaultCrypto

/// `vault.json`: one configuration file for the sidecar and the gateway (docs/configuration.md).
///
/// Every setting has its default in its section's table (Setting.swift); the file overrides it,
/// an environment variable `VAULT_<SECTION>_<KEY>` overrides the file, and a command-line flag
/// overrides both. Everything is checked at start, and an error names the setting and where its
/// value came from.
package struct ConfigFile {
    package var sections: [String: [String: Any]] = [:]
    package var path: String?

    /// Reads and checks the file's shape (known sections and keys only).
    /// - Throws: `CONFIG_NOT_FOUND`, `CONFIG_INVALID` naming the setting.
    package static func load(_ path: String) throws(VaultError) -> ConfigFile {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw VaultError(.configNotFound, "cannot read the configuration file \(path)", field: path)
        }
        guard let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw VaultError(.configInvalid, "\(path) is not a JSON object", field: path)
        }
        var file = ConfigFile(path: path)
        for (name, value) in root {
            guard let known = Setting.Section(rawValue: name)?.settings.map(\.key) else {
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

    /// The configuration file named by `--config` or `$VAULT_CONFIG`, if any.
    package static func named(_ flag: String?) throws(VaultError) -> ConfigFile? {
        guard let path = flag ?? ProcessInfo.processInfo.environment["VAULT_CONFIG"] else { return nil }
        return try load(path)
    }
}

/// One section's settings as resolved from flag, environment, file and the table's default.
package struct Settings {
    package let section: Setting.Section
    let file: [String: Any]
    let filePath: String?
    let environment: [String: String]
    /// What was used, for `vault config check`: setting key → value and source.
    package private(set) var report: [String: (value: String, source: String)] = [:]

    package init(section: Setting.Section, config: ConfigFile?, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.section = section
        self.file = config?.sections[section.rawValue] ?? [:]
        self.filePath = config?.path
        self.environment = environment
    }

    /// Where a setting's value comes from: 3 a flag, 2 the environment, 1 the file, 0 nowhere (the
    /// default). For aliases: the value from the highest source wins.
    package func precedence(_ setting: Setting, flag: String?) -> Int {
        if flag != nil { return 3 }
        if environment[setting.environmentVariable] != nil { return 2 }
        return file[setting.key] != nil ? 1 : 0
    }

    /// The raw value and where it came from.
    private func lookup(_ setting: Setting, flag: String?) -> (Any, String)? {
        if let flag { return (flag, "--" + setting.flag) }
        if let e = environment[setting.environmentVariable] { return (e, setting.environmentVariable) }
        if let f = file[setting.key] { return (f, "\(filePath ?? "config"): \(section.rawValue).\(setting.key)") }
        return nil
    }

    private func invalid(_ setting: Setting, _ source: String, _ why: String) -> VaultError {
        VaultError(.configInvalid, "\(section.rawValue).\(setting.key) (from \(source)): \(why)", field: "\(section.rawValue).\(setting.key)")
    }

    package mutating func record(_ setting: Setting, _ value: String, _ source: String) {
        report[setting.key] = (value, source)
    }

    /// A text setting; nil when neither given nor defaulted (`defaulted: false`: the table's default
    /// is not used, for a setting with aliases).
    package mutating func string(_ setting: Setting, flag: String?, defaulted: Bool = true) throws(VaultError) -> String? {
        guard let (raw, source) = lookup(setting, flag: flag) else {
            let value = defaulted ? setting.defaultValue : nil
            if let value { record(setting, Self.redacted(value), "default") }
            return value
        }
        guard let s = raw as? String, !s.isEmpty else { throw invalid(setting, source, "must be a non-empty string") }
        record(setting, Self.redacted(s), source)
        return s
    }

    /// A URL's password is never printed (`postgres://vault:secret@db/…` → `postgres://vault:***@db/…`).
    package static func redacted(_ value: String) -> String {
        guard let scheme = value.range(of: "://"), let at = value[scheme.upperBound...].firstIndex(of: "@"),
              let colon = value[scheme.upperBound..<at].firstIndex(of: ":")
        else { return value }
        return String(value[..<value.index(after: colon)]) + "***" + String(value[at...])
    }

    /// Whether a value of the file is JSON `true`/`false` (JSONSerialization gives an NSNumber,
    /// which would also pass for 1 or 0).
    static func isJSONBool(_ value: Any) -> Bool {
        guard let n = value as? NSNumber else { return false }
        return String(cString: n.objCType) == "c"
    }

    /// A number within `minimum…maximum` (the settings table's bounds, docs/configuration.md). In
    /// the file it must be a JSON number (not a string, not `true`); a flag or an environment
    /// variable is text.
    package mutating func number(_ setting: Setting, flag: Double?, atLeast minimum: Double, atMost maximum: Double? = nil) throws(VaultError) -> Double {
        let maximum = maximum ?? setting.maximum ?? .greatestFiniteMagnitude
        let bounds = maximum == .greatestFiniteMagnitude ? "≥ \(Self.text(minimum))" : "from \(Self.text(minimum)) to \(Self.text(maximum))"
        guard let (raw, source) = lookup(setting, flag: flag.map { String($0) }) else {
            let value = Double(setting.defaultValue ?? "") ?? 0
            record(setting, String(value), "default")
            return value
        }
        let n: Double?
        if flag == nil, environment[setting.environmentVariable] == nil {
            // From the file: a JSON number only.
            if raw is String { throw invalid(setting, source, "must be a JSON number (\(bounds)), not a string") }
            if Self.isJSONBool(raw) { throw invalid(setting, source, "must be a JSON number (\(bounds)), not true or false") }
            n = (raw as? NSNumber)?.doubleValue
        } else {
            n = (raw as? String).flatMap(Double.init)
        }
        guard let n, n.isFinite, n >= minimum, n <= maximum else { throw invalid(setting, source, "must be a number \(bounds)") }
        record(setting, String(n), source)
        return n
    }

    /// `900`, `0.05`: a bound as people write it.
    static func text(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value)
    }

    package mutating func bool(_ setting: Setting, flag: Bool) throws(VaultError) -> Bool {
        guard let (raw, source) = lookup(setting, flag: flag ? "true" : nil) else {
            let value = setting.defaultValue == "true"
            record(setting, String(value), "default")
            return value
        }
        let b: Bool?
        if flag || environment[setting.environmentVariable] != nil {
            let s = raw as? String ?? ""
            b = ["true", "1", "yes"].contains(s) ? true : ["false", "0", "no"].contains(s) ? false : nil
        } else {
            // From the file: JSON true or false only (not 1, not "true").
            b = Self.isJSONBool(raw) ? (raw as? NSNumber)?.boolValue : nil
        }
        guard let b else { throw invalid(setting, source, "must be true or false") }
        record(setting, String(b), source)
        return b
    }

    /// A list: repeated flags, a comma-separated environment variable, or a JSON array of strings (or
    /// numbers). Empty when none is given (lists have no default value, only a meaning).
    package mutating func list(_ setting: Setting, flag: [String]) throws(VaultError) -> [String] {
        let values: [String]
        let source: String
        if !flag.isEmpty {
            (values, source) = (flag, "--" + setting.flag)
        } else if let e = environment[setting.environmentVariable] {
            (values, source) = (e.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }, setting.environmentVariable)
        } else if let f = file[setting.key] {
            source = "\(filePath ?? "config"): \(section.rawValue).\(setting.key)"
            guard let array = f as? [Any] else { throw invalid(setting, source, "must be a list") }
            var out: [String] = []
            for item in array {
                if let s = item as? String { out.append(s) } else if !Self.isJSONBool(item), let n = item as? Int { out.append(String(n)) } else {
                    throw invalid(setting, source, "must be a list of strings")
                }
            }
            values = out
        } else {
            record(setting, "[]", "default")
            return []
        }
        record(setting, values.isEmpty ? "[]" : values.joined(separator: ","), source)
        return values
    }

    /// The log level and format of a server's section.
    package mutating func logSetup<S: SettingsSection>(_ section: S.Type, _ options: LoggingOptions<S>) throws(VaultError) -> LogSetup {
        let level = try logLevel(S.logLevel, flag: options.logLevel)
        let text = try string(S.logFormat, flag: options.logFormat) ?? LogFormat.text.rawValue
        guard let format = LogFormat(rawValue: text) else {
            throw invalid(S.logFormat, lookup(S.logFormat, flag: options.logFormat)?.1 ?? "default", "must be text or json")
        }
        return LogSetup(level: level, format: format)
    }

    package mutating func logLevel(_ setting: Setting, flag: String?) throws(VaultError) -> Logger.Level {
        let text = try string(setting, flag: flag) ?? "info"
        guard let level = Logger.Level(rawValue: text) else {
            throw invalid(setting, lookup(setting, flag: flag)?.1 ?? "default", "must be trace, debug, info, notice, warning, error or critical")
        }
        return level
    }

    package mutating func mode(_ setting: Setting, flag: String?) throws(VaultError) -> mode_t {
        let text = try string(setting, flag: flag) ?? ""
        guard let mode = mode_t(text, radix: 8), mode <= 0o777 else {
            throw invalid(setting, lookup(setting, flag: flag)?.1 ?? "default", "must be an octal file mode, like 660")
        }
        return mode
    }

    /// Runs a parser over a setting's value, naming the setting in its error.
    package func checked<T>(_ setting: Setting, flag: String?, _ body: () throws(VaultError) -> T) throws(VaultError) -> T {
        do throws(VaultError) { return try body() } catch {
            throw invalid(setting, lookup(setting, flag: flag)?.1 ?? "default", "\(error.code): \(error.message)")
        }
    }

    /// `vault config check`'s lines: every setting of the section's table, in its order, with the
    /// value used and where it came from (a setting without a value says what happens instead).
    package var table: String {
        section.settings.map { setting in
            let name = "\(section.rawValue).\(setting.key)"
            guard let (value, source) = report[setting.key], !value.isEmpty else {
                return "  \(name) = (\(setting.defaultText))  [default]\n"
            }
            // An empty list: none given, and what that means.
            if value == "[]" { return "  \(name) = [] (\(setting.defaultText))  [\(source)]\n" }
            return "  \(name) = \(value)  [\(source)]\n"
        }.joined()
    }
}
