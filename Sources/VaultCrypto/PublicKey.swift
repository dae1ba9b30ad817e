internal import CSodium

/// An X25519 public key that card data is sealed to. Not secret: the sidecar and callers hold it.
///
/// Text form (a `.pub` file): `vault:pk:v1:<standard base64 of the 32 bytes>`.
public struct PublicKey: Sendable, Hashable, CustomStringConvertible {
    /// The 32 raw bytes.
    public let bytes: [UInt8]
    /// Its key identifier.
    public let kid: KeyID
    /// `vault:v1:<kid>:`, the head of every sealed value text for this key.
    let sealedTextHead: [UInt8]

    /// The text prefix of a public key line.
    public static let textPrefix = "vault:pk:v1:"

    /// A public key from its 32 raw bytes.
    /// - Throws: `KEY_FILE_MALFORMED` if not 32 bytes.
    public init(rawBytes: [UInt8]) throws(VaultError) {
        guard rawBytes.count == Sodium.boxPublicKeyBytes else {
            throw VaultError(.keyFileMalformed, "a public key is \(Sodium.boxPublicKeyBytes) bytes, got \(rawBytes.count)")
        }
        bytes = rawBytes
        kid = rawBytes.withUnsafeBytes { KeyID(publicKeyBytes: $0) }
        sealedTextHead = Array(("vault:v1:" + kid.rawValue + ":").utf8)
    }

    /// Parses the one-line text form (surrounding whitespace ignored).
    /// - Throws: `KEY_FILE_WRONG_KIND` for another kind of key line, `KEY_FILE_MALFORMED` otherwise.
    public init(text: some StringProtocol) throws(VaultError) {
        let line = Array(text.utf8)
        let raw = try line.withUnsafeBytes { buffer in
            Result { () throws(VaultError) -> [UInt8] in
                let payload = try KeyText.payload(buffer, expecting: .public)
                var out = [UInt8](repeating: 0, count: Base64.maxDecodedLength(payload.count))
                guard let n = out.withUnsafeMutableBytes({ Base64.decode(payload, into: $0) }), n == Sodium.boxPublicKeyBytes else {
                    throw VaultError(.keyFileMalformed, "a public key line holds base64 of exactly 32 bytes")
                }
                return Array(out.prefix(n))
            }
        }.get()
        try self.init(rawBytes: raw)
    }

    /// The one-line text form, without a newline.
    public var text: String { Self.textPrefix + bytes.withUnsafeBytes { Base64.encode($0) } }

    public var description: String { "PublicKey(\(kid))" }
}
