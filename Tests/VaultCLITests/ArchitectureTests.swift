import Foundation
import Testing

/// The trust boundary, checked on the source tree: only VaultCrypto touches C, only VaultOpen
/// asks for the opening SPI, and the modules meant for the sidecar and callers do not depend on
/// the opening module.
@Suite struct ArchitectureTests {
    func swiftFiles(under folder: String) -> [(String, String)] {
        let root = repositoryRoot.appendingPathComponent(folder)
        let e = FileManager.default.enumerator(atPath: root.path)
        var out: [(String, String)] = []
        while let p = e?.nextObject() as? String {
            guard p.hasSuffix(".swift") else { continue }
            out.append((folder + "/" + p, (try? String(contentsOfFile: root.appendingPathComponent(p).path, encoding: .utf8)) ?? ""))
        }
        return out
    }

    @Test func onlyVaultCryptoImportsCSodium() {
        let files = swiftFiles(under: "Sources")
        #expect(files.count > 10)
        for (path, text) in files where text.contains("import CSodium") {
            #expect(path.hasPrefix("Sources/VaultCrypto/"), "\(path) imports CSodium")
        }
    }

    @Test func onlyVaultOpenAsksForTheOpeningSPIAndOnlySecretKeyCallsSealOpen() {
        for (path, text) in swiftFiles(under: "Sources") {
            if text.split(separator: "\n").contains(where: { $0.hasPrefix("@_spi(Opening) import") }) {
                #expect(path.hasPrefix("Sources/VaultOpen/"), "\(path) imports the opening SPI")
            }
            if text.contains("crypto_box_seal_open(") {
                #expect(path == "Sources/VaultCrypto/SecretKey.swift", "\(path) calls crypto_box_seal_open")
            }
        }
    }

    @Test func clientModulesDoNotDependOnTheOpeningModule() throws {
        let manifest = try String(contentsOf: repositoryRoot.appendingPathComponent("Package.swift"), encoding: .utf8)
        for target in ["CardRules", "VaultCrypto", "VaultClient", "Tokenizer", "Sidecar", "SocketHTTP", "Money", "GatewayAPI"] {
            // Each target declaration runs from its `.target(` to the next declaration.
            let markers = [".target(", ".testTarget(", ".executableTarget(", ".systemLibrary("]
            var starts: [String.Index] = []
            for m in markers {
                var from = manifest.startIndex
                while let r = manifest.range(of: m, range: from..<manifest.endIndex) { starts.append(r.upperBound); from = r.upperBound }
            }
            starts.sort()
            let declarations = starts.enumerated().map { i, start in
                manifest[start..<(i + 1 < starts.count ? starts[i + 1] : manifest.endIndex)]
            }
            guard let declaration = declarations.first(where: {
                $0.drop(while: { $0 == " " || $0 == "\n" }).hasPrefix("name: \"\(target)\"")
            }) else {
                Issue.record("no target \(target)")
                continue
            }
            let code = declaration.split(separator: "\n").filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("//") }.joined()
            #expect(!code.contains("VaultOpen"), "\(target) depends on VaultOpen")
            #expect(!code.contains("\"Gateway\""), "\(target) depends on the gateway adapter")
        }
        for folder in ["Sources/VaultClient", "Sources/VaultCrypto", "Sources/Tokenizer", "Sources/Sidecar", "Sources/SocketHTTP", "Sources/Money", "Sources/GatewayAPI"] {
            for (path, text) in swiftFiles(under: folder) {
                #expect(!text.contains("import VaultOpen"), "\(path)")
                #expect(!text.split(separator: "\n").contains("import Gateway"), "\(path)")   // GatewayAPI is allowed
                #expect(!text.contains("@_spi(Opening)") || path.hasPrefix("Sources/VaultCrypto/"), "\(path)")
            }
        }
    }

    /// No tracked file outside Tests/ holds a secret or fingerprint key (dev keys, demo output).
    @Test func noKeyMaterialIsTracked() throws {
        let git = Process()
        git.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        git.arguments = ["git", "-C", repositoryRoot.path, "ls-files"]
        let out = Pipe()
        git.standardOutput = out
        try git.run()
        let names = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).split(separator: "\n")
        git.waitUntilExit()
        guard git.terminationStatus == 0 else { return }   // not a git checkout (a source tarball)
        #expect(!names.isEmpty)
        // Fuzz/corpus holds fuzz inputs grown from the fuzz target's fixed, public keys (32 bytes
        // of 0x07 and of 0x03, Fuzz/Sources/VaultFuzz), mutated: key-shaped, never key material.
        for name in names where !name.hasPrefix("Tests/") && !name.hasPrefix("Fuzz/corpus/") {
            #expect(!name.hasPrefix(".vault-dev/"), "\(name) is demo output")
            #expect(!name.hasSuffix(".key") && !name.hasSuffix(".fk"), "\(name) is a key file")
            let text = (try? String(contentsOfFile: repositoryRoot.appendingPathComponent(String(name)).path, encoding: .utf8)) ?? ""
            #expect(text.range(of: "vault:(sk|fk):v1:[A-Za-z0-9+/]{43}=", options: .regularExpression) == nil, "\(name) holds key material")
        }
    }

    @Test func noSecretKeyIsCommitted() throws {
        let keysDir = repositoryRoot.appendingPathComponent("Keys")
        for name in (try? FileManager.default.contentsOfDirectory(atPath: keysDir.path)) ?? [] {
            let text = (try? String(contentsOfFile: keysDir.appendingPathComponent(name).path, encoding: .utf8)) ?? ""
            #expect(text.range(of: "vault:sk:v1:[A-Za-z0-9+/]{43}=", options: .regularExpression) == nil, "\(name) holds a secret key")
        }
    }
}
