/// The kinds of key line (docs/key-files.md): `vault:pk:v1:`, `vault:sk:v1:`, `vault:fk:v1:`.
enum KeyKind: String, Sendable, CaseIterable {
    case `public` = "vault:pk:v1:"
    case secret = "vault:sk:v1:"
    case fingerprint = "vault:fk:v1:"
    case protectedSecret = "vault:skp:v1:"

    var name: String {
        switch self {
        case .public: "a public key (vault:pk:v1:)"
        case .secret: "a secret key (vault:sk:v1:)"
        case .fingerprint: "a fingerprint key (vault:fk:v1:)"
        case .protectedSecret: "a passphrase-protected secret key (vault:skp:v1:)"
        }
    }
}

enum KeyText {
    /// Returns the base64 part of a key line of kind `kind`, trimming surrounding ASCII whitespace.
    /// The returned buffer points into `line`.
    static func payload(_ line: UnsafeRawBufferPointer, expecting kind: KeyKind) throws(VaultError) -> UnsafeRawBufferPointer {
        var start = 0, end = line.count
        while start < end, isSpace(line[start]) { start += 1 }
        while end > start, isSpace(line[end - 1]) { end -= 1 }
        let trimmed = UnsafeRawBufferPointer(rebasing: line[start..<end])
        for other in KeyKind.allCases where hasPrefix(trimmed, other.rawValue) {
            guard other == kind else {
                throw VaultError(.keyFileWrongKind, "expected \(kind.name), but this is \(other.name)")
            }
            let payload = UnsafeRawBufferPointer(rebasing: trimmed[other.rawValue.utf8.count...])
            guard !payload.contains(where: isSpace) else {
                throw VaultError(.keyFileMalformed, "a key file holds exactly one line")
            }
            return payload
        }
        throw VaultError(.keyFileMalformed, "expected \(kind.name) line")
    }

    private static func isSpace(_ b: UInt8) -> Bool { b == 32 || b == 9 || b == 10 || b == 13 }

    private static func hasPrefix(_ buffer: UnsafeRawBufferPointer, _ prefix: String) -> Bool {
        let p = Array(prefix.utf8)
        guard buffer.count >= p.count else { return false }
        for i in 0..<p.count where buffer[i] != p[i] { return false }
        return true
    }
}
