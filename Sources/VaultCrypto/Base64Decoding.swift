/// Standard padded base64 decoding of non-secret text (ciphertext, public keys), for other modules.
public enum Base64Decoding {
    /// The bytes, or nil when `text` is not strict standard padded base64.
    public static func bytes(_ text: some StringProtocol) -> [UInt8]? { Base64.decode(text) }
}
