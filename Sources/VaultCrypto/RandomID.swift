internal import CSodium

/// Random identifiers from libsodium's CSPRNG: tokens, payment and envelope ids.
///
/// Never derived from card data. Lowercase base32 (RFC 4648 alphabet, no padding), so an id is
/// case-insensitive-safe and URL-safe: 16 bytes (128 bits) give 26 characters.
public enum RandomID {
    private static let alphabet = Array("abcdefghijklmnopqrstuvwxyz234567".utf8)

    /// `prefix` + base32 of `bytes` random bytes (default 16 = 128 bits).
    public static func make(prefix: String, bytes: Int = 16) -> String {
        Sodium.ensureInitialised()
        var raw = [UInt8](repeating: 0, count: bytes)
        randombytes_buf(&raw, bytes)
        return prefix + base32(raw)
    }

    /// True when `text` is `prefix` followed by the base32 of `bytes` bytes.
    public static func isWellFormed(_ text: some StringProtocol, prefix: String, bytes: Int = 16) -> Bool {
        guard text.hasPrefix(prefix) else { return false }
        let body = text.utf8.dropFirst(prefix.utf8.count)
        return body.count == (bytes * 8 + 4) / 5 && body.allSatisfy { alphabet.contains($0) }
    }

    /// `count` random decimal digits as ASCII bytes, each uniform on 0…9 (libsodium's
    /// `randombytes_uniform`: no modulo bias). Card-shaped tokens take their middle from here.
    public static func digits(_ count: Int) -> [UInt8] {
        Sodium.ensureInitialised()
        return (0..<max(count, 0)).map { _ in UInt8(ascii: "0") + UInt8(randombytes_uniform(10)) }
    }

    static func base32(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 8 + 4) / 5)
        var buffer = 0, bits = 0
        for b in bytes {
            buffer = (buffer << 8) | Int(b)
            bits += 8
            while bits >= 5 {
                out.append(alphabet[(buffer >> (bits - 5)) & 31])
                bits -= 5
            }
        }
        if bits > 0 { out.append(alphabet[(buffer << (5 - bits)) & 31]) }
        return String(decoding: out, as: UTF8.self)
    }
}
