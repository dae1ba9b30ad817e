import CardRules
import Foundation
import HTTPTypes
import Hummingbird
import Money
import VaultCrypto

/// Reading JSON request bodies, for both servers: the media type, the size limit, the body in
/// wiped memory, and the strict parser with coded refusals.
public enum JSONBody {
    /// Largest request body accepted by default (a card or an envelope fits many times over).
    public static let maxBytes = 16 * 1024

    /// The request body, in wiped memory (`SecureBytes`).
    ///
    /// Bodies carry card numbers and CVCs. NIO reads them into its own buffers, and the body
    /// chunks Hummingbird hands over are slices of those: copying them elsewhere and zeroing the
    /// copy would leave the card in NIO's buffer, freed without a wipe. So each chunk is zeroed
    /// where it lies, through the storage it shares with NIO's read buffer (nothing reads those
    /// bytes again once the HTTP parser has passed them), and only the `SecureBytes` copy remains;
    /// it is wiped when released. `Tests/VaultCLITests/HardeningCLITests` scans the running
    /// sidecar's memory for the card numbers it was sent.
    /// - Throws: `UNSUPPORTED_MEDIA_TYPE` unless JSON (`isJSON`), `BODY_TOO_LARGE` past `limit` bytes.
    public static func read(_ request: Request, limit: Int = maxBytes) async throws -> SecureBytes {
        guard isJSON(request.headers[.contentType]) else {
            throw APIError(.unsupportedMediaType, "send Content-Type: application/json (optionally with ; charset=utf-8)")
        }
        return try await collect(request, limit: limit)
    }

    /// `read` for a route whose body is optional: nil when the request has none (however it is
    /// framed: no length, `Content-Length: 0`, or chunked with no data), else the body, checked
    /// as `read` checks it. A chunked body comes without a `Content-Length` (and NIO does not pass
    /// `Transfer-Encoding` on), so the body itself says whether there is one.
    public static func readIfAny(_ request: Request, limit: Int = maxBytes) async throws -> SecureBytes? {
        let bytes = try await collect(request, limit: limit)
        guard bytes.count > 0 else { return nil }
        guard isJSON(request.headers[.contentType]) else {
            throw APIError(.unsupportedMediaType, "send Content-Type: application/json (optionally with ; charset=utf-8)")
        }
        return bytes
    }

    /// `parse` of a body that may be absent (`readIfAny`): nil without one.
    public static func parseIfAny<T>(
        _ request: Request, limit: Int = maxBytes, _ body: (inout JSONReader) throws(VaultError) -> T
    ) async throws -> T? {
        guard let bytes = try await readIfAny(request, limit: limit) else { return nil }
        return try bytes.withUnsafeBytes { raw throws(APIError) in try parse(raw, body) }
    }

    private static func collect(_ request: Request, limit: Int) async throws -> SecureBytes {
        var chunks: [ByteBuffer] = []
        defer { chunks.forEach(zeroInPlace) }
        var total = 0
        for try await chunk in request.body {
            chunks.append(chunk)
            total += chunk.readableBytes
            guard total <= limit else {
                throw APIError(.bodyTooLarge, "a request body is at most \(limit) bytes")
            }
        }
        return SecureBytes(capacity: total) { out in
            var at = 0
            for chunk in chunks {
                chunk.withUnsafeReadableBytes { raw in
                    UnsafeMutableRawBufferPointer(rebasing: out[at..<(at + raw.count)]).copyMemory(from: raw)
                    at += raw.count
                }
            }
            return total
        }
    }

