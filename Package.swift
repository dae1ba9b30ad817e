// swift-tools-version:6.0
// The sealed card vault. One folder per concern; see README.md ("Layout") and docs/.
// Linux only (glibc: SO_PEERCRED, prctl, Glibc imports), hence no `platforms`: README "Requirements".
import PackageDescription
#if canImport(Glibc)
import Glibc
#endif

// How the two executables are linked (docs/benchmarks.md, "Memory"): with the toolchain's lld and
// no symbol table exported for dlopen'ed code (the static Swift runtime's link arguments ask for
// -export-dynamic; nothing here looks its own symbols up: the static runtime's own are hidden by
// its --exclude-libs ALL anyway, so `SocketServer.runTasksOnEventLoops` takes the one it needs at
// link time), and, where the C library of the
// building machine loads them (glibc 2.36: Debian 12, Ubuntu 24.04), relative relocations packed
// (DT_RELR). Each process maps about 7 MiB less: the 3.4 MiB of .rela.dyn that ld.so reads at
// start, and 55,000 exported symbols' .dynsym/.dynstr/.gnu.hash. A binary built with DT_RELR
// needs glibc 2.36 where it runs: build on the distribution you run (deploy/README.md); the check
// reads the glibc of the machine that builds, so a cross-compiling build decides by the host's.
// Without exported symbols the Swift runtime's fallback crash trace (dladdr) names no frame of
// our own code; the symbol table (.symtab) is kept for debuggers and `swift demangle`.
let packedRelocations: Bool = {
    #if canImport(Glibc)
    var buffer = [CChar](repeating: 0, count: 64)
    guard confstr(Int32(_CS_GNU_LIBC_VERSION), &buffer, buffer.count) > 0 else { return false }
    let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    let version = text.split(separator: " ").last?.split(separator: ".").compactMap { Int($0) } ?? []
    return version.count >= 2 && (version[0], version[1]) >= (2, 36)
    #else
    return false
    #endif
}()
let lean: [LinkerSetting] = [
    .unsafeFlags(
        ["-use-ld=lld", "-Xlinker", "--no-export-dynamic"] + (packedRelocations ? ["-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"] : []),
        .when(platforms: [.linux])),
]

