/// A small pull parser for JSON held in a byte buffer (RFC 8259), built so that card data can be
/// read from a request or a line of input straight into `SecureBytes`, never into a `String`.
///
/// It reads objects key by key, strings (as `String` for metadata, or as `SecureBytes` for card
/// fields), integers, booleans and null, with a depth limit. Every syntax error throws the
/// `VaultError` code given at creation (e.g. `CARD_MALFORMED`, `ENVELOPE_MALFORMED`) and a message
/// that names the byte offset, never the content.
public struct JSONReader {
    private let bytes: UnsafeRawBufferPointer
    private var index = 0
    private var depth = 0
    private let maxDepth: Int
    private let errorCode: VaultError.Code

    /// A reader over `bytes`, which must outlive it.
    public init(_ bytes: UnsafeRawBufferPointer, errorCode: VaultError.Code, maxDepth: Int = 16) {
        self.bytes = bytes
        self.errorCode = errorCode
        self.maxDepth = maxDepth
    }

    /// Byte offset of the next unread byte.
    public var offset: Int { index }

    /// Reads an object, calling `body` once per key with the reader positioned at the value;
    /// `body` must consume the value. Duplicate keys are refused.
    public mutating func readObject(_ body: (inout JSONReader, String) throws(VaultError) -> Void) throws(VaultError) {
        try expect(UInt8(ascii: "{"), "an object")
        depth += 1
        guard depth <= maxDepth else { throw fail("nesting deeper than \(maxDepth)") }
        var seen: Set<String> = []
        skipSpace()
        if peek() == UInt8(ascii: "}") { index += 1; depth -= 1; return }
        while true {
            skipSpace()
            let key = try readString(maxBytes: 64)
            guard seen.insert(key).inserted else { throw fail("duplicate key") }
            try expect(UInt8(ascii: ":"), "':'")
            skipSpace()
            try body(&self, key)
            skipSpace()
            guard let c = next() else { throw fail("unterminated object") }
            if c == UInt8(ascii: "}") { break }
            guard c == UInt8(ascii: ",") else { throw fail("expected ',' or '}' at byte \(index - 1)") }
        }
        depth -= 1
    }

    /// Reads an array, calling `body` once per element positioned at it.
    public mutating func readArray(_ body: (inout JSONReader) throws(VaultError) -> Void) throws(VaultError) {
        try expect(UInt8(ascii: "["), "an array")
        depth += 1
        guard depth <= maxDepth else { throw fail("nesting deeper than \(maxDepth)") }
        skipSpace()
        if peek() == UInt8(ascii: "]") { index += 1; depth -= 1; return }
        while true {
            skipSpace()
            try body(&self)
            skipSpace()
            guard let c = next() else { throw fail("unterminated array") }
            if c == UInt8(ascii: "]") { break }
            guard c == UInt8(ascii: ",") else { throw fail("expected ',' or ']' at byte \(index - 1)") }
        }
        depth -= 1
    }

    /// Reads a string value as a Swift `String` (for non-secret data only).
    public mutating func readString(maxBytes: Int = 4096) throws(VaultError) -> String {
        var out: [UInt8] = []
        try readStringBytes(maxBytes: maxBytes, tooLong: errorCode) { out.append($0) }
        guard let s = String(validating: out, as: UTF8.self) else { throw fail("a string is not valid UTF-8") }
        return s
    }

    /// Reads a string value straight into wipeable memory (card number, CVC, name). The unescaped
    /// value must be valid UTF-8 of at most `maxBytes` bytes.
    public mutating func readSecureString(maxBytes: Int) throws(VaultError) -> SecureBytes {
        try SecureBytes(capacity: maxBytes) { (out) throws(VaultError) -> Int in
            var n = 0
            try readStringBytes(maxBytes: maxBytes, tooLong: .inputTooLarge) { out[n] = $0; n += 1 }
            guard Self.isValidUTF8(UnsafeRawBufferPointer(rebasing: out[..<n])) else {
                throw fail("a string is not valid UTF-8")
            }
            return n
        }
    }

