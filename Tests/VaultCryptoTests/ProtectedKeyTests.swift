import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing
@_spi(Opening) import VaultCrypto

/// Passphrase-protected secret key files (`vault:skp:v1:`): written by keygen with a passphrase,
/// opened only with it, refused when altered or when their Argon2id limits are out of range,
/// and re-protected (or unprotected) without changing the key.
@Suite struct ProtectedKeyTests {
    static let prefix = "vault:skp:v1:"
    let passphrase = SecureBytes(Array("correct horse".utf8))
    let otherPassphrase = SecureBytes(Array("battery staple".utf8))

    /// A fresh directory holding one protected key pair; returns the directory and the kid.
    func makeProtectedPair() throws -> (dir: String, kid: KeyID) {
        let dir = makeTemporaryDirectory()
        let kid = try KeyFiles.generateKeyPair(directory: dir, passphrase: passphrase, cost: .interactive)
        return (dir, kid)
    }

    /// The decoded payload of a `vault:skp:v1:` file.
    func payload(_ path: String) throws -> [UInt8] {
        let text = readFile(path)
        #expect(text.hasPrefix(Self.prefix) && text.hasSuffix("\n"))
        let b64 = text.dropFirst(Self.prefix.count).dropLast()
        return try #require(Data(base64Encoded: String(b64)).map { Array($0) })
    }

    /// Writes `bytes` back as a `vault:skp:v1:` file with mode 0600.
    func writePayload(_ bytes: [UInt8], to path: String) {
        writeFile(path, Self.prefix + Data(bytes).base64EncodedString() + "\n", mode: 0o600)
    }

    /// The code `SecretKey(path:passphrase:)` refuses with, or nil when it loads.
    func loadError(_ path: String, _ passphrase: SecureBytes?) -> VaultError.Code? {
        do {
            _ = try SecretKey(path: path, passphrase: passphrase)
            return nil
        } catch {
            return error.code
        }
    }

    static func littleEndian(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        bytes.reversed().reduce(0) { $0 << 8 | UInt64($1) }
    }

