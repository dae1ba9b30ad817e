import Foundation
import VaultCrypto

/// `Metadata` in the store: its column text (the search rows of `vault_metadata` follow the
/// column by trigger, migration `0007-metadata`) and its search filters.
extension Metadata {
    /// The text of the object's `metadata` column: nil when empty (no pair costs nothing).
    public var column: String? {
        guard !pairs.isEmpty else { return nil }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(pairs) else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    /// Metadata read from a `metadata` column (empty for NULL).
    public init(column: String?) throws(StoreError) {
        guard let column, !column.isEmpty else {
            self.init()
            return
        }
        guard let pairs = try? JSONDecoder().decode([String: String].self, from: Data(column.utf8)) else {
            throw StoreError(.corruptRow, "a stored metadata column does not parse")
        }
        self.init(pairs)
    }
}

extension Metadata {
    /// The list filters for `metadata[key]=value` searches (every pair must match): `idColumn`
    /// among the ids `vault_metadata_search` holds for the pair.
    public static func filters(_ search: [(key: String, value: String)], owner: Owner, idColumn: String = "id") -> [(String, [any SQLBindable])] {
        search.map { pair in
            ("\(idColumn) IN (SELECT object_id FROM vault_metadata WHERE object_type = ? AND key = ? AND value = ?)",
             [owner.rawValue, pair.key, pair.value] as [any SQLBindable])
        }
    }
}
