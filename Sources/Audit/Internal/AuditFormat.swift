/// The audit line's byte rules and parser, shared by the writer (which resumes from the file's
/// last line) and the verifier. The layout is a contract: docs/audit-log.md.
///
/// ```
/// {"seq":N,"time":"YYYY-MM-DDTHH:MM:SS.mmmZ","process":"sidecar|gateway|cli"[,"uid":N],
///  "action":"[a-z_]{1,32}"[,"token":ID][,"payment":ID][,"customer":ID][,"kid":KID][,"envelope":ID][,"group":ID],
///  "outcome":"ok|[A-Z0-9_]{1,64}"[,"detail":{"[a-z_]{1,32}":INT,…}],"prev":"<64 lowercase hex>"}
/// ```
/// One line, no spaces, keys in exactly this order; `prev` is BLAKE2b-256 of the previous line's
/// bytes (without its newline), 64 zeros on the first line.
enum AuditFormat {
    /// Longest line either side accepts. The longest line the writer can make is about 1,700 bytes.
    static let maxLineBytes = 4096
    /// Most counters in one `detail` object.
    static let maxDetailEntries = 16
    /// The `process` values.
    static let processes = ["sidecar", "gateway", "cli"]
    /// Actions only the writer itself uses.
    static let repairAction = "log_repair"
    static let invalidAction = "invalid_event"
    /// The outcome of a `log_repair` line and of an `invalid_event` line.
    static let repairOutcome = "AUDIT_TORN_LINE"
    static let invalidOutcome = "AUDIT_EVENT_INVALID"
    /// The counter of a `log_repair` line: the torn line's length in bytes.
    static let tornBytesKey = "torn_bytes"

    // MARK: Character sets

    @inline(__always) static func isLower(_ c: UInt8) -> Bool { c >= 97 && c <= 122 }
    @inline(__always) static func isUpper(_ c: UInt8) -> Bool { c >= 65 && c <= 90 }
    @inline(__always) static func isDigit(_ c: UInt8) -> Bool { c >= 48 && c <= 57 }
    @inline(__always) static func isLowerHex(_ c: UInt8) -> Bool { isDigit(c) || (c >= 97 && c <= 102) }

    /// `[a-z_]{1,32}`: actions and detail keys.
    static func isWord(_ s: some Collection<UInt8>) -> Bool {
        let n = s.count
        return n >= 1 && n <= 32 && s.allSatisfy { isLower($0) || $0 == 95 }
    }

    /// `ok` or `[A-Z0-9_]{1,64}`.
    static func isOutcome(_ s: some Collection<UInt8>) -> Bool {
        let n = s.count
        if n == 2, s.elementsEqual("ok".utf8) { return true }
        return n >= 1 && n <= 64 && s.allSatisfy { isUpper($0) || isDigit($0) || $0 == 95 }
    }

    /// The id keys, in line order.
    enum IDKey: Int, CaseIterable {
        case token, payment, customer, kid, envelope, group

        var name: String {
            switch self {
            case .token: "token"
            case .payment: "payment"
            case .customer: "customer"
            case .kid: "kid"
            case .envelope: "envelope"
            case .group: "group"
            }
        }
    }

    /// An id value: `kid` is 16 lowercase hex (docs/key-files.md); the others are
    /// `[A-Za-z0-9_-]{1,80}` with at least one letter. Every vault id has a letter prefix (`tok_`,
    /// `pay_`, `cus_`, `env_`); a value without a letter is most likely a card number passed by
    /// mistake (`4242424242424242`, `4242-4242-4242-4242`), so it is refused.
    static func isID(_ s: some Collection<UInt8>, key: IDKey) -> Bool {
        let n = s.count
        if key == .kid { return n == 16 && s.allSatisfy(isLowerHex) }
        guard n >= 1, n <= 80 else { return false }
        var letter = false
        for c in s {
            if isLower(c) || isUpper(c) { letter = true; continue }
            if isDigit(c) || c == 95 || c == 45 { continue }
            return false
        }
        return letter
    }

    // MARK: Parsing

    /// What the writer and verifier need from a well-formed line.
    struct Line {
        var seq: Int64
        /// True for the writer's `log_repair` line.
        var isRepair: Bool
        /// `detail.torn_bytes` of a `log_repair` line.
        var tornBytes: Int?
        /// Offset of the 64 hex characters of `prev`.
        var prevOffset: Int
    }

    /// Why a line is not an audit line, in plain words.
    struct Malformed: Error {
        let reason: String
    }

    /// Parses one line (without its newline) strictly: exact key order, character sets, no spaces.
    static func parse(_ bytes: UnsafeRawBufferPointer) throws(Malformed) -> Line {
        var p = Parser(bytes: bytes)
        return try p.line()
    }

