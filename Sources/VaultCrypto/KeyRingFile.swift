#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// The key ring description (`Keys/ring.json`, docs/key-ring.md): which kid new cards are sealed
/// to, which kids may still be opened, and which are retired.
///
/// ```json
/// {"v":1,"keys":[
///   {"kid":"0123456789abcdef","status":"primary","created":"2026-11-23T15:00:00Z","changed":"2026-11-23T16:00:00Z"},
///   {"kid":"fedcba9876543210","status":"active","created":"2026-01-02T10:00:00Z","changed":"2026-11-23T16:00:00Z"}
/// ]}
/// ```
///
/// Exactly one key is `primary` (sealing uses it; it opens); `active` keys open but never seal;
/// `retired` keys do neither: an envelope sealed to one is refused (`KEY_RETIRED`). A kid the ring
/// does not list is not accepted at all (`KEY_NOT_IN_RING`): a public key file dropped into the
/// keys directory cannot substitute for the primary (PCI DSS 3.7.7).
///
/// The file holds kids and dates only: it is public and is committed with the public keys.
public struct KeyRingFile: Sendable, Equatable {
    /// The ring file's name inside a keys directory.
    public static let fileName = "ring.json"
    /// Largest ring file read.
    static let maxBytes = 1 << 20

    /// What a key may do.
    public enum Status: String, Sendable, CaseIterable {
        /// Seals new cards, and opens.
        case primary
        /// Opens only.
        case active
        /// Neither seals nor opens.
        case retired

        /// Whether an envelope sealed to a key of this status may be opened (or accepted).
        public var opens: Bool { self != .retired }
    }

    /// One key of the ring.
    public struct Entry: Sendable, Equatable {
        public var kid: KeyID
        public var status: Status
        /// When the key was added (UTC, whole seconds).
        public var created: Date
        /// When its status last changed.
        public var changed: Date

        public init(kid: KeyID, status: Status, created: Date, changed: Date? = nil) {
            self.kid = kid
            self.status = status
            self.created = Self.seconds(created)
            self.changed = Self.seconds(changed ?? created)
        }

        static func seconds(_ d: Date) -> Date { Date(timeIntervalSince1970: d.timeIntervalSince1970.rounded(.down)) }
    }

    /// The keys, in file order (oldest first, as added).
    public private(set) var entries: [Entry]

    /// A ring; checked as `validate()` does.
    /// - Throws: `KEY_RING_INVALID`.
    public init(entries: [Entry]) throws(VaultError) {
        self.entries = entries
        try validate()
    }

    /// The primary key's id.
    public var primary: KeyID { entries.first { $0.status == .primary }!.kid }

    /// The status of `kid`, or nil when the ring does not list it.
    public func status(of kid: KeyID) -> Status? { entries.first { $0.kid == kid }?.status }

    /// The kids that open (primary and active).
    public var openingKids: [KeyID] { entries.filter { $0.status.opens }.map(\.kid) }

    /// Refuses an envelope's or sealed value's kid unless it opens.
    /// - Throws: `KEY_NOT_IN_RING`, `KEY_RETIRED`.
    public func checkOpens(_ kid: KeyID, field: String? = nil) throws(VaultError) {
        switch status(of: kid) {
        case nil:
            throw VaultError(.keyNotInRing, "key \(kid) is not in the key ring", field: field)
        case .retired?:
            throw VaultError(.keyRetired, "key \(kid) is retired: envelopes sealed to it are no longer accepted", field: field)
        default:
            return
        }
    }

    // MARK: - Changes (each keeps exactly one primary)

    /// Adds a new key as `active` (it opens everywhere before anything seals to it).
    /// - Throws: `KEY_RING_CHANGE_REFUSED` when the kid is listed already.
    public mutating func add(_ kid: KeyID, now: Date = Date()) throws(VaultError) {
        guard status(of: kid) == nil else {
            throw VaultError(.keyRingChangeRefused, "key \(kid) is in the ring already")
        }
        entries.append(Entry(kid: kid, status: .active, created: now))
    }

