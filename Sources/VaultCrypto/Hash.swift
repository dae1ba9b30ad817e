internal import CSodium

/// Unkeyed BLAKE2b-256 (libsodium `crypto_generichash`, no key, 32-byte output) of non-secret bytes.
///
/// For chaining and identifying public data (the audit log's `prev`, kids). Never use it on card
/// data: a plain hash of a PAN is guessable (PCI DSS 3.5.1.1); fingerprints use `FingerprintKey`.
public enum Hash {
    /// The length of a BLAKE2b-256 digest in bytes.
    public static let blake2b256Bytes = 32

    /// BLAKE2b-256 of `bytes`: 32 bytes.
    public static func blake2b256(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: blake2b256Bytes) { out, count in
            blake2b256(bytes, into: UnsafeMutableRawBufferPointer(out))
            count = blake2b256Bytes
        }
    }

    /// Writes BLAKE2b-256 of `bytes` into the first 32 bytes of `out` (no allocation).
    /// `out` must hold at least 32 bytes.
    public static func blake2b256(_ bytes: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) {
        precondition(out.count >= blake2b256Bytes, "a BLAKE2b-256 digest needs 32 bytes")
        Sodium.ensureInitialised()
        _ = crypto_generichash(
            out.baseAddress!.assumingMemoryBound(to: UInt8.self), blake2b256Bytes,
            bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(bytes.count), nil, 0)
    }
}