    /// Whether the `prev` at `offset` of `line` is the lowercase hex of `hash` (32 bytes).
    static func prev(of line: UnsafeRawBufferPointer, at offset: Int, equals hash: UnsafeRawBufferPointer) -> Bool {
        for i in 0..<32 {
            let b = hash[i]
            if line[offset + 2 * i] != HexDigits.table[Int(b >> 4)] || line[offset + 2 * i + 1] != HexDigits.table[Int(b & 15)] {
                return false
            }
        }
        return true
    }
}

/// Lowercase hex digits.
enum HexDigits {
    static let table: [UInt8] = Array("0123456789abcdef".utf8)

    static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var out: [UInt8] = []
        for b in bytes {
            out.append(table[Int(b >> 4)])
            out.append(table[Int(b & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// 64 hex characters (either case) to 32 bytes; nil otherwise.
    static func decode32(_ text: String) -> [UInt8]? {
        let u = Array(text.utf8)
        guard u.count == 64 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case 48...57: c - 48
            case 97...102: c - 87
            case 65...70: c - 55
            default: nil
            }
        }
        var out = [UInt8](repeating: 0, count: 32)
        for i in 0..<32 {
            guard let h = nibble(u[2 * i]), let l = nibble(u[2 * i + 1]) else { return nil }
            out[i] = h << 4 | l
        }
        return out
    }
}

/// A cursor over one line.
private struct Parser {
    let bytes: UnsafeRawBufferPointer
    var i = 0

    init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    /// A failure at byte `at` (0-based; the current position by default), reported 1-based.
    func fail(_ what: String, at: Int? = nil) -> AuditFormat.Malformed {
        AuditFormat.Malformed(reason: "\(what) at byte \((at ?? i) + 1)")
    }

    /// Consumes `s` if the line continues with it.
    mutating func take(_ s: StaticString) -> Bool {
        let n = s.utf8CodeUnitCount
        guard bytes.count - i >= n else { return false }
        for k in 0..<n where bytes[i + k] != s.utf8Start[k] { return false }
        i += n
        return true
    }

    mutating func expect(_ s: StaticString, _ what: @autoclosure () -> String) throws(AuditFormat.Malformed) {
        guard take(s) else { throw fail(what()) }
    }

    /// A decimal integer without leading zeros (and without a sign unless `signed`).
    mutating func integer(signed: Bool, max: UInt64) -> Int64? {
        var negative = false
        if signed, i < bytes.count, bytes[i] == 45 { negative = true; i += 1 }
        let start = i
        var value: UInt64 = 0
        while i < bytes.count, AuditFormat.isDigit(bytes[i]) {
            let (m, o1) = value.multipliedReportingOverflow(by: 10)
            let (a, o2) = m.addingReportingOverflow(UInt64(bytes[i] - 48))
            if o1 || o2 || a > max { return nil }
            value = a
            i += 1
        }
        let n = i - start
        if n == 0 || (n > 1 && bytes[start] == 48) { return nil }
        if !negative, value > UInt64(Int64.max) { return nil }
        if negative {
            if value == 0 { return nil }   // no "-0"
            return value == UInt64(Int64.max) + 1 ? Int64.min : -Int64(value)
        }
        return Int64(value)
    }

    /// The bytes up to the next `"` (not consumed), at most `limit` of them.
    mutating func stringBody(limit: Int) -> UnsafeRawBufferPointer? {
        let start = i
        while i < bytes.count, bytes[i] != 34 {
            if i - start >= limit { return nil }
            i += 1
        }
        guard i < bytes.count else { return nil }
        return UnsafeRawBufferPointer(rebasing: bytes[start..<i])
    }

    mutating func line() throws(AuditFormat.Malformed) -> AuditFormat.Line {
        try expect("{\"seq\":", "expected {\"seq\": at the start")
        var at = i
        guard let seq = integer(signed: false, max: UInt64(Int64.max)), seq >= 1 else {
            throw fail("\"seq\" is not a whole number from 1", at: at)
        }
        try expect(",\"time\":\"", "expected \"time\" after \"seq\"")
        guard time() else { throw fail("\"time\" is not UTC with milliseconds (YYYY-MM-DDTHH:MM:SS.mmmZ)") }
        try expect("\",\"process\":\"", "expected \"process\" after \"time\"")
        at = i
        guard let process = stringBody(limit: 16),
              AuditFormat.processes.contains(where: { $0.utf8.elementsEqual(process) })
        else { throw fail("\"process\" is not sidecar, gateway or cli", at: at) }
        try expect("\"", "expected \" after \"process\"")
        if take(",\"uid\":") {
            at = i
            guard integer(signed: false, max: UInt64(UInt32.max)) != nil else { throw fail("\"uid\" is not a uid (0…4294967295)", at: at) }
        }
        try expect(",\"action\":\"", "expected \"action\" after \"process\" or \"uid\"")
        at = i
        guard let action = stringBody(limit: 32), AuditFormat.isWord(action) else {
            throw fail("\"action\" is not [a-z_]{1,32}", at: at)
        }
        let isRepair = action.elementsEqual(AuditFormat.repairAction.utf8)
        try expect("\"", "expected \" after \"action\"")
        let idKeys: [(StaticString, AuditFormat.IDKey)] = [
            (",\"token\":\"", .token), (",\"payment\":\"", .payment), (",\"customer\":\"", .customer),
            (",\"kid\":\"", .kid), (",\"envelope\":\"", .envelope), (",\"group\":\"", .group),
        ]
        for (literal, key) in idKeys where take(literal) {
            at = i
            guard let value = stringBody(limit: 80), AuditFormat.isID(value, key: key) else {
                throw fail(key == .kid ? "\"kid\" is not 16 lowercase hex" : "\"\(key.name)\" is not an id ([A-Za-z0-9_-]{1,80} with a letter)", at: at)
            }
            i += 1
        }
        try expect(",\"outcome\":\"", "expected \"outcome\" (keys missing, unknown, repeated or out of order)")
        at = i
        guard let outcome = stringBody(limit: 64), AuditFormat.isOutcome(outcome) else {
            throw fail("\"outcome\" is not ok or [A-Z0-9_]{1,64}", at: at)
        }
        i += 1
        var tornBytes: Int?
        if take(",\"detail\":{") {
            var keys: [UnsafeRawBufferPointer] = []
            repeat {
                try expect("\"", "expected a counter name in \"detail\"")
                at = i
                guard let key = stringBody(limit: 32), AuditFormat.isWord(key) else {
                    throw fail("a \"detail\" name is not [a-z_]{1,32}", at: at)
                }
                guard !keys.contains(where: { $0.elementsEqual(key) }) else { throw fail("a \"detail\" name is repeated", at: at) }
                guard keys.count < AuditFormat.maxDetailEntries else { throw fail("\"detail\" has more than \(AuditFormat.maxDetailEntries) counters", at: at) }
                keys.append(key)
                try expect("\":", "expected : after a \"detail\" name")
                at = i
                guard let value = integer(signed: true, max: UInt64(Int64.max) + 1) else {
                    throw fail("a \"detail\" value is not an integer", at: at)
                }
                if isRepair, key.elementsEqual(AuditFormat.tornBytesKey.utf8) { tornBytes = Int(value) }
            } while take(",")
            try expect("}", "expected } after \"detail\"")
        }
        try expect(",\"prev\":\"", "expected \"prev\" after \"outcome\" or \"detail\"")
        let prevOffset = i
        guard bytes.count - i >= 64, (0..<64).allSatisfy({ AuditFormat.isLowerHex(bytes[i + $0]) }) else {
            throw fail("\"prev\" is not 64 lowercase hex")
        }
        i += 64
        try expect("\"}", "expected \"} after \"prev\"")
        guard i == bytes.count else { throw fail("expected the end of the line after \"prev\"") }
        if isRepair, tornBytes == nil { throw fail("a log_repair line without \"torn_bytes\"") }
        return AuditFormat.Line(seq: seq, isRepair: isRepair, tornBytes: tornBytes, prevOffset: prevOffset)
    }

    /// `YYYY-MM-DDTHH:MM:SS.mmmZ` with plausible field ranges, then the closing quote is next.
    mutating func time() -> Bool {
        guard bytes.count - i >= 24 else { return false }
        func digits(_ at: Int, _ n: Int) -> Int? {
            var v = 0
            for k in 0..<n {
                let c = bytes[i + at + k]
                guard AuditFormat.isDigit(c) else { return nil }
                v = v * 10 + Int(c - 48)
            }
            return v
        }
        let separators: [(Int, UInt8)] = [(4, 45), (7, 45), (10, 84), (13, 58), (16, 58), (19, 46), (23, 90)]
        guard separators.allSatisfy({ bytes[i + $0.0] == $0.1 }),
              digits(0, 4) != nil,
              let month = digits(5, 2), (1...12).contains(month),
              let day = digits(8, 2), (1...31).contains(day),
              let hour = digits(11, 2), hour <= 23,
              let minute = digits(14, 2), minute <= 59,
              let second = digits(17, 2), second <= 60,
              digits(20, 3) != nil
        else { return false }
        i += 24
        return true
    }
}