    /// Whether a `Content-Type` is exactly `application/json`, optionally with `charset=utf-8`
    /// (any case, spaces around `;` and `=`, the charset quoted or not), and nothing else.
    public static func isJSON(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        // The usual header, `application/json` in any case, without the allocations below (a
        // lowercased copy, a split and trimmed copies: about 1 % of a tokenize, issue 16).
        if Self.isASCIICaseInsensitive(contentType, "application/json") { return true }
        let parts = contentType.lowercased().split(separator: ";", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
        guard parts.first == "application/json" else { return false }
        guard parts.count > 1 else { return true }
        guard parts.count == 2 else { return false }
        let pair = parts[1].split(separator: "=", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        return pair.count == 2 && pair[0] == "charset" && (pair[1] == "utf-8" || pair[1] == "\"utf-8\"")
    }

    /// Whether `text` is `lower` (lowercase ASCII) but for the case of its ASCII letters.
    static func isASCIICaseInsensitive(_ text: String, _ lower: StaticString) -> Bool {
        var utf8 = text.utf8.makeIterator()
        return lower.withUTF8Buffer { expected in
            for e in expected {
                guard let b = utf8.next() else { return false }
                if b != e, !(b >= 65 && b <= 90 && b + 32 == e) { return false }
            }
            return utf8.next() == nil
        }
    }

    /// Zeroes a buffer's readable bytes in the storage it shares with other views (not a copy,
    /// which `withUnsafeMutableReadableBytes` would make for shared storage).
    static func zeroInPlace(_ buffer: ByteBuffer) {
        buffer.withUnsafeReadableBytes { raw in
            if let base = raw.baseAddress { memset(UnsafeMutableRawPointer(mutating: base), 0, raw.count) }
        }
    }

    /// Reads the body and parses it with `body` (a strict `JSONReader`, refusing with
    /// `REQUEST_MALFORMED` and whatever `body` throws).
    public static func parse<T>(
        _ request: Request, limit: Int = maxBytes, _ body: (inout JSONReader) throws(VaultError) -> T
    ) async throws -> T {
        let bytes = try await read(request, limit: limit)
        return try bytes.withUnsafeBytes { raw throws(APIError) in try parse(raw, body) }
    }

    /// Parses `raw` with `body`: the whole of it, nested at most 8 deep.
    public static func parse<T>(_ raw: UnsafeRawBufferPointer, _ body: (inout JSONReader) throws(VaultError) -> T) throws(APIError) -> T {
        do throws(VaultError) {
            var reader = JSONReader(raw, errorCode: .requestMalformed, maxDepth: 8)
            let value = try body(&reader)
            try reader.finish()
            return value
        } catch {
            throw APIError(error)
        }
    }

    /// A body `{"<name>":"<string>"}` with nothing else.
    public static func stringField(_ name: String, of request: Request, maxBytes: Int) async throws -> String {
        try await parse(request) { (r: inout JSONReader) throws(VaultError) -> String in
            var value: String?
            try r.readObject { (r, key) throws(VaultError) in
                guard key == name else { throw VaultError(.requestFieldUnknown, "the body has only \(name)") }
                value = try r.readString(maxBytes: maxBytes)
            }
            guard let value else { throw VaultError(.requestFieldMissing, "\(name) is missing", field: name) }
            return value
        }
    }

    /// `field` when it was found, else `REQUEST_FIELD_MISSING` naming it.
    public static func required<T>(_ value: T?, _ field: String) throws(VaultError) -> T {
        guard let value else { throw VaultError(.requestFieldMissing, "\(field) is missing", field: field) }
        return value
    }
}

/// Request fields several routes share, each with its coded refusal.
public enum RequestFields {
    /// Any field that is not a card field: refused with `REQUEST_FIELD_CARD_NUMBER` (422, naming
    /// the field, never echoing the value) when it holds what looks like a card number
    /// (`CardNumberScanner`: 12 to 19 digits passing the Luhn check, separators allowed). Checked
    /// before the field's own form, so the answer says why.
    public static func freeText(_ value: String, field: String) throws(VaultError) -> String {
        guard !CardNumberScanner.containsCardNumber(value) else {
            throw VaultError(
                .requestFieldCardNumber, "\(field) looks like it holds a card number; card numbers go only in card.number, where they are sealed",
                field: field)
        }
        return value
    }

    /// A `metadata` object (README "Metadata"): string keys of 1 to `Metadata.maxKeyLength`
    /// characters, string values of at most `Metadata.maxValueLength`, at most `Metadata.maxKeys`
    /// pairs, else `METADATA_INVALID`; a card number in a key or value (`freeText`'s rule) is
    /// `REQUEST_FIELD_CARD_NUMBER` naming `metadata[key]` (or `metadata` when the key holds it),
    /// never echoing it. A value `""` stays in the result: an update removes that key with it, a
    /// create stores nothing for it.
    public static func metadata(_ r: inout JSONReader) throws(VaultError) -> Metadata {
        guard r.peekValueStart() == UInt8(ascii: "{") else {
            throw VaultError(.metadataInvalid, "metadata is an object of string keys and string values", field: "metadata")
        }
        var pairs: [String: String] = [:]
        try r.readObject { (r, key) throws(VaultError) in
            guard !CardNumberScanner.containsCardNumber(key) else {
                throw VaultError(.requestFieldCardNumber, "a metadata key looks like it holds a card number; card numbers go only in card.number", field: "metadata")
            }
            let field = "metadata[\(JSONReader.printable(key))]"
            guard !key.unicodeScalars.contains(where: Self.isControl) else {
                throw VaultError(.metadataInvalid, "a metadata key has no control characters", field: "metadata")
            }
            guard !key.isEmpty, key.count <= Metadata.maxKeyLength else {
                throw VaultError(.metadataInvalid, "a metadata key is 1 to \(Metadata.maxKeyLength) characters", field: "metadata")
            }
            guard r.peekValueStart() == UInt8(ascii: "\"") else {
                throw VaultError(.metadataInvalid, "metadata values are strings", field: field)
            }
            let value = try r.readString(maxBytes: Metadata.maxValueLength * 4)
            guard value.count <= Metadata.maxValueLength else {
                throw VaultError(.metadataInvalid, "a metadata value is at most \(Metadata.maxValueLength) characters", field: field)
            }
            _ = try metadataText(value, field: field)
            guard pairs.count < Metadata.maxKeys else {
                throw VaultError(.metadataInvalid, "metadata has at most \(Metadata.maxKeys) keys", field: "metadata")
            }
            pairs[key] = value
        }
        return Metadata(pairs)
    }

    /// A metadata value (or a `metadata[key]` search value): never a card number.
    public static func metadataText(_ value: String, field: String) throws(VaultError) -> String {
        guard !CardNumberScanner.containsCardNumber(value) else {
            throw VaultError(.requestFieldCardNumber, "\(field) looks like it holds a card number; card numbers go only in card.number", field: field)
        }
        guard !value.unicodeScalars.contains(where: isControl) else {
            throw VaultError(.metadataInvalid, "\(field) has no control characters (U+0000 to U+001F, U+007F)", field: field)
        }
        return value
    }

    /// U+0000–U+001F and U+007F: never in metadata (PostgreSQL refuses U+0000 in text).
    static func isControl(_ u: Unicode.Scalar) -> Bool { u.value < 0x20 || u.value == 0x7F }

    /// A positive amount in minor units (at most `Currency.maximumAmount`).
    public static func amount(_ r: inout JSONReader, field: String = "amount") throws(VaultError) -> Int {
        let v = try r.readInt()
        guard (1...Currency.maximumAmount).contains(v) else {
            throw VaultError(.amountInvalid, "\(field) is a positive integer in minor units, at most \(Currency.maximumAmount)", field: field)
        }
        return v
    }

    /// An active ISO 4217 code.
    public static func currency(_ r: inout JSONReader) throws(VaultError) -> Currency {
        guard let c = Currency(try r.readString(maxBytes: 8)) else {
            throw VaultError(.currencyInvalid, "currency is an ISO 4217 code such as EUR or USD", field: "currency")
        }
        return c
    }

    /// A vault id: `prefix` and lower-case letters, digits or `_`. Free text is checked first
    /// (`freeText`: never a card number; some ids, such as a session's customer, are stored as
    /// given) unless `freeTextCheck` is false (ids the vault made itself, as the gateway gets them).
    public static func id(_ r: inout JSONReader, prefix: String, field: String, freeTextCheck: Bool = true) throws(VaultError) -> String {
        var v = try r.readString(maxBytes: 64)
        if freeTextCheck { v = try freeText(v, field: field) }
        guard v.hasPrefix(prefix), v.utf8.allSatisfy({ (48...57).contains($0) || (97...122).contains($0) || $0 == 95 }) else {
            throw VaultError(.requestFieldInvalid, "\(field) is \(prefix) and lower-case letters or digits", field: field)
        }
        return v
    }

    /// 1 to 255 printable ASCII characters without spaces or quotes, not starting with
    /// `reservedPrefix` (keys the vault makes itself).
    public static func idempotencyKey(_ r: inout JSONReader, reservedPrefix: String) throws(VaultError) -> String {
        try idempotencyKey(r.readString(maxBytes: 255), reservedPrefix: reservedPrefix, field: "idempotency_key")
    }

    /// `k` checked as an idempotency key (the body field's or the `Idempotency-Key` header's).
    public static func idempotencyKey(_ k: String, reservedPrefix: String, field: String) throws(VaultError) -> String {
        let k = try freeText(k, field: field)
        guard !k.isEmpty, k.utf8.count <= 255, !k.hasPrefix(reservedPrefix), k.utf8.allSatisfy({ $0 > 32 && $0 < 127 && $0 != 34 && $0 != 92 }) else {
            throw VaultError(
                .requestFieldInvalid, "\(field) is 1 to 255 printable ASCII characters, no spaces or quotes, not starting with \(reservedPrefix)",
                field: field)
        }
        return k
    }

    /// The `Idempotency-Key` header, checked as the body's `idempotency_key` is; nil if absent.
    public static func idempotencyKeyHeader(_ request: Request, reservedPrefix: String) throws(APIError) -> String? {
        let values = request.headers[values: .idempotencyKey]
        guard let value = values.first else { return nil }
        guard values.count == 1 else {
            throw APIError(.requestFieldInvalid, "send one Idempotency-Key header", field: "Idempotency-Key")
        }
        do throws(VaultError) { return try idempotencyKey(value, reservedPrefix: reservedPrefix, field: "Idempotency-Key") } catch {
            throw APIError(error)
        }
    }

    /// The request's idempotency key: the `Idempotency-Key` header's, the body's `idempotency_key`,
    /// or both when equal; both and different: `IDEMPOTENCY_KEY_CONFLICT`; neither: missing.
    public static func idempotencyKey(header: String?, body: String?) throws(VaultError) -> String {
        if let header, let body, header != body {
            throw VaultError(.idempotencyKeyConflict, "the Idempotency-Key header and idempotency_key differ; send one, or both equal", field: "idempotency_key")
        }
        guard let key = header ?? body else {
            throw VaultError(.requestFieldMissing, "idempotency_key is missing (the field or the Idempotency-Key header)", field: "idempotency_key")
        }
        return key
    }
}

extension HTTPField.Name {
    /// The idempotency key of a POST, instead of (or as well as, equal) its `idempotency_key`.
    public static let idempotencyKey = Self("Idempotency-Key")!
}