    /// Makes `kid` (active) the primary; the old primary becomes active.
    /// - Throws: `KEY_NOT_IN_RING`, `KEY_RING_CHANGE_REFUSED` (retired, or primary already).
    public mutating func promote(_ kid: KeyID, now: Date = Date()) throws(VaultError) {
        guard let i = entries.firstIndex(where: { $0.kid == kid }) else {
            throw VaultError(.keyNotInRing, "key \(kid) is not in the key ring")
        }
        switch entries[i].status {
        case .primary: throw VaultError(.keyRingChangeRefused, "key \(kid) is the primary already")
        case .retired: throw VaultError(.keyRingChangeRefused, "key \(kid) is retired; a retired key never comes back (make a new one)")
        case .active: break
        }
        for j in entries.indices where entries[j].status == .primary {
            entries[j].status = .active
            entries[j].changed = Entry.seconds(now)
        }
        entries[i].status = .primary
        entries[i].changed = Entry.seconds(now)
    }

    /// Retires an active key (the caller has checked that no stored envelope uses it).
    /// - Throws: `KEY_NOT_IN_RING`, `KEY_RING_CHANGE_REFUSED` (the primary, or retired already).
    public mutating func retire(_ kid: KeyID, now: Date = Date()) throws(VaultError) {
        guard let i = entries.firstIndex(where: { $0.kid == kid }) else {
            throw VaultError(.keyNotInRing, "key \(kid) is not in the key ring")
        }
        switch entries[i].status {
        case .primary: throw VaultError(.keyRingChangeRefused, "key \(kid) is the primary: promote another key first")
        case .retired: throw VaultError(.keyRingChangeRefused, "key \(kid) is retired already")
        case .active: break
        }
        entries[i].status = .retired
        entries[i].changed = Entry.seconds(now)
    }

    /// Checks the ring: at least one key, unique kids, exactly one primary.
    /// - Throws: `KEY_RING_INVALID`.
    public func validate() throws(VaultError) {
        var seen = Set<KeyID>()
        for e in entries where !seen.insert(e.kid).inserted {
            throw VaultError(.keyRingInvalid, "key \(e.kid) is listed twice", field: "keys")
        }
        let primaries = entries.filter { $0.status == .primary }.count
        guard primaries == 1 else {
            throw VaultError(.keyRingInvalid, "the ring has \(primaries) primary keys; it needs exactly one", field: "keys")
        }
    }

    /// A time as the ring file writes it (`2026-11-23T15:00:00Z`).
    public static func timestamp(_ d: Date) -> String { Timestamp.format(d) }

    // MARK: - File

