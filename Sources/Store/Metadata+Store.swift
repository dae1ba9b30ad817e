import Foundation
import VaultCrypto

/// `Metadata` in the store: its column text and its search rows (migration `0007-metadata`).
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

extension Transaction {
    /// Writes `metadata` as `owner`'s rows of `vault_metadata` (after deleting the ones it had).
    public func replaceMetadata(_ metadata: Metadata, of owner: Metadata.Owner, id: String) async throws(StoreError) {
        try await query("DELETE FROM vault_metadata WHERE object_type = ? AND object_id = ?", [owner.rawValue, id])
        try await insertMetadata(metadata, of: owner, id: id)
    }

    /// Adds `metadata`'s rows for a new object (nothing for an empty one).
    public func insertMetadata(_ metadata: Metadata, of owner: Metadata.Owner, id: String) async throws(StoreError) {
        guard !metadata.isEmpty else { return }
        let pairs = metadata.sorted
        let values = pairs.map { _ in "(?, ?, ?, ?)" }.joined(separator: ", ")
        let arguments: [any SQLBindable] = pairs.flatMap { [owner.rawValue, id, $0.key, $0.value] as [any SQLBindable] }
        try await query("INSERT INTO vault_metadata (object_type, object_id, key, value) VALUES \(values)", arguments)
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
