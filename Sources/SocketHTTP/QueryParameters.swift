import CardRules
import Foundation
import Hummingbird
import VaultCrypto

/// The query parameters of a GET (list routes: README "Listing and search"), read as strictly as
/// JSON bodies are (`RequestFields`): a parameter the route does not know is
/// `REQUEST_FIELD_UNKNOWN`, one given twice or of the wrong form `REQUEST_FIELD_INVALID`, each
/// naming the parameter. Names and values are percent-decoded (`created%5Bgte%5D` is `created[gte]`).
public struct QueryParameters: Sendable {
    /// Longest query string read.
    public static let maxBytes = 2048

    let values: [String: String]

    /// The parameters of `request`, each one of `allowed`.
    public init(_ request: Request, allowed: Set<String>, metadata: Bool = false) throws(APIError) {
        try self.init(query: request.uri.query ?? "", allowed: allowed, metadata: metadata)
    }

    /// With `metadata`, `metadata[key]=value` searches are allowed too (`metadataSearch`).
    public init(query: String, allowed: Set<String>, metadata: Bool = false) throws(APIError) {
        guard query.utf8.count <= Self.maxBytes else {
            throw APIError(.requestFieldInvalid, "the query string is at most \(Self.maxBytes) bytes")
        }
        var values: [String: String] = [:]
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = Self.decode(parts[0]), let value = Self.decode(parts.count > 1 ? parts[1] : "") else {
                throw APIError(.requestFieldInvalid, "the query string is not percent-encoded UTF-8")
            }
            guard allowed.contains(name) || (metadata && Self.isMetadataName(name)) else {
                // The name is the caller's free text (it could be a card number): only its
                // letters are echoed, never its digits, in the message and the field alike.
                let known = (allowed.sorted() + (metadata ? ["metadata[key]"] : [])).joined(separator: ", ")
                let shown = JSONReader.printable(name)
                throw APIError(.requestFieldUnknown, "unknown query parameter \(shown) (this route has \(known))", field: shown.isEmpty ? nil : shown)
            }
            guard values[name] == nil else { throw APIError(.requestFieldInvalid, "\(name) is given more than once", field: name) }
            values[name] = value
        }
        self.values = values
    }

    static func isMetadataName(_ name: String) -> Bool { name.hasPrefix("metadata[") && name.hasSuffix("]") }

    /// The `metadata[key]=value` pairs (README "Metadata": objects whose metadata holds every
    /// pair), checked as stored metadata is: `METADATA_INVALID` past its bounds,
    /// `REQUEST_FIELD_CARD_NUMBER` for a card number in a key or value (never echoed).
    public func metadataSearch() throws(APIError) -> [(key: String, value: String)] {
        var out: [(key: String, value: String)] = []
        for (name, value) in values where Self.isMetadataName(name) {
            let key = String(name.dropFirst(9).dropLast())
            do throws(VaultError) {
                guard !CardNumberScanner.containsCardNumber(key) else {
                    throw VaultError(.requestFieldCardNumber, "a metadata key looks like it holds a card number", field: "metadata")
                }
                let field = "metadata[\(JSONReader.printable(key))]"
                guard !key.isEmpty, key.count <= Metadata.maxKeyLength, !value.isEmpty, value.count <= Metadata.maxValueLength else {
                    throw VaultError(
                        .metadataInvalid, "metadata[key]=value: a key of 1 to \(Metadata.maxKeyLength) characters, a value of 1 to \(Metadata.maxValueLength)",
                        field: field)
                }
                out.append((key, try RequestFields.metadataText(value, field: field)))
            } catch {
                throw APIError(error)
            }
        }
        return out.sorted { $0.key < $1.key }
    }

    static func decode(_ s: Substring) -> String? {
        String(s).replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }

    /// The raw value, nil when absent.
    public subscript(_ name: String) -> String? { values[name] }

    /// An integer in `range`.
    public func int(_ name: String, in range: ClosedRange<Int>) throws(APIError) -> Int? {
        guard let v = values[name] else { return nil }
        guard v.utf8.count <= 9, let n = Int(v), range.contains(n) else {
            throw APIError(.requestFieldInvalid, "\(name) is an integer from \(range.lowerBound) to \(range.upperBound)", field: name)
        }
        return n
    }

    /// One of `allowed`.
    public func oneOf(_ name: String, _ allowed: [String]) throws(APIError) -> String? {
        guard let v = values[name] else { return nil }
        guard allowed.contains(v) else {
            throw APIError(.requestFieldInvalid, "\(name) is one of \(allowed.joined(separator: ", "))", field: name)
        }
        return v
    }

    /// A vault id (`prefix` and lower-case letters, digits or `_`), as `RequestFields.id` reads one.
    public func id(_ name: String, prefix: String) throws(APIError) -> String? {
        guard let v = values[name] else { return nil }
        guard v.utf8.count <= 64, v.hasPrefix(prefix),
              v.utf8.allSatisfy({ (48...57).contains($0) || (97...122).contains($0) || $0 == 95 })
        else { throw APIError(.requestFieldInvalid, "\(name) is \(prefix) and lower-case letters or digits", field: name) }
        return v
    }

    /// A card fingerprint: named `fp1_<fkid>_<64 hex>`, or the legacy 64 lower-case hex digits.
    public func fingerprint(_ name: String = "fingerprint") throws(APIError) -> String? {
        guard let v = values[name] else { return nil }
        guard FingerprintName.isWellFormed(v) else {
            throw APIError(.requestFieldInvalid, "\(name) is fp1_<fkid>_<64 hex> (or 64 lower-case hex digits)", field: name)
        }
        return v
    }

    /// An RFC 3339 time, as the answers write one (`2026-11-23T12:50:59Z`; fractional seconds and
    /// an offset such as `+01:00` allowed).
    public func date(_ name: String) throws(APIError) -> Date? {
        guard let v = values[name] else { return nil }
        let plain = ISO8601DateFormatter()
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        guard let d = plain.date(from: v) ?? fractional.date(from: v) else {
            throw APIError(.requestFieldInvalid, "\(name) is a UTC time such as 2026-11-23T12:50:59Z", field: name)
        }
        return d
    }
}
