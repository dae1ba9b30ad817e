/// The one encoder of the API's answer models (`Encodable`, one per schema of openapi.json):
/// JSON written straight into one string, keys in the order `encode(to:)` writes them (the
/// models' declaration order), so answers are byte for byte stable. Synthesized conformances
/// leave a nil optional out (`encodeIfPresent`); `OrNull` writes `null`; a `RawJSON` value is
/// written as it is (JSON the vault made itself, such as a payment's `next_action`). Answers are
/// metadata only: card data never goes through here (it stays in wiped memory, `SecureBytes`).
///
/// Not `JSONEncoder`: on Linux it orders keys by hash (or sorts them, `.sortedKeys`) and costs
/// more. A token answer, best of four runs of `scripts/answer-bench/run` (`swiftc -O`, 200,000
/// answers, a shared 2-core box): 5.4 µs here, 7.5 µs with one reused `JSONEncoder`, 1.25 µs
/// for the hand-built string of earlier versions (README "Answers").
public enum AnswerJSON {
    public static func encode<T: Encodable>(_ value: T) -> String {
        let w = Writer()
        w.out.reserveCapacity(384)
        do { try w.value(value, path: []) } catch { return "null" }
        return w.out
    }

    final class Writer {
        var out = ""
        /// The containers being written, innermost last: (closing bracket, first element still to come).
        var open: [(close: String, first: Bool)] = []

        /// The separator before an element of the innermost container.
        func separator() {
            if open[open.count - 1].first { open[open.count - 1].first = false } else { out += "," }
        }

        func value<T: Encodable>(_ v: T, path: [any CodingKey]) throws {
            switch v {
            case let s as String: string(s)
            case let n as Int: out += String(n)
            case let b as Bool: out += b ? "true" : "false"
            case let r as RawJSON: out += r.text
            default:
                let depth = open.count
                try v.encode(to: _Encoder(writer: self, codingPath: path, depth: depth))
                if open.count > depth {
                    out += open.removeLast().close
                } else if open.count == depth, !wroteSingle {
                    out += "null"
                }
                wroteSingle = false
            }
        }
        var wroteSingle = false

        func string(_ s: String) {
            if !s.utf8.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C }) {
                out += "\""
                out += s
                out += "\""
                return
            }
            out += "\""
            for u in s.unicodeScalars {
                switch u {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += "\\n"
                case "\r": out += "\\r"
                case "\t": out += "\\t"
                case _ where u.value < 0x20:
                    let hex = String(u.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                default: out.unicodeScalars.append(u)
                }
            }
            out += "\""
        }