    /// Reads an integer (no fraction or exponent) within `range`.
    public mutating func readInt(in range: ClosedRange<Int> = Int.min...Int.max) throws(VaultError) -> Int {
        skipSpace()
        let start = index
        var negative = false
        if peek() == UInt8(ascii: "-") { negative = true; index += 1 }
        var value = 0
        var digits = 0
        while let c = peek(), c >= 48, c <= 57 {
            let (m, o1) = value.multipliedReportingOverflow(by: 10)
            let (a, o2) = m.addingReportingOverflow(Int(c - 48))
            guard !o1, !o2 else { throw fail("a number is out of range at byte \(start)") }
            value = a
            digits += 1
            index += 1
        }
        guard digits > 0 else { throw fail("expected an integer at byte \(start)") }
        // JSON has no leading zeros ("012"); "0" and "-0" alone are numbers.
        if digits > 1, bytes[start + (negative ? 1 : 0)] == UInt8(ascii: "0") {
            throw fail("a number has a leading zero at byte \(start)")
        }
        if let c = peek(), c == UInt8(ascii: ".") || c == UInt8(ascii: "e") || c == UInt8(ascii: "E") {
            throw fail("expected an integer, not a fraction, at byte \(start)")
        }
        if negative { value = -value }
        guard range.contains(value) else { throw fail("a number is out of range at byte \(start)") }
        return value
    }

    /// If the next value is `null`, consumes it and returns true.
    public mutating func readNullIfPresent() -> Bool {
        skipSpace()
        if matches("null") { index += 4; return true }
        return false
    }

    /// Reads `true` or `false`.
    public mutating func readBool() throws(VaultError) -> Bool {
        skipSpace()
        if matches("true") { index += 4; return true }
        if matches("false") { index += 5; return false }
        throw fail("expected true or false at byte \(index)")
    }

    /// The kind of the next value: one of `{ [ " n t f` or a digit/minus.
    public mutating func peekValueStart() -> UInt8? {
        skipSpace()
        return peek()
    }

    /// Skips any value (its strings are never materialised as `String`).
    public mutating func skipValue() throws(VaultError) {
        skipSpace()
        switch peek() {
        case UInt8(ascii: "{"): try readObject { (r, _) throws(VaultError) in try r.skipValue() }
        case UInt8(ascii: "["): try readArray { (r) throws(VaultError) in try r.skipValue() }
        case UInt8(ascii: "\""): try readStringBytes(maxBytes: Int.max, tooLong: errorCode) { _ in }
        case UInt8(ascii: "t"), UInt8(ascii: "f"): _ = try readBool()
        case UInt8(ascii: "n"): guard readNullIfPresent() else { throw fail("expected null at byte \(index)") }
        default: try skipNumber()
        }
    }

    /// Checks that nothing but whitespace follows.
    public mutating func finish() throws(VaultError) {
        skipSpace()
        guard index == bytes.count else { throw fail("unexpected bytes after the JSON value at byte \(index)") }
    }

    /// Builds this reader's error with `message`.
    public func fail(_ message: String) -> VaultError { VaultError(errorCode, "malformed JSON: \(message)") }

    // MARK: - Internals

    private mutating func readStringBytes(maxBytes: Int, tooLong: VaultError.Code, _ emit: (UInt8) -> Void) throws(VaultError) {
        skipSpace()
        try expect(UInt8(ascii: "\""), "a string")
        var count = 0
        func put(_ b: UInt8) throws(VaultError) {
            count += 1
            guard count <= maxBytes else { throw VaultError(tooLong, "a string is longer than \(maxBytes) bytes") }
            emit(b)
        }
        while true {
            guard let c = next() else { throw fail("unterminated string") }
            switch c {
            case UInt8(ascii: "\""):
                return
            case UInt8(ascii: "\\"):
                guard let e = next() else { throw fail("unterminated string") }
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): try put(e)
                case UInt8(ascii: "b"): try put(8)
                case UInt8(ascii: "f"): try put(12)
                case UInt8(ascii: "n"): try put(10)
                case UInt8(ascii: "r"): try put(13)
                case UInt8(ascii: "t"): try put(9)
                case UInt8(ascii: "u"):
                    var scalar = try readHex4()
                    if scalar >= 0xD800, scalar < 0xDC00 {
                        guard next() == UInt8(ascii: "\\"), next() == UInt8(ascii: "u") else { throw fail("lone surrogate in a string") }
                        let low = try readHex4()
                        guard low >= 0xDC00, low < 0xE000 else { throw fail("lone surrogate in a string") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if scalar >= 0xDC00, scalar < 0xE000 {
                        throw fail("lone surrogate in a string")
                    }
                    guard let u = Unicode.Scalar(scalar) else { throw fail("bad \\u escape") }
                    for b in UTF8.encode(u)! { try put(b) }
                default:
                    throw fail("bad escape in a string at byte \(index - 1)")
                }
            case 0..<0x20:
                throw fail("control character in a string at byte \(index - 1)")
            default:
                try put(c)
            }
        }
    }

