import Foundation
import Testing

/// The trust boundary, checked on the package graph and the source tree: only VaultCrypto touches
/// C, only VaultOpen asks for the opening SPI, every module imports only what it declares, and no
/// module or executable outside the gateway's zone reaches the opening code, directly or through
/// another module. The graph is Package.swift as SwiftPM reads it (`swift package dump-package`),
/// followed transitively, so a dependency added anywhere on the way counts.
@Suite(.ownThread) struct ArchitectureTests {
    /// The modules that open envelopes.
    static let opening: Set<String> = ["VaultOpen", "Gateway", "Rewrap", "Portability"]
    /// The targets allowed to reach them: the gateway zone's CLI and its executable.
    static let gatewayZone: Set<String> = opening.union(["VaultCLI", "vault"])

    struct Target {
        let name: String
        let type: String
        /// This package's targets it depends on directly (by name or as a target).
        let dependencies: [String]
        let path: String
    }

    struct Graph {
        let targets: [String: Target]
        /// Executable products → their targets.
        let executables: [String: [String]]

        /// Every target of this package that `name` depends on, directly or not.
        func closure(_ name: String) -> Set<String> {
            var seen = Set<String>(), todo = [name]
            while let next = todo.popLast() {
                for d in targets[next]?.dependencies ?? [] where seen.insert(d).inserted { todo.append(d) }
            }
            return seen
        }

        /// The targets an executable product links.
        func linked(_ product: String) -> Set<String> {
            (executables[product] ?? []).reduce(into: Set<String>()) { $0.formUnion(closure($1).union([$1])) }
        }
    }

    /// Package.swift as SwiftPM reads it (its own scratch directory, so a build in progress does
    /// not hold it up).
    static let graph: Graph? = {
        let scratch = NSTemporaryDirectory() + "vault-dump-package-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["swift", "package", "--package-path", repositoryRoot.path, "--scratch-path", scratch, "dump-package"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return nil }
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0, let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let targets = root["targets"] as? [[String: Any]], let products = root["products"] as? [[String: Any]]
        else { return nil }
        var byName: [String: Target] = [:]
        for t in targets {
            guard let name = t["name"] as? String, let type = t["type"] as? String else { return nil }
            let deps = (t["dependencies"] as? [[String: Any]] ?? []).compactMap { d -> String? in
                ((d["byName"] ?? d["target"]) as? [Any])?.first as? String
            }
            let path = t["path"] as? String ?? (type == "test" ? "Tests/" : "Sources/") + name
            byName[name] = Target(name: name, type: type, dependencies: deps, path: path)
        }
        var executables: [String: [String]] = [:]
        for p in products where (p["type"] as? [String: Any])?.keys.contains("executable") == true {
            if let name = p["name"] as? String { executables[name] = p["targets"] as? [String] ?? [] }
        }
        // A dependency by name may be a product of another package: keep only this package's targets.
        let local = Set(byName.keys)
        for (name, t) in byName {
            byName[name] = Target(name: name, type: t.type, dependencies: t.dependencies.filter(local.contains), path: t.path)
        }
        return Graph(targets: byName, executables: executables)
    }()

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

    /// The modules a file imports (`import X`, `@testable import X`, `@_spi(S) import X`, `import struct X.Y`).
    func imports(_ text: String) -> Set<String> {
        var out = Set<String>()
        for line in text.split(separator: "\n") {
            var words = line.split(separator: " ").map(String.init).drop(while: { $0.hasPrefix("@") })
            guard words.first == "import" else { continue }
            words = words.dropFirst()
            if let kind = words.first, ["struct", "class", "enum", "protocol", "func", "var", "let", "typealias"].contains(kind) {
                words = words.dropFirst()
            }
            if let module = words.first?.split(separator: ".").first { out.insert(String(module)) }
        }
        return out
    }

    @Test func onlyVaultCryptoImportsCSodium() throws {
        let files = swiftFiles(under: "Sources")
        #expect(files.count > 10)
        for (path, text) in files where text.contains("import CSodium") {
            #expect(path.hasPrefix("Sources/VaultCrypto/"), "\(path) imports CSodium")
        }
        let graph = try #require(Self.graph, "swift package dump-package failed")
        for t in graph.targets.values where t.dependencies.contains("CSodium") {
            #expect(t.name == "VaultCrypto", "\(t.name) depends on CSodium")
        }
    }

