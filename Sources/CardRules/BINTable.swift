/// Issuer information for a BIN range.
public struct BINInfo: Sendable, Equatable, Codable {
    /// First BIN of the range.
    public var rangeStart: String
    /// Last BIN of the range.
    public var rangeEnd: String
    /// Brand as the table gives it.
    public var brand: String?
    /// `credit`, `debit`, `prepaid`… as the table gives it.
    public var type: String?
    /// Issuing bank.
    public var issuer: String?
    /// Country (ISO code or name, as the table gives it).
    public var country: String?

    /// BIN information.
    public init(rangeStart: String, rangeEnd: String, brand: String?, type: String?, issuer: String?, country: String?) {
        self.rangeStart = rangeStart
        self.rangeEnd = rangeEnd
        self.brand = brand
        self.type = type
        self.issuer = issuer
        self.country = country
    }
}

/// An operator-supplied BIN table: CSV rows `start,end,brand,type,issuer,country`.
public struct BINTable: Sendable {
    private struct Row: Sendable {
        let length: Int
        let start: Int
        let end: Int
        let info: BINInfo
    }
    private let rows: [Row]

    /// Number of ranges.
    public var count: Int { rows.count }

    /// Parses CSV text. A first row whose first field is not digits is a header. Fields may be
    /// quoted (`"Bank, N.A."`, `""` for a quote). Start and end have the same length, 6 to 11 digits.
    /// - Throws: `BIN_TABLE_INVALID`, naming the line.
    public init(csv: String) throws(CardRulesError) {
        var rows: [Row] = []
        var lineNumber = 0
        var sawFirstRow = false
        for rawLine in csv.split(separator: "\n", omittingEmptySubsequences: false) {
            lineNumber += 1
            let line = rawLine.hasSuffix("\r") ? rawLine.dropLast() : rawLine
            if line.allSatisfy({ $0 == " " || $0 == "\t" }) { continue }
            let fields = try Self.fields(of: line, lineNumber: lineNumber)
            defer { sawFirstRow = true }
            if !sawFirstRow, let first = fields.first, first.isEmpty || !first.allSatisfy(\.isASCIIDigit) {
                continue  // header
            }
            guard fields.count == 6 else {
                throw CardRulesError(code: .binTableInvalid, message: "BIN table line \(lineNumber): expected 6 fields, found \(fields.count)")
            }
            let start = fields[0], end = fields[1]
            guard (6...11).contains(start.count), start.count == end.count,
                  start.allSatisfy(\.isASCIIDigit), end.allSatisfy(\.isASCIIDigit),
                  let s = Int(start), let e = Int(end), s <= e
            else {
                throw CardRulesError(code: .binTableInvalid, message: "BIN table line \(lineNumber): start and end are 6 to 11 digits of equal length, start ≤ end")
            }
            func opt(_ s: String) -> String? { s.isEmpty ? nil : s }
            rows.append(Row(
                length: start.count, start: s, end: e,
                info: BINInfo(rangeStart: start, rangeEnd: end, brand: opt(fields[2]), type: opt(fields[3]), issuer: opt(fields[4]), country: opt(fields[5]))))
        }
        self.rows = rows
    }

    /// The most specific range holding the number: the narrowest, then the longest prefix.
    public func lookup(_ digits: some Collection<UInt8>) -> BINInfo? {
        var prefixes: [Int: Int] = [:]
        var best: Row?
        for row in rows where digits.count >= row.length {
            let p: Int
            if let cached = prefixes[row.length] {
                p = cached
            } else {
                p = digits.prefix(row.length).reduce(0) { $0 * 10 + Int($1 &- 48) }
                prefixes[row.length] = p
            }
            guard p >= row.start, p <= row.end else { continue }
            if let b = best {
                let widthB = Double(b.end - b.start + 1) / Double(pow10(b.length))
                let widthR = Double(row.end - row.start + 1) / Double(pow10(row.length))
                if widthR < widthB || (widthR == widthB && row.length > b.length) { best = row }
            } else {
                best = row
            }
        }
        return best?.info
    }

    private func pow10(_ n: Int) -> Int { (0..<n).reduce(1) { r, _ in r * 10 } }

    private static func fields(of line: Substring, lineNumber: Int) throws(CardRulesError) -> [String] {
        var fields: [String] = []
        var current = ""
        var quoted = false
        var chars = line.makeIterator()
        var atFieldStart = true
        while let c = chars.next() {
            if quoted {
                if c == "\"" {
                    var look = chars
                    if look.next() == "\"" { current.append("\""); chars = look } else { quoted = false }
                } else {
                    current.append(c)
                }
            } else if c == "\"" && atFieldStart {
                quoted = true
                atFieldStart = false
            } else if c == "," {
                fields.append(current.trimmingSpaces)
                current = ""
                atFieldStart = true
            } else {
                current.append(c)
                if c != " " { atFieldStart = false }
            }
        }
        guard !quoted else { throw CardRulesError(code: .binTableInvalid, message: "BIN table line \(lineNumber): unterminated quote") }
        fields.append(current.trimmingSpaces)
        return fields
    }
}

extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
}

extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while s.first == " " || s.first == "\t" { s = s.dropFirst() }
        while s.last == " " || s.last == "\t" { s = s.dropLast() }
        return String(s)
    }
}
