import Foundation
import Testing
@testable import VaultCrypto

@Suite struct KeyFileTests {
    @Test func keygenWritesBothFilesWithModesAndRefusesOverwrite() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        let kid = try KeyFiles.generateKeyPair(directory: dir)
        #expect(kid.rawValue.count == 16)
        let pub = readFile("\(dir)/\(kid).pub"), key = readFile("\(dir)/\(kid).key")
        #expect(pub.hasPrefix("vault:pk:v1:") && pub.hasSuffix("\n") && pub.count == 12 + 44 + 1)
        #expect(key.hasPrefix("vault:sk:v1:") && key.count == 12 + 44 + 1)
        #expect(fileMode("\(dir)/\(kid).pub") == 0o644)
        #expect(fileMode("\(dir)/\(kid).key") == 0o600)
        let loaded = try KeyFiles.loadPublicKey(path: "\(dir)/\(kid).pub")
        #expect(loaded.kid == kid)
        #expect(loaded.text + "\n" == pub)

        writeFile("\(dir)/fingerprint.fk", "x")
        #expect(throws: VaultError.self) { try KeyFiles.generateFingerprintKey(path: "\(dir)/fingerprint.fk") }
    }

    @Test func keyFilesAreCreatedExclusively() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        writeFile("\(dir)/taken.key", "precious\n")
        let e = #expect(throws: VaultError.self) {
            try Array("x".utf8).withUnsafeBytes { b in Result { () throws(VaultError) in try KeyFileIO.createExclusive(path: "\(dir)/taken.key", mode: 0o600, bytes: b) } }.get()
        }
        #expect(e?.code == .keyFileExists)
        #expect(readFile("\(dir)/taken.key") == "precious\n")
    }

    @Test func keygenRefusesToOverwriteAnExistingFingerprintKey() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        try KeyFiles.generateFingerprintKey(path: "\(dir)/fingerprint.fk")
        #expect(fileMode("\(dir)/fingerprint.fk") == 0o600)
        let error = #expect(throws: VaultError.self) { try KeyFiles.generateFingerprintKey(path: "\(dir)/fingerprint.fk") }
        #expect(error?.code == .keyFileExists)
    }

    @Test func loadingChecksKindLengthAndPermissions() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        let kid = try KeyFiles.generateKeyPair(directory: dir)
        // A secret key where a public key is expected: wrong kind, and the message names kinds only.
        let wrong = #expect(throws: VaultError.self) { try KeyFiles.loadPublicKey(path: "\(dir)/\(kid).key") }
        #expect(wrong?.code == .keyFileWrongKind)
        let secretLine = readFile("\(dir)/\(kid).key")
        let secretPart = String(secretLine.dropFirst(12).prefix(43))
        #expect(!(wrong?.message.contains(secretPart) ?? true))
        #expect(wrong?.message.contains("secret key") == true)

        // A public key where a fingerprint key is expected.
        chmod("\(dir)/\(kid).pub", 0o600)
        #expect((#expect(throws: VaultError.self) { try KeyFiles.loadFingerprintKey(path: "\(dir)/\(kid).pub") })?.code == .keyFileWrongKind)

        // Group/world-readable fingerprint key refused.
        try KeyFiles.generateFingerprintKey(path: "\(dir)/fingerprint.fk")
        chmod("\(dir)/fingerprint.fk", 0o644)
        let perms = #expect(throws: VaultError.self) { try KeyFiles.loadFingerprintKey(path: "\(dir)/fingerprint.fk") }
        #expect(perms?.code == .keyFilePermissions)
        #expect(perms?.message.contains("0644") == true)
        chmod("\(dir)/fingerprint.fk", 0o600)
        _ = try KeyFiles.loadFingerprintKey(path: "\(dir)/fingerprint.fk")

        let cases: [(String, VaultError.Code)] = [
            ("vault:pk:v1:AAAA\n", .keyFileMalformed),                                          // 3 bytes
            ("vault:pk:v1:" + String(repeating: "A", count: 43) + "\n", .keyFileMalformed),     // bad padding
            ("vault:pk:v1:" + String(repeating: "A", count: 43) + "=\nmore\n", .keyFileMalformed),
            ("vault:pk:v2:" + String(repeating: "A", count: 43) + "=\n", .keyFileMalformed),
            ("hello\n", .keyFileMalformed),
            ("", .keyFileMalformed),
        ]
        for (text, code) in cases {
            writeFile("\(dir)/x.pub", text, mode: 0o644)
            let e = #expect(throws: VaultError.self, "\(text)") { try KeyFiles.loadPublicKey(path: "\(dir)/x.pub") }
            #expect(e?.code == code, "\(text)")
        }
        writeFile("\(dir)/ok.pub", "vault:pk:v1:" + String(repeating: "A", count: 43) + "=\n", mode: 0o644)
        #expect(try KeyFiles.loadPublicKey(path: "\(dir)/ok.pub").bytes == [UInt8](repeating: 0, count: 32))
        #expect((#expect(throws: VaultError.self) { try KeyFiles.loadPublicKey(path: "\(dir)/none.pub") })?.code == .keyFileNotFound)
    }

    @Test func publicKeyTextRoundTrip() throws {
        let key = try PublicKey(rawBytes: Array(0..<32))
        let again = try PublicKey(text: key.text)
        #expect(again == key)
        #expect(key.text == "vault:pk:v1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
        // kid = hex(BLAKE2b-256(pk)[0..<8]); checked against Python's hashlib in Tests/Interop too.
        #expect(key.kid.rawValue.count == 16)
        #expect(KeyID("0123456789abcdef") != nil)
        #expect(KeyID("0123456789ABCDEF") == nil)
        #expect(KeyID("0123456789abcde") == nil)
    }
}
