/// The text form of a card fingerprint (docs/key-files.md "Fingerprints"): `fp1_<fkid>_<hex>`,
/// where `fkid` is the fingerprint key's kid (16 lowercase hex) and `hex` the keyed BLAKE2b-256 of
/// the PAN digits (64 lowercase hex), 85 characters in all. Stores written before the named form
/// hold the bare 64 hex characters (the legacy form): accepted in lookups, upgraded by
/// `vault rewrap --fingerprints`.
public enum FingerprintName {
    /// The prefix of the named form (version 1).
    public static let prefix = "fp1_"
    /// Characters of the named form.
    public static let namedLength = 85

    /// `fp1_<kid>_<hex>`.
    public static func format(kid: String, hex: String) -> String { prefix + kid + "_" + hex }

    /// The kid (nil for the legacy bare form) and the hex of a well-formed fingerprint; nil for
    /// anything else.
    public static func parse(_ text: String) -> (kid: String?, hex: String)? {
        if isHex(text[...], count: 64) { return (nil, text) }
        let u = Array(text.utf8)
        guard u.count == namedLength, text.hasPrefix(prefix), u[20] == UInt8(ascii: "_") else { return nil }
        let kid = String(decoding: u[4..<20], as: UTF8.self), hex = String(decoding: u[21...], as: UTF8.self)
        guard isHex(kid[...], count: 16), isHex(hex[...], count: 64) else { return nil }
        return (kid, hex)
    }

    /// Whether `text` is in the named form.
    public static func isNamed(_ text: String) -> Bool { parse(text)?.kid != nil }

    /// Whether `text` is a fingerprint in either documented form (named, or legacy bare hex).
    public static func isWellFormed(_ text: String) -> Bool { parse(text) != nil }

    /// The kid of a named fingerprint (nil for the bare form or anything else).
    public static func kid(of text: String) -> String? { parse(text)?.kid }

    private static func isHex(_ s: Substring, count: Int) -> Bool {
        s.utf8.count == count && s.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }
}

/// The fingerprint keys of a gateway zone (docs/key-files.md): the primary (`fingerprint.fk`),
/// whose fingerprints new tokens get, and the others (`fingerprint-<fkid>.fk`) still held during a
/// rotation, whose fingerprints of the same card are answered beside it so that lookups by either
/// find the card.
public struct FingerprintKeys: Sendable {
    public let primary: FingerprintKey
    public let others: [FingerprintKey]

    public init(primary: FingerprintKey, others: [FingerprintKey] = []) {
        self.primary = primary
        self.others = others.filter { $0.kid != primary.kid }
    }

    /// Every key, the primary first.
    public var all: [FingerprintKey] { [primary] + others }

    /// The key named `kid`, if held.
    public func key(kid: String) -> FingerprintKey? { all.first { $0.kid == kid } }

    /// The card's named fingerprint under every key held, the primary's first.
    public func namedFingerprints(ofDigits digits: UnsafeRawBufferPointer) -> [String] {
        all.map { $0.namedFingerprint(ofDigits: digits) }
    }

    /// The file name of a key that is not the primary: `fingerprint-<fkid>.fk`.
    public static func otherFileName(kid: String) -> String { "fingerprint-\(kid).fk" }

    /// Whether a file name is another fingerprint key's: `fingerprint-<fkid>.fk`, also under a
    /// systemd directory credential's prefix (`vault-keys_fingerprint-<fkid>.fk`).
    static func isOtherFileName(_ name: String) -> Bool {
        guard name.hasSuffix(".fk") else { return false }
        let stem = name.dropLast(3)
        guard stem.utf8.count >= 28 else { return false }
        let tail = stem.suffix(28)   // "fingerprint-" + 16 hex
        let head = stem.dropLast(28)
        guard head.isEmpty || head.hasSuffix("_"), tail.hasPrefix("fingerprint-") else { return false }
        return tail.dropFirst(12).utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// Loads the fingerprint keys of a keys directory whose file names are `names`: nil when it
    /// holds no `fingerprint.fk` (the others alone answer nothing).
    /// - Throws: the codes of `KeyFiles.loadFingerprintKey`.
    public static func load(directory dir: String, names: [String]) throws(VaultError) -> FingerprintKeys? {
        guard names.contains(KeyFiles.fingerprintKeyFileName) else { return nil }
        let primary = try KeyFiles.loadFingerprintKey(path: dir + "/" + KeyFiles.fingerprintKeyFileName)
        var others: [FingerprintKey] = []
        for name in names.sorted() where isOtherFileName(name) {
            others.append(try KeyFiles.loadFingerprintKey(path: dir + "/" + name))
        }
        return FingerprintKeys(primary: primary, others: others)
    }
}
