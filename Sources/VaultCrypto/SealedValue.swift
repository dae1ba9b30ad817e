internal import CSodium

/// A sealed value (docs/sealed-value.md): `vault:v1:<kid>:<base64 of the crypto_box_seal output>`.
///
/// The ciphertext is exactly libsodium's sealed box of the input bytes: anyone with the secret key
/// opens it with `crypto_box_seal_open` (PyNaCl `SealedBox`) after base64-decoding the last part.
public struct SealedValue: Sendable, Hashable, CustomStringConvertible {
    /// The key the value is sealed to.
    public let kid: KeyID
    /// The raw `crypto_box_seal` output: ephemeral public key (32) ‖ box (16-byte tag ‖ message).
    public let ciphertext: [UInt8]

    /// The text prefix of a sealed value.
    public static let textPrefix = "vault:v1:"
    /// Bytes a sealed box adds to its message (`crypto_box_SEALBYTES`, 48).
    public static var overhead: Int { Sodium.sealBytes }

    /// A sealed value from its parts.
    public init(kid: KeyID, ciphertext: [UInt8]) {
        self.kid = kid
        self.ciphertext = ciphertext
    }

    /// Parses the one-line text form (one trailing newline or CR LF allowed).
    /// - Throws: `SEALED_VALUE_MALFORMED` when the text is not of the form. (Whether it opens, or is
    ///   even long enough to, is for the opening side to say.)
    public init(text: some StringProtocol) throws(VaultError) {
        var line = Array(text.utf8)
        if line.last == 10 { line.removeLast() }
        if line.last == 13 { line.removeLast() }
        self = try line.withUnsafeBytes { raw in Result { () throws(VaultError) in try SealedValue(line: raw) } }.get()
    }

    /// Parses the text form from bytes (no newline).
    /// - Throws: `SEALED_VALUE_MALFORMED`.
    public init(line: UnsafeRawBufferPointer) throws(VaultError) {
        let prefix = Array(Self.textPrefix.utf8)
        let kidEnd = prefix.count + 16
        guard line.count > kidEnd + 1, line.starts(with: prefix), line[kidEnd] == UInt8(ascii: ":") else {
            throw VaultError(.sealedValueMalformed, "expected vault:v1:<kid>:<base64>")
        }
        guard let kid = KeyID(String(decoding: line[prefix.count..<kidEnd], as: UTF8.self)) else {
            throw VaultError(.sealedValueMalformed, "the kid is not 16 lowercase hex characters")
        }
        let payload = UnsafeRawBufferPointer(rebasing: line[(kidEnd + 1)...])
        var bytes = [UInt8](repeating: 0, count: Base64.maxDecodedLength(payload.count))
        guard let n = bytes.withUnsafeMutableBytes({ Base64.decode(payload, into: $0) }) else {
            throw VaultError(.sealedValueMalformed, "the ciphertext is not standard padded base64")
        }
        // A ciphertext too short to be a sealed box is for the opener to call corrupt, once it
        // has checked the kid (so a foreign kid is still KEY_MISMATCH).
        bytes.removeSubrange(n...)
        self.init(kid: kid, ciphertext: bytes)
    }

    /// The one-line text form, without a newline.
    public var text: String {
        Self.textPrefix + kid.rawValue + ":" + ciphertext.withUnsafeBytes { Base64.encode($0) }
    }

    public var description: String { text }
}

extension PublicKey {
    /// Seals `plaintext` with `crypto_box_seal` to this key.
    public func seal(_ plaintext: UnsafeRawBufferPointer) -> SealedValue {
        var out = [UInt8](repeating: 0, count: plaintext.count + Sodium.sealBytes)
        sealBox(plaintext, into: &out)
        return SealedValue(kid: kid, ciphertext: out)
    }

    /// Seals `plaintext` (e.g. a `SecureBytes`' contents) to this key.
    public func seal(_ plaintext: SecureBytes) -> SealedValue {
        plaintext.withUnsafeBytes { seal($0) }
    }

    /// The length of the text form of a sealed value of `plaintextCount` bytes.
    public func sealedTextLength(plaintextCount: Int) -> Int {
        SealedValue.textPrefix.utf8.count + 17 + Base64.encodedLength(plaintextCount + Sodium.sealBytes)
    }

    /// Seals `plaintext` and writes its text form straight into `output` (no newline); returns the
    /// length written. `output` must hold `sealedTextLength(plaintextCount:) + 1` bytes. The
    /// allocation-free path behind `vault seal --lines`.
    public func sealText(_ plaintext: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) -> Int {
        Sodium.ensureInitialised()
        let head = sealedTextHead
        precondition(output.count > sealedTextLength(plaintextCount: plaintext.count))
        output.copyBytes(from: head)
        let boxLength = plaintext.count + Sodium.sealBytes
        return withUnsafeTemporaryAllocation(byteCount: boxLength, alignment: 16) { box in
            let c = box.baseAddress!.assumingMemoryBound(to: UInt8.self)
            bytes.withUnsafeBufferPointer { pk in
                _ = crypto_box_seal(c, plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? UnsafePointer(c), UInt64(plaintext.count), pk.baseAddress!)
            }
            return head.count + Base64.encode(UnsafeRawBufferPointer(box), into: UnsafeMutableRawBufferPointer(rebasing: output[head.count...]))
        }
    }

    func sealBox(_ plaintext: UnsafeRawBufferPointer, into out: inout [UInt8]) {
        Sodium.ensureInitialised()
        let count = plaintext.count
        out.withUnsafeMutableBufferPointer { c in
            bytes.withUnsafeBufferPointer { pk in
                _ = crypto_box_seal(c.baseAddress!, plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? UnsafePointer(c.baseAddress!), UInt64(count), pk.baseAddress!)
            }
        }
    }
}
