import VaultCrypto

/// The input formats of `vault import`.
public enum ImportFormat: String, Sendable, CaseIterable {
    /// Comma-separated, a header row first, one record per line (RFC 4180 quoting within a line).
    case csv
    /// One JSON object per line.
    case jsonl
}

/// Which column (CSV) or key (JSON lines) holds each card field (docs/portability.md, "Mapping").
///
/// A row is either plain (`number` and `exp`, or `number`, `exp_month` and `exp_year`, and an
/// optional `name`) or sealed (`sealed`: `vault:v1:<our kid>:<base64>` of a card JSON, sealed to
/// our public key, so no plaintext file is needed). `metadata.KEY=column` copies a column into the
/// token's metadata. A CVC is never imported: mapping one is refused.
public struct ImportMapping: Sendable, Equatable {
    /// The card fields a mapping may name.
    public static let fields = ["number", "exp_month", "exp_year", "exp", "name", "sealed"]

    /// Card field (or `metadata.KEY`) → source column, in the order given.
    public private(set) var pairs: [(field: String, column: String)] = []

    public static func == (a: ImportMapping, b: ImportMapping) -> Bool {
        a.pairs.map(\.field) == b.pairs.map(\.field) && a.pairs.map(\.column) == b.pairs.map(\.column)
    }

    /// A mapping from `field=column` items (`--map`, or the lines of `--map-file`).
    /// - Throws: `IMPORT_MAPPING_INVALID` for an item that is not `field=column`, an unknown
    ///   field, a field named twice, `cvc`.
    public init(_ items: [String]) throws(VaultError) {
        for item in items {
            guard let eq = item.firstIndex(of: "=") else {
                throw VaultError(.importMappingInvalid, "a mapping is field=column (got an item without '=')", field: "--map")
            }
            let field = String(item[..<eq]).trimmingSpaces, column = String(item[item.index(after: eq)...]).trimmingSpaces
            guard !column.isEmpty else { throw VaultError(.importMappingInvalid, "the mapping of \(field) names no column", field: "--map") }
            if field == "cvc" {
                throw VaultError(.importMappingInvalid, "a CVC is never imported (it is kept only until a card's first authorization)", field: "--map")
            }
            let isMetadata = field.hasPrefix("metadata.") && field.utf8.count > 9 && field.utf8.count <= 9 + Metadata.maxKeyLength
            guard Self.fields.contains(field) || isMetadata else {
                throw VaultError(
                    .importMappingInvalid, "\(field.utf8.count <= 40 ? field : "a field") is not a card field (\(Self.fields.joined(separator: ", ")), metadata.KEY)",
                    field: "--map")
            }
            guard !pairs.contains(where: { $0.field == field }) else {
                throw VaultError(.importMappingInvalid, "\(field) is mapped twice", field: "--map")
            }
            pairs.append((field, column))
        }
    }

    /// The column of `field`, if mapped.
    public func column(_ field: String) -> String? { pairs.first { $0.field == field }?.column }

    /// The mapping made complete: a field not mapped is read from the column of its own name when
    /// there is one (`columns`: the CSV header, or nil for JSON lines, where every field may be a
    /// key of its own name).
    /// - Throws: `IMPORT_MAPPING_INVALID` when a mapped column is not in the header, or the mapping
    ///   names neither `sealed` nor `number` with an expiry (or names both).
    public func resolved(columns: [String]?) throws(VaultError) -> ImportMapping {
        var out = self
        for field in Self.fields where column(field) == nil && (columns?.contains(field) ?? true) {
            // Only what a row can be read as: a sealed mapping takes no plain field and back.
            out.pairs.append((field, field))
        }
        if let columns {
            for (field, column) in out.pairs where !columns.contains(column) {
                throw VaultError(.importMappingInvalid, "the header has no column \(column.utf8.count <= 40 ? column : "…") (mapped to \(field))", field: "--map")
            }
        }
        let explicit = Set(pairs.map(\.field))
        let sealed = explicit.contains("sealed") || (!explicit.contains("number") && out.column("sealed") != nil && columns != nil)
        if sealed {
            if let plain = explicit.first(where: { ["number", "exp", "exp_month", "exp_year", "name"].contains($0) }) {
                throw VaultError(.importMappingInvalid, "a sealed row carries the whole card: \(plain) cannot be mapped with sealed", field: "--map")
            }
            out.pairs.removeAll { ["number", "exp", "exp_month", "exp_year", "name"].contains($0.field) }
            return out
        }
        out.pairs.removeAll { $0.field == "sealed" }
        if columns != nil {
            guard out.column("number") != nil, out.column("exp") != nil || (out.column("exp_month") != nil && out.column("exp_year") != nil) else {
                throw VaultError(.importMappingInvalid, "map number and exp (or exp_month and exp_year), or sealed", field: "--map")
            }
        }
        return out
    }

    /// A stable text of the mapping (part of the import's id).
    public var canonical: String { pairs.map { "\($0.field)=\($0.column)" }.joined(separator: "\n") }
}

extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while s.first == " " || s.first == "\t" { s = s.dropFirst() }
        while s.last == " " || s.last == "\t" || s.last == "\r" { s = s.dropLast() }
        return String(s)
    }
}
