@_spi(Opening) import VaultCrypto

/// The secret keys an opening process holds, by kid.
///
/// Built from `.key` files (mode 0600) or from a directory of them, such as a systemd
/// credentials directory (`$CREDENTIALS_DIRECTORY`).
public struct KeyRing: Sendable {
    private var keys: [KeyID: SecretKey] = [:]
    /// The key ring description this ring is pinned to, if any: then only its primary and active
    /// kids open.
    public private(set) var pinned: KeyRingFile?

    /// An empty ring.
    public init() {}

    /// A ring of the keys in these files.
    /// - Throws: the key-file codes of `SecretKey(path:passphrase:)`.
    public init(paths: [String], passphrase: SecureBytes? = nil) throws(VaultError) {
        for path in paths {
            let key = try SecretKey(path: path, passphrase: passphrase)
            keys[key.kid] = key
        }
    }

    /// Adds a key.
    @_spi(Opening) public mutating func add(_ key: SecretKey) { keys[key.kid] = key }

    /// The kids this ring holds a secret key for, sorted.
    public var kids: [KeyID] { keys.keys.sorted() }

    /// The kids that open: those held, less any the pinned ring retires or does not list.
    public var openingKids: [KeyID] { kids.filter { pinned?.status(of: $0)?.opens ?? (pinned == nil) } }

    /// Pins the ring to a key ring description: from now on only kids it lists as primary or
    /// active open. Its primary must be held here (a gateway that cannot open new cards is
    /// misconfigured).
    /// - Throws: `KEY_MISMATCH` when the description's primary has no secret key here.
    public mutating func pin(to description: KeyRingFile) throws(VaultError) {
        guard keys[description.primary] != nil else {
            throw VaultError(.keyMismatch, "the key ring's primary \(description.primary) has no secret key here (only \(kids.map(\.rawValue).joined(separator: ", ")))")
        }
        pinned = description
    }

    /// The public key of a kid in the ring.
    public func publicKey(for kid: KeyID) -> PublicKey? { keys[kid]?.publicKey }

    /// The secret key for `kid`.
    /// - Throws: `KEY_MISMATCH` when the ring has no key of that kid; when pinned,
    ///   `KEY_RETIRED` or `KEY_NOT_IN_RING` for a kid the description retires or does not list.
    func key(for kid: KeyID) throws(VaultError) -> SecretKey {
        if let pinned, keys[kid] != nil { try pinned.checkOpens(kid, field: "kid") }
        guard let key = keys[kid] else {
            let have = keys.isEmpty ? "no keys" : "only " + kids.map(\.rawValue).joined(separator: ", ")
            throw VaultError(.keyMismatch, "sealed to key \(kid), but this ring holds \(have)")
        }
        return key
    }
}
