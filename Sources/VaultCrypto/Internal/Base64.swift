internal import CSodium

/// Standard base64 with padding (RFC 4648 §4), through libsodium's constant-time codec.
enum Base64 {
    static let variant = Int32(sodium_base64_VARIANT_ORIGINAL)

    /// Encoded length, without the NUL libsodium writes.
    static func encodedLength(_ count: Int) -> Int { Int(sodium_base64_encoded_len(count, variant)) - 1 }

    /// Encodes `bytes` to a String (only for non-secret data: ciphertext, public keys).
    static func encode(_ bytes: UnsafeRawBufferPointer) -> String {
        let length = encodedLength(bytes.count)
        return String(unsafeUninitializedCapacity: length + 1) { out in
            _ = sodium_bin2base64(
                UnsafeMutableRawPointer(out.baseAddress!).assumingMemoryBound(to: CChar.self), length + 1,
                bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count, variant)
            return length
        }
    }

    /// Writes the encoding of `bytes` into `out` (which must hold `encodedLength + 1`); returns the length.
    static func encode(_ bytes: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) -> Int {
        let length = encodedLength(bytes.count)
        precondition(out.count > length)
        _ = sodium_bin2base64(
            out.baseAddress!.assumingMemoryBound(to: CChar.self), length + 1,
            bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count, variant)
        return length
    }

    /// Largest decoded length for `count` characters of input.
    static func maxDecodedLength(_ count: Int) -> Int { count / 4 * 3 + 3 }

    /// Decodes strictly (no whitespace, padding required) into `out`; returns the byte count, or nil if malformed.
    static func decode(_ text: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) -> Int? {
        guard !text.isEmpty, text.count % 4 == 0, out.count >= maxDecodedLength(text.count) - 3 else { return nil }
        var written = 0
        var end: UnsafePointer<CChar>? = nil
        let rc = sodium_base642bin(
            out.baseAddress!.assumingMemoryBound(to: UInt8.self), out.count,
            text.baseAddress!.assumingMemoryBound(to: CChar.self), text.count,
            nil, &written, &end, variant)
        guard rc == 0, let end, UnsafeRawPointer(end) == text.baseAddress! + text.count else { return nil }
        return written
    }

    /// Decodes a String holding non-secret data (ciphertext, public key).
    static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var text = String(text)
        return text.withUTF8 { utf8 -> [UInt8]? in
            let raw = UnsafeRawBufferPointer(utf8)
            var result = [UInt8](repeating: 0, count: maxDecodedLength(raw.count))
            guard let n = result.withUnsafeMutableBytes({ decode(raw, into: $0) }) else { return nil }
            result.removeSubrange(n...)
            return result
        }
    }
}
