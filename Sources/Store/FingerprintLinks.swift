import Foundation

/// The fingerprints that name one card under different fingerprint keys (docs/key-files.md
/// "Rotating the fingerprint key"): while the gateway zone holds two keys, its answers give a
/// card's fingerprint under each, and the sidecar records each pair here (both ways), as
/// `vault rewrap --fingerprints` does for every fingerprint it replaces. A lookup by any of a
/// card's fingerprints then matches the rows stored under the others, so a rotation never splits
/// one card into two identities. The rows hold keyed hashes only (no key, no card data).
public enum FingerprintLinks {
    /// `vault_fingerprint_links (fingerprint, alias)`: `alias` names the same card as `fingerprint`.
    static let migration = Migration("0009-fingerprint-links") { (d: Dialect) in
        [
            "CREATE TABLE vault_fingerprint_links (fingerprint TEXT NOT NULL, alias TEXT NOT NULL, PRIMARY KEY (fingerprint, alias))"
        ]
    }

    /// Records that every fingerprint of `group` names the same card (nothing for fewer than two).
    /// The fingerprints already linked to a member join the group, so that after several rotations
    /// a card's fingerprints under every key it was ever fingerprinted with stay linked together.
    /// Nothing is written when every pair is recorded already (the same card tokenized again
    /// during a rotation costs reads only).
    public static func record(_ group: [String], in db: Database) async throws(StoreError) {
        var members = Set(group)
        guard members.count > 1 else { return }
        var linked: [String: Set<String>] = [:]
        for fp in Set(group) {
            var aliases = Set<String>()
            for row in try await db.query("SELECT alias FROM vault_fingerprint_links WHERE fingerprint = ?", [fp]) { aliases.insert(try row.string(0)) }
            linked[fp] = aliases
            members.formUnion(aliases)
        }
        if linked.allSatisfy({ fp, aliases in aliases.isSuperset(of: members.subtracting([fp])) }) { return }
        let unique = members.sorted()
        var pairs: [[SQLValue]] = []
        for a in unique { for b in unique where a != b { pairs.append([.text(a), .text(b)]) } }
        _ = try await db.batch(
            "INSERT INTO vault_fingerprint_links (fingerprint, alias) VALUES (?, ?) ON CONFLICT (fingerprint, alias) DO NOTHING", pairs)
    }

    /// The stored fingerprints a lookup by `fingerprint` matches: itself, the fingerprints linked
    /// to it, and for each the legacy bare form of a named one (`fp1_<fkid>_<hex>` → `<hex>`:
    /// rows fingerprinted before the named form was stored carry the bare hex).
    public static func candidates(of fingerprint: String, in db: Database) async throws(StoreError) -> [String] {
        var names = [fingerprint]
        for row in try await db.query("SELECT alias FROM vault_fingerprint_links WHERE fingerprint = ? ORDER BY alias", [fingerprint]) {
            names.append(try row.string(0))
        }
        var out: [String] = []
        for name in names {
            if !out.contains(name) { out.append(name) }
            if name.utf8.count == 85, name.hasPrefix("fp1_") {
                let bare = String(name.suffix(64))
                if !out.contains(bare) { out.append(bare) }
            }
        }
        return out
    }

    /// Forgets the links of a retired fingerprint key: every pair holding one of its fingerprints
    /// (`fp1_<kid>_…`) or a legacy bare one. Kept, they would let whoever holds the retired key
    /// (a leak is why keys are rotated) follow an old fingerprint to the card's current one, and to
    /// its BIN and last 4: after retirement, lookups by the retired key's fingerprints match
    /// nothing (docs/key-files.md). The pairs removed.
    @discardableResult
    public static func forget(kid: String, in db: Database) async throws(StoreError) -> Int {
        let prefix = "fp1_\(kid)_%"
        return try await db.write("""
            DELETE FROM vault_fingerprint_links
            WHERE fingerprint LIKE ? OR alias LIKE ? OR fingerprint NOT LIKE 'fp1\\_%' ESCAPE '\\' OR alias NOT LIKE 'fp1\\_%' ESCAPE '\\'
            RETURNING fingerprint
            """, [prefix, prefix]).count
    }

    /// A filter `column IN (?, …)` over `candidates`.
    public static func filter(_ column: String, _ candidates: [String]) -> (String, [any SQLBindable]) {
        ("\(column) IN (" + candidates.map { _ in "?" }.joined(separator: ", ") + ")", candidates)
    }
}

extension Migrations {
    static let fingerprintLinks = FingerprintLinks.migration
}
