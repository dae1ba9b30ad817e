internal import CSodium

/// The key of card fingerprints: keyed BLAKE2b-256 of the PAN digits (docs/key-files.md, PCI DSS
/// 3.5.1.1).
///
/// Held by the gateway adapter only, beside the secret keys: with the BINs, last 4s and
/// fingerprints a sidecar stores it would rebuild every PAN. File: one line
/// `vault:fk:v1:<base64 of 32 bytes>`.
public struct FingerprintKey: Sendable {
    let bytes: SecureBytes

    init(bytes: SecureBytes) { self.bytes = bytes }

    /// A fingerprint key from 32 bytes (tests, and stores that keep the key elsewhere).
    public init(secureBytes: SecureBytes) throws(VaultError) {
        guard secureBytes.count == 32 else { throw VaultError(.keyFileMalformed, "a fingerprint key is 32 bytes") }
        bytes = secureBytes
    }

    /// The fingerprint of a PAN given as ASCII digits: lowercase hex of keyed BLAKE2b-256.
    /// Same digits, same key → same fingerprint; the expiry is not part of it.
    public func fingerprint(ofDigits digits: UnsafeRawBufferPointer) -> String {
        var out = [UInt8](repeating: 0, count: 32)
        bytes.withUnsafeBytes { key in
            _ = crypto_generichash(
                &out, 32, digits.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(digits.count),
                key.baseAddress!.assumingMemoryBound(to: UInt8.self), key.count)
        }
        return Hex.encode(out)
    }
}