    static func setLittleEndian(_ value: UInt64, in bytes: inout [UInt8], at offset: Int) {
        for i in 0..<8 { bytes[offset + i] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(i))) }
    }

    // MARK: - Writing and loading

    /// keygen with a passphrase writes a 0600 `vault:skp:v1:` line of salt ‖ limits ‖ nonce ‖ box,
    /// recording the interactive Argon2id limits, beside an ordinary 0644 public key.
    @Test func keygenWritesAProtectedFile() throws {
        let (dir, kid) = try makeProtectedPair()
        defer { removeTree(dir) }
        let keyPath = "\(dir)/\(kid).key"
        let text = readFile(keyPath)
        #expect(text.hasPrefix(Self.prefix))
        #expect(!text.contains("vault:sk:v1:"))
        #expect(text.filter { $0 == "\n" }.count == 1 && text.hasSuffix("\n"))
        #expect(fileMode(keyPath) == 0o600)
        #expect(fileMode("\(dir)/\(kid).pub") == 0o644)
        #expect(readFile("\(dir)/\(kid).pub").hasPrefix("vault:pk:v1:"))
        #expect(KeyFiles.isProtected(path: keyPath))
        #expect(!KeyFiles.isProtected(path: "\(dir)/\(kid).pub"))

        let raw = try payload(keyPath)
        #expect(raw.count == 16 + 8 + 8 + 24 + 32 + 16)
        // libsodium's interactive preset: opslimit 2, memlimit 64 MiB.
        #expect(Self.littleEndian(raw[16..<24]) == 2)
        #expect(Self.littleEndian(raw[24..<32]) == 64 << 20)
        // A second key gets a fresh salt and nonce.
        let second = try KeyFiles.generateKeyPair(directory: dir, passphrase: passphrase, cost: .interactive)
        let raw2 = try payload("\(dir)/\(second).key")
        #expect(raw2[0..<16] != raw[0..<16])
        #expect(raw2[32..<56] != raw[32..<56])
    }

    /// With the right passphrase the file loads to the key whose public half was written beside it.
    @Test func loadsWithTheRightPassphrase() throws {
        let (dir, kid) = try makeProtectedPair()
        defer { removeTree(dir) }
        let key = try SecretKey(path: "\(dir)/\(kid).key", passphrase: passphrase)
        #expect(key.kid == kid)
        #expect(try KeyFiles.loadPublicKey(path: "\(dir)/\(kid).pub") == key.publicKey)
        // A copy of the same passphrase bytes works too (nothing is tied to the object).
        #expect(try SecretKey(path: "\(dir)/\(kid).key", passphrase: SecureBytes(Array("correct horse".utf8))).kid == kid)
        #expect(!key.description.contains("correct"))
    }

    /// A wrong (or empty) passphrase is KEY_PASSPHRASE_WRONG, naming the file but not the passphrase.
    @Test func wrongPassphraseIsRefused() throws {
        let (dir, kid) = try makeProtectedPair()
        defer { removeTree(dir) }
        let path = "\(dir)/\(kid).key"
        let e = #expect(throws: VaultError.self) { _ = try SecretKey(path: path, passphrase: otherPassphrase) }
        #expect(e?.code == .keyPassphraseWrong)
        #expect(e?.field == path)
        #expect(e?.message.contains("battery") == false)
        #expect(loadError(path, SecureBytes(Array("correct horse ".utf8))) == .keyPassphraseWrong)
        #expect(loadError(path, SecureBytes([])) == .keyPassphraseWrong)
    }

    /// Without a passphrase a protected file is KEY_PASSPHRASE_REQUIRED.
    @Test func missingPassphraseIsRequired() throws {
        let (dir, kid) = try makeProtectedPair()
        defer { removeTree(dir) }
        let e = #expect(throws: VaultError.self) { _ = try SecretKey(path: "\(dir)/\(kid).key") }
        #expect(e?.code == .keyPassphraseRequired)
        #expect(loadError("\(dir)/\(kid).key", nil) == .keyPassphraseRequired)
    }

    /// A protected key file readable by group or others is refused like any secret key file.
    @Test func permissionsAreChecked() throws {
        let (dir, kid) = try makeProtectedPair()
        defer { removeTree(dir) }
        chmod("\(dir)/\(kid).key", 0o640)
        #expect(loadError("\(dir)/\(kid).key", passphrase) == .keyFilePermissions)
    }

    // MARK: - Tampering

    /// One flipped bit anywhere in the payload is refused (wrong passphrase or malformed), never
    /// opened and never a crash; in the salt, nonce, box or tag it is KEY_PASSPHRASE_WRONG.
    @Test func flippedBytesAreRefused() throws {
        let (dir, kid) = try makeProtectedPair()
        defer { removeTree(dir) }
        let path = "\(dir)/\(kid).key"
        let original = try payload(path)
        // salt, nonce, box, tag: the box does not open.
        for i in [0, 15, 32, 55, 56, 87, 88, 103] {
            var raw = original
            raw[i] ^= 0x01
            writePayload(raw, to: path)
            #expect(loadError(path, passphrase) == .keyPassphraseWrong, "byte \(i)")
        }
        // Across the whole payload, including the limits: refused either way.
        for i in stride(from: 0, to: original.count, by: 7) {
            var raw = original
            raw[i] ^= 0x01
            writePayload(raw, to: path)
            let code = loadError(path, passphrase)
            #expect(code == .keyPassphraseWrong || code == .keyFileMalformed, "byte \(i): \(String(describing: code))")
        }
        // The original still opens.
        writePayload(original, to: path)
        #expect(loadError(path, passphrase) == nil)
    }

    /// Base64 text that is altered into something that does not decode to the payload is KEY_FILE_MALFORMED.
    @Test func malformedTextIsRefused() throws {
        let (dir, kid) = try makeProtectedPair()
        defer { removeTree(dir) }
        let path = "\(dir)/\(kid).key"
        let text = readFile(path)
        let body = String(text.dropFirst(Self.prefix.count).dropLast())
        let p = Self.prefix
        let variants: [String] = [
            p + "*" + String(body.dropFirst()) + "\n",       // not base64
            p + String(body.dropLast(4)) + "\n",             // 3 bytes short
            p + body + "AAAA\n",                             // data after the padding
            p + String(body.dropLast()) + "\n",              // bad padding
            p + "\n",                                        // empty
            p + body + "\n" + p + body + "\n",               // two lines
        ]
        for variant in variants {
            writeFile(path, variant, mode: 0o600)
            #expect(loadError(path, passphrase) == .keyFileMalformed, "\(variant.count) characters")
        }
    }

    /// Argon2id limits outside the accepted range (forged opslimit or memlimit) are KEY_FILE_MALFORMED,
    /// refused before any Argon2id work.
    @Test func limitsOutsideTheRangeAreMalformed() throws {
        let (dir, kid) = try makeProtectedPair()
        defer { removeTree(dir) }
        let path = "\(dir)/\(kid).key"
        let original = try payload(path)
        let forged: [(ops: UInt64?, mem: UInt64?)] = [
            (1000, nil),               // opslimit 1000
            (17, nil),                 // just above the cap of 16
            (1, nil),                  // below the interactive minimum
            (0, nil),
            (UInt64.max, nil),
            (nil, (1 << 30) + 1),      // memlimit just above 1 GiB
            (nil, 1 << 40),
            (nil, 1024),               // below the interactive minimum
        ]
        for (ops, mem) in forged {
            var raw = original
            if let ops { Self.setLittleEndian(ops, in: &raw, at: 16) }
            if let mem { Self.setLittleEndian(mem, in: &raw, at: 24) }
            writePayload(raw, to: path)
            let e = #expect(throws: VaultError.self, "ops \(String(describing: ops)) mem \(String(describing: mem))") {
                _ = try SecretKey(path: path, passphrase: passphrase)
            }
            #expect(e?.code == .keyFileMalformed, "ops \(String(describing: ops)) mem \(String(describing: mem))")
        }
        // Forging opslimit 1000 is checked by reading the bytes back, too.
        var raw = original
        Self.setLittleEndian(1000, in: &raw, at: 16)
        #expect(raw[16..<24] == [0xe8, 0x03, 0, 0, 0, 0, 0, 0])
    }

    // MARK: - Reprotecting

    /// reprotect to a new passphrase keeps the key: the old passphrase fails, the new one opens
    /// the same kid, the file stays 0600 and no temporary file is left.
    @Test func reprotectChangesThePassphrase() throws {
        let (dir, kid) = try makeProtectedPair()
        defer { removeTree(dir) }
        let path = "\(dir)/\(kid).key"
        let before = readFile(path)
        try KeyFiles.reprotect(path: path, current: passphrase, new: otherPassphrase, cost: .interactive)
        let after = readFile(path)
        #expect(after.hasPrefix(Self.prefix))
        #expect(after != before)
        #expect(fileMode(path) == 0o600)
        #expect(loadError(path, passphrase) == .keyPassphraseWrong)
        #expect(try SecretKey(path: path, passphrase: otherPassphrase).kid == kid)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).sorted() == ["\(kid).key", "\(kid).pub"])
    }

    /// reprotect with a wrong current passphrase (or none) is refused and leaves the file as it was.
    @Test func reprotectNeedsTheCurrentPassphrase() throws {
        let (dir, kid) = try makeProtectedPair()
        defer { removeTree(dir) }
        let path = "\(dir)/\(kid).key"
        let before = readFile(path)
        let wrong = #expect(throws: VaultError.self) {
            try KeyFiles.reprotect(path: path, current: otherPassphrase, new: otherPassphrase, cost: .interactive)
        }
        #expect(wrong?.code == .keyPassphraseWrong)
        let none = #expect(throws: VaultError.self) { try KeyFiles.reprotect(path: path, current: nil, new: nil, cost: .interactive) }
        #expect(none?.code == .keyPassphraseRequired)
        #expect(readFile(path) == before)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).sorted() == ["\(kid).key", "\(kid).pub"])
    }

    /// reprotect with no new passphrase writes a plain 0600 `vault:sk:v1:` file that loads
    /// without a passphrase to the same kid; protecting it again works from there.
    @Test func reprotectToPlainAndBack() throws {
        let (dir, kid) = try makeProtectedPair()
        defer { removeTree(dir) }
        let path = "\(dir)/\(kid).key"
        try KeyFiles.reprotect(path: path, current: passphrase, new: nil, cost: .interactive)
        let plain = readFile(path)
        #expect(plain.hasPrefix("vault:sk:v1:") && plain.count == 12 + 44 + 1)
        #expect(fileMode(path) == 0o600)
        #expect(!KeyFiles.isProtected(path: path))
        #expect(try SecretKey(path: path).kid == kid)
        // A passphrase given for a plain file is not needed and does no harm.
        #expect(try SecretKey(path: path, passphrase: passphrase).kid == kid)

        try KeyFiles.reprotect(path: path, current: nil, new: otherPassphrase, cost: .interactive)
        #expect(KeyFiles.isProtected(path: path))
        #expect(loadError(path, nil) == .keyPassphraseRequired)
        #expect(try SecretKey(path: path, passphrase: otherPassphrase).kid == kid)
    }

    /// A plain key made by keygen without a passphrase can be protected in place.
    @Test func plainKeygenKeyCanBeProtected() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        let kid = try KeyFiles.generateKeyPair(directory: dir)
        let path = "\(dir)/\(kid).key"
        try KeyFiles.reprotect(path: path, current: nil, new: passphrase, cost: .interactive)
        #expect(readFile(path).hasPrefix(Self.prefix))
        #expect(try SecretKey(path: path, passphrase: passphrase).kid == kid)
    }

    // MARK: - Passphrase files

    /// A passphrase file's first line is the passphrase: one trailing newline (or CRLF) is dropped,
    /// other characters are kept.
    @Test func readPassphraseDropsOneTrailingNewline() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        let path = "\(dir)/passphrase"
        let cases: [(String, String)] = [
            ("correct horse\n", "correct horse"),
            ("correct horse", "correct horse"),
            ("correct horse\r\n", "correct horse"),
            (" correct horse \n", " correct horse "),
        ]
        for (contents, expected) in cases {
            writeFile(path, contents, mode: 0o600)
            let read = try ProtectedKey.readPassphrase(path: path)
            #expect(read == SecureBytes(Array(expected.utf8)), "\(contents.debugDescription)")
        }
        // What it reads opens a key protected with the same words.
        let kid = try KeyFiles.generateKeyPair(directory: dir, passphrase: passphrase, cost: .interactive)
        writeFile(path, "correct horse\n", mode: 0o600)
        #expect(try SecretKey(path: "\(dir)/\(kid).key", passphrase: ProtectedKey.readPassphrase(path: path)).kid == kid)
    }

    /// An empty passphrase file (or one whose first line is empty) is refused.
    @Test func readPassphraseRefusesAnEmptyFile() {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        let path = "\(dir)/passphrase"
        for contents in ["", "\n", "\r\n"] {
            writeFile(path, contents, mode: 0o600)
            let e = #expect(throws: VaultError.self, "\(contents.debugDescription)") { _ = try ProtectedKey.readPassphrase(path: path) }
            #expect(e?.code == .keyPassphraseWrong, "\(contents.debugDescription)")
        }
    }

    /// A passphrase file that group or others may read is KEY_FILE_PERMISSIONS; a missing one KEY_FILE_NOT_FOUND.
    @Test func readPassphraseChecksPermissions() {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        let path = "\(dir)/passphrase"
        writeFile(path, "correct horse\n", mode: 0o644)
        let e = #expect(throws: VaultError.self) { _ = try ProtectedKey.readPassphrase(path: path) }
        #expect(e?.code == .keyFilePermissions)
        #expect(e?.message.contains("correct") == false)
        let missing = #expect(throws: VaultError.self) { _ = try ProtectedKey.readPassphrase(path: "\(dir)/none") }
        #expect(missing?.code == .keyFileNotFound)
    }
}
