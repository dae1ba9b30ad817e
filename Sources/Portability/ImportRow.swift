import CardRules
import VaultCrypto
import VaultOpen

/// One input row read through the mapping: the card in wiped memory, or the sealed value that
/// holds it, and the metadata columns. Errors name the field, never its value.
struct ImportRow {
    var number: SecureBytes?
    var expMonth: String?
    var expYear: String?
    var exp: String?
    var name: SecureBytes?
    var sealed: String?
    var metadata: [String: String] = [:]

    /// Longest sealed value read (a card JSON sealed: well under this).
    static let maxSealedBytes = 8192

    /// The card (a sealed one opened with `ring`; its CVC, if any, dropped: never imported).
    /// - Throws: `CARD_FIELD_MISSING`, the expiry and card-number codes; for a sealed row the
    ///   codes of opening (`SEALED_VALUE_MALFORMED`, `KEY_MISMATCH`, `SEALED_VALUE_CORRUPT`) and of
    ///   the card JSON inside.
    func card(ring: KeyRing) throws(VaultError) -> CardData {
        if let sealed {
            let plain = try ring.open(SealedValue(text: sealed))
            let card = try plain.withUnsafeBytes { (b) throws(VaultError) in try CardData.parseJSON(b) }
            return try CardData(number: card.number, expiry: card.expiry, cvc: nil, name: card.name)
        }
        guard let number else { throw VaultError(.cardFieldMissing, "the card number is missing", field: "number") }
        if exp == nil, expMonth == nil || expYear == nil {
            throw VaultError(.cardFieldMissing, "the expiry is missing (exp, or exp_month and exp_year)", field: "exp")
        }
        let expiry: CardExpiry
        do throws(CardRulesError) {
            if let exp {
                expiry = try CardExpiry.parse(exp)
            } else {
                guard let month = Self.smallInt(expMonth ?? ""), let year = Self.smallInt(expYear ?? "") else {
                    throw CardRulesError(code: .expiryMalformed, message: "expiry month and year are digits")
                }
                expiry = try CardExpiry(month: month, year: year < 100 ? 2000 + year : year)
            }
        } catch {
            throw VaultError(cardRules: error, field: exp != nil ? "exp" : "exp_month")
        }
        return try CardData(number: number, expiry: expiry, cvc: nil, name: name)
    }

    /// 1 to 4 ASCII digits (spaces around allowed).
    static func smallInt(_ text: String) -> Int? {
        let t = text.trimmingSpaces
        guard (1...4).contains(t.utf8.count), t.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        return Int(t)
    }

    /// Metadata as the token keeps it, under the rules `POST /v1/tokens` applies (README
    /// "Metadata"): never a card number, no control characters, keys of 1 to 40 characters, values
    /// of at most 500, at most 50 pairs.
    /// - Throws: `REQUEST_FIELD_CARD_NUMBER` (never echoing it), `METADATA_INVALID`; the line is rejected.
    func tokenMetadata() throws(VaultError) -> Metadata {
        let isControl = { (u: Unicode.Scalar) in u.value < 0x20 || u.value == 0x7F }
        guard metadata.count <= Metadata.maxKeys else {
            throw VaultError(.metadataInvalid, "metadata has at most \(Metadata.maxKeys) keys", field: "metadata")
        }
        for (key, value) in metadata {
            let field = "metadata." + key
            guard !key.isEmpty, key.count <= Metadata.maxKeyLength, !key.unicodeScalars.contains(where: isControl) else {
                throw VaultError(.metadataInvalid, "a metadata key is 1 to \(Metadata.maxKeyLength) characters, no control characters", field: "metadata")
            }
            guard !CardNumberScanner.containsCardNumber(value), !CardNumberScanner.containsCardNumber(key) else {
                throw VaultError(.requestFieldCardNumber, "\(field) looks like it holds a card number; card numbers go only in the number column", field: field)
            }
            guard value.count <= Metadata.maxValueLength else {
                throw VaultError(.metadataInvalid, "a metadata value is at most \(Metadata.maxValueLength) characters", field: field)
            }
            guard !value.unicodeScalars.contains(where: isControl) else {
                throw VaultError(.metadataInvalid, "\(field) has no control characters (U+0000 to U+001F, U+007F)", field: field)
            }
        }
        return Metadata(metadata).droppingEmptyValues
    }
}

// MARK: - CSV

/// A CSV line cut into fields (RFC 4180 quoting, within one line).
struct CSVLine {
    /// A field: its bytes' range in the line (inside the quotes), and whether it has doubled quotes to undo.
    struct Field {
        var range: Range<Int>
        var escaped: Bool
    }

    let fields: [Field]

    /// Cuts `line`; nil when its quoting is broken (a quote inside an unquoted field, an unclosed
    /// quote, bytes after a closing quote).
    init?(_ line: UnsafeRawBufferPointer) {
        var fields: [Field] = []
        var i = 0
        let n = line.count, quote = UInt8(ascii: "\""), comma = UInt8(ascii: ",")
        while true {
            if i < n, line[i] == quote {
                var j = i + 1, escaped = false
                while true {
                    guard j < n else { return nil }
                    if line[j] == quote {
                        if j + 1 < n, line[j + 1] == quote { escaped = true; j += 2; continue }
                        break
                    }
                    j += 1
                }
                fields.append(Field(range: (i + 1)..<j, escaped: escaped))
                i = j + 1
                guard i == n || line[i] == comma else { return nil }
            } else {
                var j = i
                while j < n, line[j] != comma {
                    if line[j] == quote { return nil }
                    j += 1
                }
                fields.append(Field(range: i..<j, escaped: false))
                i = j
            }
            if i >= n { break }
            i += 1   // the comma
            if i == n { fields.append(Field(range: n..<n, escaped: false)); break }
        }
        self.fields = fields
    }

