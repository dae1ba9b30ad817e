#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import CardRules
import ServerCLI
import VaultCrypto

/// `vault validate`: card-number metadata as JSON; exit 0 when valid.
struct Validate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check a card number read on standard input and print its metadata as JSON.",
        discussion: """
            Prints {"brand","candidates","length","luhn","valid","bin","last4","cvc_length","bin_info","errors"}. \
            Spaces and dashes are ignored. Exit 0 when valid, 1 when not (or, with --partial, when no \
            further typing can make it valid). The number itself is never printed.

            Examples:
              echo 4242424242424242 | vault validate
              printf '2' | vault validate --partial
              echo 4000056655665556 | vault validate --bin-table bins.csv \\
                --accept visa,mastercard
            """
    )

    @Flag(help: "The number is being typed: report candidates, fail only on what typing cannot fix.")
    var partial = false

    @Option(help: "A BIN table CSV (start,end,brand,type,issuer,country) for issuer information.", completion: .file())
    var binTable: String?

    @Option(help: "Accept only these brands (comma separated).")
    var accept: String?

    func run() throws {
        var info: CardNumberInfo!
        try reportingErrors { () throws(VaultError) in
            var bins: BINTable?
            if let binTable {
                let csv = try readTextFile(binTable)
                do throws(CardRulesError) { bins = try BINTable(csv: csv) } catch { throw VaultError(cardRules: error, field: binTable) }
            }
            let validator = CardValidator(binTable: bins, acceptedBrands: try acceptedBrands(accept))
            let input = try StandardIO.readAll(limit: 4096)
            info = try input.withUnsafeBytes { (raw) throws(VaultError) -> CardNumberInfo in
                let line = StandardIO.droppingTrailingNewline(raw)
                do throws(CardRulesError) {
                    let digits = try SecureBytes(capacity: max(line.count, 19)) { (out) throws(CardRulesError) -> Int in
                        try PANNormalizer.normalize(line, into: out)
                    }
                    return digits.withUnsafeBytes { validator.validate(digits: $0, partial: partial) }
                } catch {
                    var failed = CardNumberInfo.empty
                    failed.errors = [error.code]
                    return failed
                }
            }
        }
        try reportingErrors { () throws(VaultError) in try StandardIO.write(info.json + "\n") }
        let ok = partial ? info.errors.isEmpty : info.valid
        if !ok { throw ExitCode(1) }
    }
}

/// Reads a small non-secret text file (BIN tables).
func readTextFile(_ path: String) throws(VaultError) -> String {
    #if canImport(Glibc)
    guard let f = fopen(path, "r") else {
        throw VaultError(.ioError, "cannot open \(path)", field: path)
    }
    defer { fclose(f) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = fread(&chunk, 1, chunk.count, f)
        if n == 0 { break }
        bytes += chunk[0..<n]
        if bytes.count > 64 << 20 { throw VaultError(.inputTooLarge, "\(path) is larger than 64 MiB", field: path) }
    }
    return String(decoding: bytes, as: UTF8.self)
    #else
    throw VaultError(.ioError, "unsupported platform")
    #endif
}
