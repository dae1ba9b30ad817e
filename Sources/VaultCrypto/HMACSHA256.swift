internal import CSodium

/// HMAC-SHA-256 (RFC 2104, libsodium `crypto_auth_hmacsha256_*`) with a key of any length held in
/// wiped memory: the signature of webhook deliveries (docs/events.md "Verifying a delivery").
public enum HMACSHA256 {
    /// The length of a tag in bytes.
    public static let bytes = 32

    /// The tag of `parts` concatenated, keyed by `key`.
    public static func tag(key: SecureBytes, _ parts: [[UInt8]]) -> [UInt8] {
        Sodium.ensureInitialised()
        var state = crypto_auth_hmacsha256_state()
        defer { withUnsafeMutableBytes(of: &state) { sodium_memzero($0.baseAddress, $0.count) } }
        key.withUnsafeBytes { k in
            var empty: UInt8 = 0
            if let base = k.baseAddress {
                _ = crypto_auth_hmacsha256_init(&state, base.assumingMemoryBound(to: UInt8.self), k.count)
            } else {
                _ = crypto_auth_hmacsha256_init(&state, &empty, 0)
            }
        }
        for part in parts { _ = crypto_auth_hmacsha256_update(&state, part, UInt64(part.count)) }
        var out = [UInt8](repeating: 0, count: bytes)
        _ = crypto_auth_hmacsha256_final(&state, &out)
        return out
    }

    /// The tag as lowercase hex.
    public static func hex(key: SecureBytes, _ parts: [[UInt8]]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes * 2)
        for b in tag(key: key, parts) {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
