import Foundation

/// A caller's `metadata` on a token, payment, refund or customer (README "Metadata"): string keys
/// and string values, at most `maxKeys` pairs, keys of 1 to `maxKeyLength` characters, values of
/// at most `maxValueLength`. Never card data: the sidecar refuses a card number in a key or value
/// before anything is stored (`RequestFields.metadata`).
///
/// Kept twice, in one transaction: as JSON in the object's own `metadata` column (read with the
/// row, so no answer costs another statement) and as rows of `vault_metadata`
/// `(object_type, object_id, key, value)`, the index behind `metadata[key]=value` searches
/// (migration `0007-metadata`; deleting the object deletes its rows by trigger).
public struct Metadata: Sendable, Equatable {
    public static let maxKeys = 50
    public static let maxKeyLength = 40
    public static let maxValueLength = 500

    /// The pairs, by key.
    public var pairs: [String: String]

    public init(_ pairs: [String: String] = [:]) { self.pairs = pairs }

    public var isEmpty: Bool { pairs.isEmpty }

    /// The pairs in key order.
    public var sorted: [(key: String, value: String)] { pairs.sorted { $0.key < $1.key } }

    /// This metadata changed by `patch` (Stripe's update: a key given a value is set, a key given
    /// `""` is removed, a key not named is kept).
    public func merged(with patch: Metadata) -> Metadata {
        var out = pairs
        for (k, v) in patch.pairs {
            if v.isEmpty { out[k] = nil } else { out[k] = v }
        }
        return Metadata(out)
    }

    /// Without the pairs whose value is `""` (what a create stores: an empty value sets nothing).
    public var droppingEmptyValues: Metadata { Metadata(pairs.filter { !$0.value.isEmpty }) }

    /// The kinds of object that carry metadata (`vault_metadata.object_type`).
    public enum Owner: String, Sendable {
        case token, payment, refund, customer
    }
}


extension Metadata: Encodable {
    struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// An object of the pairs in key order (`{}` when there are none).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        for (k, v) in sorted { try c.encode(v, forKey: Key(stringValue: k)) }
    }
}
