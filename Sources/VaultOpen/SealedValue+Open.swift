@_spi(Opening) import VaultCrypto

extension KeyRing {
    /// Opens a sealed value with the key its kid names.
    /// - Throws: `KEY_MISMATCH` (no key of that kid), `SEALED_VALUE_CORRUPT` (tampered or truncated).
    public func open(_ value: SealedValue) throws(VaultError) -> SecureBytes {
        let key = try key(for: value.kid)
        guard let plain = value.ciphertext.withUnsafeBytes({ key.openSealedBox($0) }) else {
            throw VaultError(.sealedValueCorrupt, "the sealed value does not open: tampered, truncated or not sealed to \(value.kid)")
        }
        return plain
    }

    /// Parses and opens one line of sealed-value text.
    /// - Throws: `SEALED_VALUE_MALFORMED`, `KEY_MISMATCH`, `SEALED_VALUE_CORRUPT`.
    public func open(line: UnsafeRawBufferPointer) throws(VaultError) -> SecureBytes {
        try open(SealedValue(line: line))
    }
}
