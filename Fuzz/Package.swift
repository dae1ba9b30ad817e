// swift-tools-version:6.1
// Coverage-guided fuzz targets (libFuzzer) for every parser the vault has: key files, sealed
// values, card envelopes, card JSON, card numbers and expiry, BIN tables, 3DS JWTs, relay
// templates and processor answers, audit logs. Its own package, so `swift test` at the root never
// builds it. Build and run with scripts/fuzz (it passes `-Xswiftc -sanitize=fuzzer,address`: one
// flag, because swiftc keeps only the last of several `-sanitize=`).
import PackageDescription

let package = Package(
    name: "VaultFuzz",
    dependencies: [
        .package(name: "vault", path: ".."),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.1.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.65.0"),
    ],
    targets: [
        // One binary; VAULT_FUZZ_TARGET picks the target (scripts/fuzz sets it).
        .executableTarget(
            name: "VaultFuzz",
            dependencies: [
                .product(name: "VaultCrypto", package: "vault"),
                .product(name: "VaultOpen", package: "vault"),
                .product(name: "CardRules", package: "vault"),
                .product(name: "Gateway", package: "vault"),
                .product(name: "Audit", package: "vault"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            // No `main` of its own: libFuzzer's runs the target.
            swiftSettings: [.unsafeFlags(["-parse-as-library"])]
        ),
    ],
    swiftLanguageModes: [.v6]
)
