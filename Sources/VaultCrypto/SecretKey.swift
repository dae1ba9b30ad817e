internal import CSodium

/// An X25519 secret key: the only thing that opens sealed values and card envelopes.
///
/// Only the gateway adapter and operator tools in its zone hold one. The type is SPI
/// (`@_spi(Opening) import VaultCrypto`): a module that does not ask for it cannot even name it,
/// and `Tests/VaultCLITests` checks that only `VaultOpen` asks.
/// File (`<kid>.key`, mode 0600): one line `vault:sk:v1:<base64 of the 32 bytes>`.
@_spi(Opening)
public final class SecretKey: Sendable, CustomStringConvertible {
    let bytes: SecureBytes
    /// The matching public key.
    public let publicKey: PublicKey
    /// The key id (of the public key).
    public var kid: KeyID { publicKey.kid }

    /// A secret key from its 32 bytes; the public key is derived.
    /// - Throws: `KEY_FILE_MALFORMED` if not 32 bytes.
    public init(bytes: SecureBytes) throws(VaultError) {
        guard bytes.count == Sodium.boxSecretKeyBytes else { throw VaultError(.keyFileMalformed, "a secret key is 32 bytes") }
        var pk = [UInt8](repeating: 0, count: Sodium.boxPublicKeyBytes)
        bytes.withUnsafeBytes { sk in
            _ = crypto_scalarmult_base(&pk, sk.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        self.bytes = bytes
        self.publicKey = try PublicKey(rawBytes: pk)
    }

    /// Loads `<kid>.key`: refuses a file readable by group or others, or of another kind.
    /// - Throws: `KEY_FILE_NOT_FOUND`, `KEY_FILE_UNREADABLE`, `KEY_FILE_PERMISSIONS`, `KEY_FILE_WRONG_KIND`, `KEY_FILE_MALFORMED`.
    ///
    /// A passphrase-protected file (`vault:skp:v1:`, see `ProtectedKey`) needs `passphrase`.
    /// - Throws: also `KEY_PASSPHRASE_REQUIRED`, `KEY_PASSPHRASE_WRONG`.
    public convenience init(path: String, passphrase: SecureBytes? = nil) throws(VaultError) {
        let kind: KeyKind = KeyFiles.isProtected(path: path) ? .protectedSecret : .secret
        let contents = try KeyFileIO.read(path: path, private: true, expecting: kind)
        do throws(VaultError) {
            if kind == .protectedSecret {
                guard let passphrase else {
                    throw VaultError(.keyPassphraseRequired, "this secret key is passphrase-protected: give its passphrase (--passphrase-file, or the `passphrase` credential)")
                }
                let secret = try contents.withUnsafeBytes { (raw) throws(VaultError) -> SecureBytes in
                    try ProtectedKey.open(payload: try KeyText.payload(raw, expecting: .protectedSecret), passphrase: passphrase)
                }
                try self.init(bytes: secret)
            } else {
                try self.init(bytes: try KeyFiles.decodeSecret(contents, kind: .secret))
            }
        } catch {
            throw VaultError(error.code, "\(path): \(error.message)", field: path)
        }
    }

    /// `crypto_box_seal_open` of `ciphertext` into a new `SecureBytes`; nil if it does not open.
    public func openSealedBox(_ ciphertext: UnsafeRawBufferPointer) -> SecureBytes? {
        guard ciphertext.count >= Sodium.sealBytes else { return nil }
        var ok = false
        let plain = SecureBytes(capacity: ciphertext.count - Sodium.sealBytes) { out in
            ok = bytes.withUnsafeBytes { sk in
                crypto_box_seal_open(
                    out.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    ciphertext.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(ciphertext.count),
                    publicKey.bytes, sk.baseAddress!.assumingMemoryBound(to: UInt8.self)) == 0
            }
            return ok ? out.count : 0
        }
        return ok ? plain : nil
    }

    public var description: String { "SecretKey(\(kid), <redacted>)" }
}

/// XChaCha20-Poly1305 (IETF) decryption, for envelope fields. SPI: only the opening side uses it.
@_spi(Opening)
public enum FieldCipher {
    /// Opens `nonce ‖ ciphertext ‖ tag` under `key` with associated data `ad`; nil if it does not verify.
    public static func open(_ sealed: UnsafeRawBufferPointer, key: SecureBytes, ad: UnsafeRawBufferPointer) -> SecureBytes? {
        let overhead = Sodium.aeadNonceBytes + Sodium.aeadTagBytes
        guard sealed.count >= overhead, key.count == Sodium.aeadKeyBytes else { return nil }
        var ok = false
        let plain = SecureBytes(capacity: sealed.count - overhead) { out in
            var plainLength: UInt64 = 0
            let c = sealed.baseAddress!.assumingMemoryBound(to: UInt8.self)
            ok = key.withUnsafeBytes { k in
                crypto_aead_xchacha20poly1305_ietf_decrypt(
                    out.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    &plainLength, nil,
                    c + Sodium.aeadNonceBytes, UInt64(sealed.count - Sodium.aeadNonceBytes),
                    ad.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(ad.count),
                    c, k.baseAddress!.assumingMemoryBound(to: UInt8.self)) == 0
            }
            return ok ? Int(plainLength) : 0
        }
        return ok ? plain : nil
    }
}