let package = Package(
    name: "vault",
    products: [
        .executable(name: "vault", targets: ["vault"]),
        // The sidecar on its own: what `vault serve` runs. Links no opening code (ArchitectureTests).
        .executable(name: "vault-sidecar", targets: ["vault-sidecar"]),
        // What a non-PCI Swift caller links: card rules, validation and sealing with a public key.
        .library(name: "VaultClient", targets: ["VaultClient"]),
        .library(name: "VaultCrypto", targets: ["VaultCrypto"]),
        .library(name: "CardRules", targets: ["CardRules"]),
        // The opening side: linked only by the gateway adapter and operator tools in its zone.
        .library(name: "VaultOpen", targets: ["VaultOpen"]),
        // For the fuzz package (Fuzz/) only: the gateway's parsers (3DS JWTs, relay templates)
        // and the audit log's verifier. Not an API for callers.
        .library(name: "Gateway", targets: ["Gateway"]),
        .library(name: "Audit", targets: ["Audit"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.0.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.25.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.6.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.6.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.1.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.21.0"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.0.0"),
        // Imported directly too (NIOCore, NIOPosix, HTTPTypes, Crypto), so named here; the
        // versions are those the packages above already resolve to.
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
    ],
    targets: [
        // libsodium through pkg-config; imported by VaultCrypto and nothing else.
        .systemLibrary(
            name: "CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev", "pkg-config"])]
        ),
        // Brand table, Luhn, lengths, CVC, expiry, formatting, masking, BIN tables. Pure, no I/O.
        .target(name: "CardRules"),
        // Sensitive bytes, key files, sealed values, card envelopes (sealing side).
        .target(name: "VaultCrypto", dependencies: ["CSodium", "CardRules"]),
        // Opening sealed values and card envelopes: needs a secret key. Never linked by the sidecar.
        .target(name: "VaultOpen", dependencies: ["VaultCrypto", "CardRules"]),
        // Currencies (ISO 4217) and amounts in minor units. Pure.
        .target(name: "Money"),
        // HTTP/JSON on a Unix socket: peer credentials, coded error answers, the socket file.
        // Shared by the sidecar and the gateway adapter; no card handling.
        .target(
            name: "SocketHTTP",
            dependencies: [
                "VaultCrypto", "CardRules", "Money", "Audit",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        // The store layer: one database type over SQLite and PostgreSQL, the versioned migrations
        // of every table, the store's one error type, where a store is (`StoreLocation`), and the
        // processor ledger. No card handling: rows hold envelopes (ciphertext) and metadata.
        .target(
            name: "Store",
            dependencies: [
                "VaultCrypto",
                .product(name: "GRDB", package: "GRDB.swift"),
                // SQLite's C API, for a server's own statements only (Sources/Store/SQLiteStatements.swift).
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Tokens, the token store protocol and its one implementation over the store layer.
        .target(name: "Tokenizer", dependencies: ["VaultCrypto", "CardRules", "Store"]),
        // Payments: records, idempotency, sessions, customers and mandates over the store layer.
        .target(name: "Payments", dependencies: ["VaultCrypto", "Money", "Tokenizer", "Store"]),
        // The gateway adapter's wire format: its request and answer types and their JSON, shared
        // by the gateway's routes and the sidecar's client. No HTTP, no opening.
        .target(name: "GatewayAPI", dependencies: ["VaultCrypto", "Money"]),
        // The events outbox (written by the store's triggers), its listing, and webhook delivery:
        // signed, in order per object, retried, one deliverer per store. No card data.
        .target(
            name: "Events",
            dependencies: [
                "Store", "VaultCrypto",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        // The sidecar: Hummingbird on a Unix socket. Never depends on VaultOpen.
        .target(
            name: "Sidecar",
            dependencies: [
                "Tokenizer", "Payments", "VaultCrypto", "CardRules", "SocketHTTP", "Money", "Store", "Audit", "GatewayAPI", "Events",
                "VaultClient",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            resources: [.copy("Resources/openapi.json")]
        ),
        // The gateway adapter: the only module that opens envelopes in a server; processors, and
        // their ledger in the vault's store (Store), settled in the background.
        .target(
            name: "Gateway",
            dependencies: [
                "VaultOpen", "VaultCrypto", "CardRules", "SocketHTTP", "Money", "Store", "Audit", "GatewayAPI",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Key rotation's store side: re-seal stored envelopes to the primary key. Opens envelopes,
        // so only the CLI (run in the gateway's zone) links it; the sidecar never does.
        .target(
            name: "Rewrap",
            dependencies: ["VaultOpen", "VaultCrypto", "Tokenizer", "Store", .product(name: "Logging", package: "swift-log")]
        ),
        // Portability (`vault import`, `vault export`, docs/portability.md): cards in from a legacy
        // store or a processor's file, cards out sealed to a recipient. Opens sealed input and
        // envelopes, so only the CLI (gateway zone) links it; the sidecar never does.
        .target(name: "Portability", dependencies: ["VaultOpen", "VaultCrypto", "CardRules", "Tokenizer", "Store", "Rewrap"]),
        // Tamper-evident audit log (hash-chained JSON lines, docs/audit-log.md) and its verifier.
        .target(name: "Audit", dependencies: ["VaultCrypto"]),
        // The library for non-PCI callers: validate, card input component, seal.
        .target(name: "VaultClient", dependencies: ["VaultCrypto", "CardRules"]),
        // The servers' command line without the opening side: each setting defined once (flag,
        // environment variable, vault.json key, default, help), the option groups of `serve` and
        // `gateway`, vault.json, exit codes, and the sidecar's command. Never depends on VaultOpen,
        // Gateway or Rewrap.
        .target(
            name: "ServerCLI",
            dependencies: [
                "Sidecar", "SocketHTTP", "Store", "Tokenizer", "VaultCrypto", "Events",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The sidecar's executable (`vault serve` execs it, so a running sidecar never maps the
        // opening code that `vault` links).
        .executableTarget(name: "vault-sidecar", dependencies: ["ServerCLI"], linkerSettings: lean),
        // The `vault` subcommands (argument-parser); the executable only calls into this.
        .target(
            name: "VaultCLI",
            dependencies: [
                "ServerCLI",
                "VaultCrypto", "VaultOpen", "VaultClient", "CardRules", "Sidecar", "Gateway", "SocketHTTP", "Payments", "Rewrap",
                "Portability", "Tokenizer", "Audit", "Store",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(name: "vault", dependencies: ["VaultCLI"], linkerSettings: lean),

        .testTarget(name: "CardRulesTests", dependencies: ["CardRules"]),
        .testTarget(name: "VaultCryptoTests", dependencies: ["VaultCrypto", "CardRules"]),
        .testTarget(name: "VaultOpenTests", dependencies: ["VaultOpen", "VaultCrypto", "CardRules"]),
        .testTarget(
            name: "TokenizerTests",
            dependencies: [
                "Tokenizer", "Payments", "VaultCrypto", "VaultOpen", "CardRules", "Store", "Events", "Rewrap",
                .product(name: "PostgresNIO", package: "postgres-nio"), .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "SidecarTests",
            dependencies: [
                "Sidecar", "Tokenizer", "VaultCrypto", "CardRules", "SocketHTTP", "Payments", "Store", "Audit", "Events",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "PostgresNIO", package: "postgres-nio"), .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "GatewayTests",
            dependencies: [
                "Gateway", "GatewayAPI", "SocketHTTP", "Money", "VaultOpen", "VaultCrypto", "CardRules", "Store", "Audit",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "StoreTests",
            dependencies: ["Store", .product(name: "PostgresNIO", package: "postgres-nio"), .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(name: "AuditTests", dependencies: ["Audit", "VaultCrypto"]),
        .testTarget(name: "VaultClientTests", dependencies: ["VaultClient", "VaultCrypto", "VaultOpen", "CardRules"]),
        // End to end: runs the real `vault` binary and PyNaCl (Tests/Interop).
        .testTarget(name: "VaultCLITests", dependencies: ["VaultCrypto", "CardRules", "VaultClient"]),
    ],
    swiftLanguageModes: [.v6]
)