    private mutating func readHex4() throws(VaultError) -> UInt32 {
        var v: UInt32 = 0
        for _ in 0..<4 {
            guard let c = next() else { throw fail("bad \\u escape") }
            let d: UInt32
            switch c {
            case 48...57: d = UInt32(c - 48)
            case 65...70: d = UInt32(c - 55)
            case 97...102: d = UInt32(c - 87)
            default: throw fail("bad \\u escape")
            }
            v = v << 4 | d
        }
        return v
    }

    private mutating func skipNumber() throws(VaultError) {
        let start = index
        while let c = peek(), (c >= 48 && c <= 57) || c == UInt8(ascii: "-") || c == UInt8(ascii: "+")
            || c == UInt8(ascii: ".") || c == UInt8(ascii: "e") || c == UInt8(ascii: "E") {
            index += 1
        }
        guard index > start else { throw fail("unexpected byte at \(index)") }
    }

    private func matches(_ word: StaticString) -> Bool {
        let n = word.utf8CodeUnitCount
        guard index + n <= bytes.count else { return false }
        let w = UnsafeRawBufferPointer(start: word.utf8Start, count: n)
        for i in 0..<n where bytes[index + i] != w[i] { return false }
        return true
    }

    private mutating func expect(_ byte: UInt8, _ what: String) throws(VaultError) {
        skipSpace()
        guard peek() == byte else { throw fail("expected \(what) at byte \(index)") }
        index += 1
    }

    @inline(__always) private func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

    @inline(__always) private mutating func next() -> UInt8? {
        guard index < bytes.count else { return nil }
        defer { index += 1 }
        return bytes[index]
    }

    private mutating func skipSpace() {
        while let c = peek(), c == 32 || c == 9 || c == 10 || c == 13 { index += 1 }
    }

    /// A key for an error message: ASCII letters, `_` and `.` only (never digits, so no card
    /// number sent as a key can be echoed), cut at 32.
    public static func printable(_ key: String) -> String {
        String(String.UnicodeScalarView(key.unicodeScalars.prefix(32).filter {
            $0.isASCII && ($0.properties.isAlphabetic || $0 == "_" || $0 == ".")
        }))
    }

    /// True when `bytes` is valid UTF-8.
    public static func isValidUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var it = bytes.makeIterator()
        var decoder = UTF8()
        while true {
            switch decoder.decode(&it) {
            case .scalarValue: continue
            case .emptyInput: return true
            case .error: return false
            }
        }
    }
}

/// Appends JSON text for non-secret values.
public enum JSONText {
    /// `s` as a JSON string (quoted and escaped), appended to `out`.
    public static func appendString(_ s: String, to out: inout String) {
        // Most strings (base64, ids, codes) need no escaping: append them whole.
        if !s.utf8.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C }) {
            out.append("\"")
            out.append(s)
            out.append("\"")
            return
        }
        out.append("\"")
        for u in s.unicodeScalars {
            switch u {
            case "\"": out.append("\\\"")
            case "\\": out.append("\\\\")
            case "\n": out.append("\\n")
            case "\r": out.append("\\r")
            case "\t": out.append("\\t")
            case _ where u.value < 0x20:
                let h = String(u.value, radix: 16)
                out.append("\\u" + String(repeating: "0", count: 4 - h.count) + h)
            default: out.unicodeScalars.append(u)
            }
        }
        out.append("\"")
    }
}
