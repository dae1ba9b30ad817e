// swift-tools-version:6.1
// Benchmarks live in their own package so `swift test` at the root never builds them.
// Run with Benchmarks/run (release build; prints rates and ratios against plain C loops).
import PackageDescription

let package = Package(
    name: "VaultBenchmarks",
    dependencies: [
        .package(name: "vault", path: ".."),
    ],
    targets: [
        // Plain C loops over libsodium: the baseline every ratio is measured against.
        .target(
            name: "CBaseline",
            cSettings: [.unsafeFlags(["-O2"])],
            linkerSettings: [.linkedLibrary("sodium")]
        ),
        // The HTTP/1.1 load generator (Unix socket, keep-alive or one connection per request,
        // epoll, one thread): what measures the sidecar's tokenize, pay and no-op routes.
        .executableTarget(
            name: "loadgen",
            cSettings: [.unsafeFlags(["-O2"])]
        ),
        .executableTarget(
            name: "VaultBench",
            dependencies: [
                "CBaseline",
                .product(name: "VaultCrypto", package: "vault"),
                .product(name: "VaultOpen", package: "vault"),
                .product(name: "CardRules", package: "vault"),
                .product(name: "VaultClient", package: "vault"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