    /// A field's bytes, doubled quotes undone, into wiped memory.
    static func secure(_ line: UnsafeRawBufferPointer, _ f: Field, maxBytes: Int, field name: String) throws(VaultError) -> SecureBytes {
        guard f.range.count <= maxBytes else { throw VaultError(.inputTooLarge, "\(name) is longer than \(maxBytes) bytes", field: name) }
        return SecureBytes(capacity: f.range.count) { out in
            var n = 0, k = f.range.lowerBound
            while k < f.range.upperBound {
                out[n] = line[k]
                n += 1
                k += (f.escaped && line[k] == 34) ? 2 : 1
            }
            return n
        }
    }

    /// A field as text (for what is not card data: expiry, metadata, sealed values, headers).
    static func text(_ line: UnsafeRawBufferPointer, _ f: Field) -> String {
        let raw = String(decoding: UnsafeRawBufferPointer(rebasing: line[f.range]), as: UTF8.self)
        return f.escaped ? raw.replacingOccurrences(of: "\"\"", with: "\"") : raw
    }

    /// The header's column names (spaces around each dropped).
    static func header(_ line: UnsafeRawBufferPointer) throws(VaultError) -> [String] {
        guard let cut = CSVLine(line) else { throw VaultError(.importRowMalformed, "the header's quoting is broken", field: "line 1") }
        return cut.fields.map { text(line, $0).trimmingSpaces }
    }
}

// MARK: - Reading a row

/// Reads rows of one input through a resolved mapping.
struct RowReader: Sendable {
    let format: ImportFormat
    let mapping: ImportMapping
    /// CSV: the index of each mapped field's column.
    let columnIndex: [String: Int]
    let columnCount: Int

    init(format: ImportFormat, mapping: ImportMapping, header: [String]?) {
        self.format = format
        self.mapping = mapping
        var index: [String: Int] = [:]
        if let header {
            for (field, column) in mapping.pairs { index[field] = header.firstIndex(of: column) }
        }
        columnIndex = index
        columnCount = header?.count ?? 0
    }

    /// Reads one line.
    /// - Throws: `IMPORT_ROW_MALFORMED` (quoting, field count, not a JSON object), `INPUT_TOO_LARGE`.
    func read(_ line: UnsafeRawBufferPointer) throws(VaultError) -> ImportRow {
        format == .csv ? try readCSV(line) : try readJSON(line)
    }

    private func readCSV(_ line: UnsafeRawBufferPointer) throws(VaultError) -> ImportRow {
        guard let cut = CSVLine(line) else { throw VaultError(.importRowMalformed, "the row's quoting is broken") }
        guard cut.fields.count == columnCount else {
            throw VaultError(.importRowMalformed, "the row has \(cut.fields.count) fields, the header \(columnCount)")
        }
        var row = ImportRow()
        for (field, i) in columnIndex {
            let f = cut.fields[i]
            switch field {
            case "number": row.number = try CSVLine.secure(line, f, maxBytes: 64, field: field)
            case "name":
                if !f.range.isEmpty { row.name = try CSVLine.secure(line, f, maxBytes: CardData.maxNameBytes, field: field) }
            case "sealed": row.sealed = Self.limited(CSVLine.text(line, f))
            case "exp": row.exp = Self.limited(CSVLine.text(line, f))
            case "exp_month": row.expMonth = Self.limited(CSVLine.text(line, f))
            case "exp_year": row.expYear = Self.limited(CSVLine.text(line, f))
            default: row.metadata[String(field.dropFirst(9))] = CSVLine.text(line, f)
            }
        }
        if row.sealed != nil, row.sealed!.utf8.count > ImportRow.maxSealedBytes {
            throw VaultError(.inputTooLarge, "the sealed value is longer than \(ImportRow.maxSealedBytes) bytes", field: "sealed")
        }
        return row
    }

    /// Short fields are cut at 64 bytes (they are checked for their form afterwards).
    private static func limited(_ s: String) -> String { s.utf8.count <= ImportRow.maxSealedBytes ? s : String(s.prefix(64)) }

    private func readJSON(_ line: UnsafeRawBufferPointer) throws(VaultError) -> ImportRow {
        var reader = JSONReader(line, errorCode: .importRowMalformed)
        var row = ImportRow()
        let byColumn = Dictionary(mapping.pairs.map { ($0.column, $0.field) }, uniquingKeysWith: { a, _ in a })
        guard reader.peekValueStart() == UInt8(ascii: "{") else { throw VaultError(.importRowMalformed, "a line is not a JSON object") }
        try reader.readObject { (r, key) throws(VaultError) in
            guard let field = byColumn[key] else { return try r.skipValue() }
            if r.readNullIfPresent() { return }
            switch field {
            case "number": row.number = try r.readSecureString(maxBytes: 64)
            case "name": row.name = try r.readSecureString(maxBytes: CardData.maxNameBytes)
            case "sealed": row.sealed = try r.readString(maxBytes: ImportRow.maxSealedBytes)
            default:
                let value = r.peekValueStart() == UInt8(ascii: "\"") ? try r.readString(maxBytes: Metadata.maxValueLength) : String(try r.readInt())
                switch field {
                case "exp": row.exp = value
                case "exp_month": row.expMonth = value
                case "exp_year": row.expYear = value
                default: row.metadata[String(field.dropFirst(9))] = value
                }
            }
        }
        try reader.finish()
        return row
    }
}