    /// SQLite's C API is used in one file of the store layer (a server's own statements,
    /// `SQLiteStatements`, and its WAL checkpoints, `SQLiteCheckpointer`); everything else reaches
    /// SQLite through GRDB and `Database`.
    @Test func onlyTheStoresStatementRunnersImportSQLitesCAPI() {
        for (path, text) in swiftFiles(under: "Sources") where text.contains("import GRDBSQLite") {
            #expect(path == "Sources/Store/SQLiteStatements.swift", "\(path) imports GRDBSQLite")
        }
        for (path, text) in swiftFiles(under: "Sources") where text.contains("sqlite3_") && path != "Sources/Store/SQLiteStatements.swift" {
            let calls = text.split(separator: "\n").filter { $0.contains("sqlite3_") && !$0.trimmingCharacters(in: .whitespaces).hasPrefix("//") }
            #expect(calls.isEmpty, "\(path) calls SQLite's C API")
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

    /// Every folder of Sources/ is a target of the graph and every target has its folder, so no
    /// module escapes the checks below.
    @Test func theGraphCoversEveryModule() throws {
        let graph = try #require(Self.graph, "swift package dump-package failed")
        let folders = try FileManager.default.contentsOfDirectory(atPath: repositoryRoot.appendingPathComponent("Sources").path)
        let modules = Set(graph.targets.values.filter { $0.type != "test" }.map(\.name))
        #expect(Set(folders) == modules, "Sources/ and the package's targets differ")
        for t in graph.targets.values {
            var isDirectory: ObjCBool = false
            let exists = FileManager.default.fileExists(atPath: repositoryRoot.appendingPathComponent(t.path).path, isDirectory: &isDirectory)
            #expect(exists && isDirectory.boolValue, "\(t.name): no folder \(t.path)")
        }
        #expect(Set(graph.executables.keys) == ["vault", "vault-sidecar"], "executables: \(graph.executables.keys.sorted())")
        for m in ["CardRules", "VaultCrypto", "Money", "Store", "Tokenizer", "Payments", "Audit", "SocketHTTP", "GatewayAPI", "Sidecar", "ServerCLI", "Rewrap"] {
            #expect(modules.contains(m), "no module \(m)")
        }
    }

    /// The sidecar's executable links no code that opens envelopes: not VaultOpen, not the
    /// gateway adapter, not rewrap, by any path through the graph.
    @Test func theSidecarExecutableLinksNoOpeningCode() throws {
        let graph = try #require(Self.graph, "swift package dump-package failed")
        let linked = graph.linked("vault-sidecar")
        #expect(linked.contains("Sidecar") && linked.contains("ServerCLI"), "vault-sidecar links \(linked.sorted())")
        #expect(linked.isDisjoint(with: Self.opening), "vault-sidecar links \(linked.intersection(Self.opening).sorted())")
        #expect(!linked.contains("VaultCLI"))
    }

    /// Outside the gateway zone (the opening modules, the CLI and its executable), no module and
    /// no executable reaches an opening module, directly or transitively; nor does a test of such
    /// a module need one (tests of the boundary itself aside).
    @Test func onlyTheGatewayZoneReachesTheOpeningModules() throws {
        let graph = try #require(Self.graph, "swift package dump-package failed")
        #expect(graph.targets.count > 20)
        for t in graph.targets.values where t.type != "test" && !Self.gatewayZone.contains(t.name) {
            let reached = graph.closure(t.name).intersection(Self.opening)
            #expect(reached.isEmpty, "\(t.name) depends on \(reached.sorted())")
        }
        for (product, _) in graph.executables where product != "vault" {
            #expect(graph.linked(product).isDisjoint(with: Self.opening), "\(product) links opening code")
        }
        // VaultClient is what callers link: not even the store or the servers.
        #expect(graph.closure("VaultClient").isSubset(of: ["VaultCrypto", "CardRules", "CSodium"]), "\(graph.closure("VaultClient").sorted())")
    }

    /// Every module (and test target) imports only modules of this package that it declares as
    /// dependencies: nothing reaches another module by way of a third one's dependencies.
    @Test func everyImportOfOurModulesIsADeclaredDependency() throws {
        let graph = try #require(Self.graph, "swift package dump-package failed")
        let ours = Set(graph.targets.keys)
        var checked = 0
        for t in graph.targets.values where t.type != "system" {
            for (path, text) in swiftFiles(under: t.path) {
                for module in imports(text).intersection(ours) where module != t.name {
                    #expect(t.dependencies.contains(module), "\(path) imports \(module), which \(t.name) does not declare")
                    checked += 1
                }
            }
        }
        #expect(checked > 100)
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
