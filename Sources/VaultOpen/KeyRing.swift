@_spi(Opening) import VaultCrypto

/// The secret keys an opening process holds, by kid.
///
/// Built from `.key` files (mode 0600) or from a directory of them, such as a systemd
/// credentials directory (`$CREDENTIALS_DIRECTORY`).
public struct KeyRing: Sendable {
    private var keys: [KeyID: SecretKey] = [:]

    /// An empty ring.
    public init() {}

    /// A ring of the keys in these files.
    /// - Throws: the key-file codes of `SecretKey(path:)`.
    public init(paths: [String]) throws(VaultError) {
        for path in paths {
            let key = try SecretKey(path: path)
            keys[key.kid] = key
        }
    }

    /// Adds a key.
    @_spi(Opening) public mutating func add(_ key: SecretKey) { keys[key.kid] = key }

    /// The kids this ring opens, sorted.
    public var kids: [KeyID] { keys.keys.sorted() }

    /// The public key of a kid in the ring.
    public func publicKey(for kid: KeyID) -> PublicKey? { keys[kid]?.publicKey }

    /// The secret key for `kid`.
    /// - Throws: `KEY_MISMATCH` when the ring has no key of that kid.
    func key(for kid: KeyID) throws(VaultError) -> SecretKey {
        guard let key = keys[kid] else {
            let have = keys.isEmpty ? "no keys" : "only " + kids.map(\.rawValue).joined(separator: ", ")
            throw VaultError(.keyMismatch, "sealed to key \(kid), but this ring holds \(have)")
        }
        return key
    }
}
