internal import CSodium

/// The key of card fingerprints: keyed BLAKE2b-256 of the PAN digits (docs/key-files.md, PCI DSS
/// 3.5.1.1).
///
/// Held by the gateway adapter only, beside the secret keys: with the BINs, last 4s and
/// fingerprints a sidecar stores it would rebuild every PAN. File: one line
/// `vault:fk:v1:<base64 of 32 bytes>`.
public struct FingerprintKey: Sendable {
    let bytes: SecureBytes
    /// The fingerprint kid: lowercase hex of the first 8 bytes of BLAKE2b-256 (unkeyed) of the 32
    /// key bytes, like a sealing kid. It names the key in every fingerprint (`fp1_<kid>_<hex>`)
    /// and reveals nothing of the key.
    public let kid: String

    init(bytes: SecureBytes) {
        self.bytes = bytes
        var hash = [UInt8](repeating: 0, count: 32)
        bytes.withUnsafeBytes { key in
            _ = crypto_generichash(&hash, 32, key.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(key.count), nil, 0)
        }
        kid = Hex.encode(hash.prefix(8))
    }

    /// A fingerprint key from 32 bytes (tests, and stores that keep the key elsewhere).
    public init(secureBytes: SecureBytes) throws(VaultError) {
        guard secureBytes.count == 32 else { throw VaultError(.keyFileMalformed, "a fingerprint key is 32 bytes") }
        self.init(bytes: secureBytes)
    }

    /// The fingerprint of a PAN in the named form the API answers and stores:
    /// `fp1_<kid>_<64 hex>` (docs/key-files.md "Fingerprints").
    public func namedFingerprint(ofDigits digits: UnsafeRawBufferPointer) -> String {
        FingerprintName.format(kid: kid, hex: fingerprint(ofDigits: digits))
    }

    /// A keyed name for a text of the gateway's own (`vault:guess-group:v1:…`, DESIGN §9: a
    /// truncation group is named in storage by a keyed hash, never in clear): lowercase hex of
    /// keyed BLAKE2b-128. The texts it names begin with `vault:`, which no PAN's digits do, so a
    /// name is never a fingerprint's.
    public func keyedName(_ text: String) -> String {
        var out = [UInt8](repeating: 0, count: 16)
        let message = Array(text.utf8)
        bytes.withUnsafeBytes { key in
            _ = crypto_generichash(&out, 16, message, UInt64(message.count), key.baseAddress!.assumingMemoryBound(to: UInt8.self), key.count)
        }
        return Hex.encode(out)
    }

    /// The bare fingerprint of a PAN given as ASCII digits: lowercase hex of keyed BLAKE2b-256
    /// (the part after the kid in the named form; stores written before the named form hold it).
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