        func key(_ k: String) {
            separator()
            string(k)
            out += ":"
        }
    }

    struct _Encoder: Encoder {
        let writer: Writer
        var codingPath: [any CodingKey]
        let depth: Int
        var userInfo: [CodingUserInfoKey: Any] { [:] }
        func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
            if writer.open.count == depth {
                writer.out += "{"
                writer.open.append(("}", true))
            }
            return KeyedEncodingContainer(Keyed<Key>(writer: writer, codingPath: codingPath))
        }
        func unkeyedContainer() -> any UnkeyedEncodingContainer {
            if writer.open.count == depth {
                writer.out += "["
                writer.open.append(("]", true))
            }
            return Unkeyed(writer: writer, codingPath: codingPath)
        }
        func singleValueContainer() -> any SingleValueEncodingContainer { Single(writer: writer, codingPath: codingPath) }
    }

    struct Keyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let writer: Writer
        var codingPath: [any CodingKey]
        mutating func encodeNil(forKey key: Key) throws {
            writer.key(key.stringValue)
            writer.out += "null"
        }
        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
            writer.key(key.stringValue)
            try writer.value(value, path: [])
        }
        // The common field types without the generic path's dynamic casts.
        mutating func encode(_ value: String, forKey key: Key) throws {
            writer.key(key.stringValue)
            writer.string(value)
        }
        mutating func encode(_ value: Int, forKey key: Key) throws {
            writer.key(key.stringValue)
            writer.out += String(value)
        }
        mutating func encode(_ value: Bool, forKey key: Key) throws {
            writer.key(key.stringValue)
            writer.out += value ? "true" : "false"
        }
        mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws {
            guard let value else { return }
            try encode(value, forKey: key)
        }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
            preconditionFailure("answers have no nested containers: encode a model")
        }
        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            preconditionFailure("answers have no nested containers: encode an array")
        }
        mutating func superEncoder() -> any Encoder { preconditionFailure("answers have no superclass") }
        mutating func superEncoder(forKey key: Key) -> any Encoder { preconditionFailure("answers have no superclass") }
    }

    struct Unkeyed: UnkeyedEncodingContainer {
        let writer: Writer
        var codingPath: [any CodingKey]
        var count = 0
        mutating func encodeNil() throws {
            writer.separator()
            writer.out += "null"
            count += 1
        }
        mutating func encode<T: Encodable>(_ value: T) throws {
            writer.separator()
            try writer.value(value, path: codingPath)
            count += 1
        }
        mutating func encode(_ value: String) throws {
            writer.separator()
            writer.string(value)
            count += 1
        }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
            preconditionFailure("answers have no nested containers: encode a model")
        }
        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { preconditionFailure("answers have no nested containers") }
        mutating func superEncoder() -> any Encoder { preconditionFailure("answers have no superclass") }
    }

    struct Single: SingleValueEncodingContainer {
        let writer: Writer
        var codingPath: [any CodingKey]
        mutating func encodeNil() throws {
            writer.out += "null"
            writer.wroteSingle = true
        }
        mutating func encode(_ value: Bool) throws {
            writer.out += value ? "true" : "false"
            writer.wroteSingle = true
        }
        mutating func encode(_ value: String) throws {
            writer.string(value)
            writer.wroteSingle = true
        }
        mutating func encode(_ value: Int) throws {
            writer.out += String(value)
            writer.wroteSingle = true
        }
        mutating func encode<T: Encodable>(_ value: T) throws {
            try writer.value(value, path: codingPath)
            writer.wroteSingle = true
        }
        // Every other number the standard library encodes through a single value container (else it would come back here).
        mutating func encode(_ value: Double) throws {
            writer.out += "\(value)"
            writer.wroteSingle = true
        }
        mutating func encode(_ value: Float) throws {
            writer.out += "\(value)"
            writer.wroteSingle = true
        }
        mutating func encode(_ value: Int8) throws {
            writer.out += "\(value)"
            writer.wroteSingle = true
        }
        mutating func encode(_ value: Int16) throws {
            writer.out += "\(value)"
            writer.wroteSingle = true
        }
        mutating func encode(_ value: Int32) throws {
            writer.out += "\(value)"
            writer.wroteSingle = true
        }
        mutating func encode(_ value: Int64) throws {
            writer.out += "\(value)"
            writer.wroteSingle = true
        }
        mutating func encode(_ value: UInt) throws {
            writer.out += "\(value)"
            writer.wroteSingle = true
        }
        mutating func encode(_ value: UInt8) throws {
            writer.out += "\(value)"
            writer.wroteSingle = true
        }
        mutating func encode(_ value: UInt16) throws {
            writer.out += "\(value)"
            writer.wroteSingle = true
        }
        mutating func encode(_ value: UInt32) throws {
            writer.out += "\(value)"
            writer.wroteSingle = true
        }
        mutating func encode(_ value: UInt64) throws {
            writer.out += "\(value)"
            writer.wroteSingle = true
        }
    }
}

/// A value written `null` when absent (where an answer's schema has the field, nullable).
public struct OrNull<T: Encodable & Sendable>: Encodable, Sendable {
    public let value: T?
    public init(_ value: T?) { self.value = value }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        if let value { try c.encode(value) } else { try c.encodeNil() }
    }
}

/// JSON text written into an answer as it is.
public struct RawJSON: Encodable, Sendable {
    public let text: String
    public init(_ text: String) { self.text = text }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(text)
    }
}
