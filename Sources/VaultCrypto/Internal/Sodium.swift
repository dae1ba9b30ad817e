internal import CSodium

/// libsodium initialisation, done once per process before the first call.
enum Sodium {
    /// `sodium_init()` is idempotent and thread-safe; a Swift global `let` runs it once.
    private static let initialised: Bool = sodium_init() >= 0

    /// Call before any libsodium function.
    @inline(__always)
    static func ensureInitialised() {
        precondition(initialised, "libsodium failed to initialise")
    }

    static let boxPublicKeyBytes = Int(crypto_box_publickeybytes())
    static let boxSecretKeyBytes = Int(crypto_box_secretkeybytes())
    static let sealBytes = Int(crypto_box_sealbytes())
    static let aeadKeyBytes = Int(crypto_aead_xchacha20poly1305_ietf_keybytes())
    static let aeadNonceBytes = Int(crypto_aead_xchacha20poly1305_ietf_npubbytes())
    static let aeadTagBytes = Int(crypto_aead_xchacha20poly1305_ietf_abytes())
}
