internal import CSodium

/// A key identifier: lowercase hex of the first 8 bytes of BLAKE2b-256 (unkeyed) of the 32-byte
/// X25519 public key, 16 characters (docs/key-files.md).
public struct KeyID: Hashable, Sendable, CustomStringConvertible, Comparable {
    /// The 16 lowercase hex characters.
    public let rawValue: String

    /// Parses 16 lowercase hex characters; nil otherwise.
    public init?(_ text: some StringProtocol) {
        guard text.utf8.count == 16, text.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }) else {
            return nil
        }
        rawValue = String(text)
    }

    /// The kid of a public key.
    init(publicKeyBytes bytes: UnsafeRawBufferPointer) {
        Sodium.ensureInitialised()
        var hash = [UInt8](repeating: 0, count: 32)
        _ = crypto_generichash(&hash, 32, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(bytes.count), nil, 0)
        rawValue = Hex.encode(hash.prefix(8))
    }

    public var description: String { rawValue }
    public static func < (lhs: KeyID, rhs: KeyID) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// Lowercase hex for non-secret bytes.
enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)
    static func encode(_ bytes: some Collection<UInt8>) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            var i = 0
            for b in bytes {
                out[i] = digits[Int(b >> 4)]
                out[i + 1] = digits[Int(b & 0x0f)]
                i += 2
            }
            return i
        }
    }
}