    /// Reads and checks a ring file.
    /// - Throws: `KEY_RING_NOT_FOUND`, `KEY_RING_INVALID` (the message names the setting at fault).
    public static func load(path: String) throws(VaultError) -> KeyRingFile {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw VaultError(.keyRingNotFound, "cannot read the key ring \(path)", field: path)
        }
        defer { try? handle.close() }
        let data: Data
        do { data = try handle.read(upToCount: maxBytes + 1) ?? Data() } catch {
            throw VaultError(.keyRingNotFound, "cannot read the key ring \(path)", field: path)
        }
        guard data.count <= maxBytes else { throw VaultError(.keyRingInvalid, "\(path): larger than 1 MiB", field: path) }
        do throws(VaultError) {
            return try parse(data)
        } catch {
            throw VaultError(error.code, "\(path): \(error.message)", field: error.field)
        }
    }

    /// Parses ring JSON (strict: unknown keys are refused).
    /// - Throws: `KEY_RING_INVALID`.
    public static func parse(_ data: Data) throws(VaultError) -> KeyRingFile {
        func invalid(_ message: String, _ field: String) -> VaultError { VaultError(.keyRingInvalid, message, field: field) }
        guard let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw invalid("not a JSON object", "")
        }
        if let extra = Set(root.keys).subtracting(["v", "keys"]).sorted().first { throw invalid("unknown setting \"\(extra)\"", extra) }
        guard let v = root["v"] as? Int, v == 1 else { throw invalid("\"v\" must be 1", "v") }
        guard let list = root["keys"] as? [Any] else { throw invalid("\"keys\" must be a list", "keys") }
        var entries: [Entry] = []
        for (i, item) in list.enumerated() {
            let at = "keys[\(i)]"
            guard let o = item as? [String: Any] else { throw invalid("\(at) must be an object", at) }
            if let extra = Set(o.keys).subtracting(["kid", "status", "created", "changed"]).sorted().first {
                throw invalid("unknown setting \"\(at).\(extra)\"", "\(at).\(extra)")
            }
            guard let kidText = o["kid"] as? String, let kid = KeyID(kidText) else {
                throw invalid("\(at).kid must be 16 lowercase hex characters", "\(at).kid")
            }
            guard let st = o["status"] as? String, let status = Status(rawValue: st) else {
                throw invalid("\(at).status must be primary, active or retired", "\(at).status")
            }
            guard let ct = o["created"] as? String, let created = Timestamp.parse(ct) else {
                throw invalid("\(at).created must be a UTC time like 2026-11-23T15:00:00Z", "\(at).created")
            }
            var changed = created
            if let chv = o["changed"] {
                guard let cht = chv as? String, let c = Timestamp.parse(cht) else {
                    throw invalid("\(at).changed must be a UTC time like 2026-11-23T15:00:00Z", "\(at).changed")
                }
                changed = c
            }
            entries.append(Entry(kid: kid, status: status, created: created, changed: changed))
        }
        guard !entries.isEmpty else { throw invalid("the ring lists no key", "keys") }
        return try KeyRingFile(entries: entries)
    }

    /// The file's text: one key per line, stable order, so diffs in review read well.
    public var text: String {
        let lines = entries.map { e in
            "    {\"kid\":\"\(e.kid)\",\"status\":\"\(e.status.rawValue)\",\"created\":\"\(Timestamp.format(e.created))\",\"changed\":\"\(Timestamp.format(e.changed))\"}"
        }
        return "{\"v\":1,\"keys\":[\n" + lines.joined(separator: ",\n") + "\n]}\n"
    }

    /// Writes the ring atomically, mode 0644: a new file under a random name (O_EXCL|O_NOFOLLOW,
    /// the mode set at creation), fsync, rename, directory fsync. Refuses a directory that group
    /// or others may write.
    /// - Throws: `KEYS_DIRECTORY_UNSAFE`, `IO_ERROR`.
    /// Whether `write(path:)` could write there: the directory's checks alone, so that a command
    /// refuses before it writes anything else (a key pair, a public key's copy).
    /// - Throws: `KEYS_DIRECTORY_UNSAFE`, `KEY_FILE_NOT_FOUND`.
    public static func checkWritable(path: String) throws(VaultError) {
        try KeyFileIO.checkDirectory(KeyFileIO.parentDirectory(of: path))
    }

    public func write(path: String) throws(VaultError) {
        try KeyFileIO.checkDirectory(KeyFileIO.parentDirectory(of: path))
        let bytes = Array(text.utf8)
        try bytes.withUnsafeBytes { b in
            Result { () throws(VaultError) in try KeyFileIO.replace(path: path, mode: 0o644, bytes: b) }
        }.get()
    }
}

/// UTC times as `2026-11-23T15:00:00Z` (whole seconds).
enum Timestamp {
    static func format(_ d: Date) -> String {
        var t = time_t(d.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&t, &parts)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
    }

    static func parse(_ s: String) -> Date? {
        let u = Array(s.utf8)
        guard u.count == 20, u[4] == 45, u[7] == 45, u[10] == 84, u[13] == 58, u[16] == 58, u[19] == 90 else { return nil }
        func num(_ r: Range<Int>) -> Int32? {
            var v: Int32 = 0
            for i in r {
                guard u[i] >= 48, u[i] <= 57 else { return nil }
                v = v * 10 + Int32(u[i] - 48)
            }
            return v
        }
        guard let y = num(0..<4), let mo = num(5..<7), let d = num(8..<10), let h = num(11..<13), let mi = num(14..<16), let se = num(17..<19),
              (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, se < 61
        else { return nil }
        var parts = tm()
        parts.tm_year = y - 1900
        parts.tm_mon = mo - 1
        parts.tm_mday = d
        parts.tm_hour = h
        parts.tm_min = mi
        parts.tm_sec = se
        let t = timegm(&parts)
        guard format(Date(timeIntervalSince1970: Double(t))) == s else { return nil }
        return Date(timeIntervalSince1970: Double(t))
    }
}
