import ArgumentParser
import CardRules
import ServerCLI
import VaultCrypto

/// `vault seal`: seal standard input to a public key (docs/sealed-value.md), or cards into
/// envelopes (docs/envelope-v1.md).
struct Seal: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Seal standard input to a public key.",
        discussion: """
            Prints vault:v1:<kid>:<base64 of crypto_box_seal(input)>. One trailing newline of the input \
            is dropped. With --lines, each input line is sealed separately (one output line per input \
            line, in order, streaming, on all cores). With --card, the input is a card as JSON \
            {"number","exp_month","exp_year","cvc","name"} and the output a card envelope v1, \
            without a fingerprint: only the gateway holds the fingerprint key, and it computes \
            each token's fingerprint when the envelope is tokenized.

            Examples:
              printf 'db-password' | vault seal --key Keys/0123456789abcdef.pub
              vault seal --lines --key Keys/0123456789abcdef.pub < pans.txt > sealed.txt
              echo '{"number":"4242424242424242","exp_month":12,"exp_year":30}' \\
                | vault seal --card --key Keys/0123456789abcdef.pub
            """
    )

    @Option(help: "The public key file (<kid>.pub) to seal to.", completion: .file())
    var key: String

    @Flag(help: "Seal each line of input separately.")
    var lines = false

    @Flag(help: "Read cards as JSON and print card envelopes v1.")
    var card = false

    /// Kept so that scripts written for earlier versions still run: envelopes never carry a
    /// fingerprint now, so this changes nothing.
    @Flag(help: .hidden)
    var noFingerprint = false

    @Option(help: "With --card: accept only these brands (comma separated, e.g. visa,mastercard).")
    var accept: String?

    @Option(help: "Worker threads for --lines (default: online cores).")
    var jobs: Int?

    /// Largest single value sealed (lines are limited separately).
    static let maxValueBytes = 64 << 20

    func run() throws {
        var publicKey: PublicKey!
        var cardContext: CardLineSealer?
        try reportingErrors { () throws(VaultError) in
            publicKey = try KeyFiles.loadPublicKey(path: key)
            if card {
                cardContext = CardLineSealer(
                    publicKey: publicKey,
                    validator: CardValidator(acceptedBrands: try acceptedBrands(accept)))
            }
        }
        let pk = publicKey!
        if let sealer = cardContext {
            if lines {
                var pipeline = LinePipeline(maxOutput: sealer.maxOutput, transform: sealer.seal)
                if let jobs { pipeline.workers = max(1, jobs) }
                try reportingErrors(pipeline)
            } else {
                try reportingErrors { () throws(VaultError) in
                    let input = try StandardIO.readAll(limit: CardEnvelope.maxJSONBytes)
                    let text = try input.withUnsafeBytes { (b) throws(VaultError) in try sealer.envelopeJSON(b) }
                    try StandardIO.write(text + "\n")
                }
            }
        } else if lines {
            var pipeline = LinePipeline(
                maxOutput: { pk.sealedTextLength(plaintextCount: $0) + 1 },
                transform: { (line, out) throws(VaultError) in pk.sealText(line, into: out) })
            pipeline.dropCarriageReturn = false
            if let jobs { pipeline.workers = max(1, jobs) }
            try reportingErrors(pipeline)
        } else {
            try reportingErrors { () throws(VaultError) in
                let input = try StandardIO.readAll(limit: Self.maxValueBytes)
                let sealed = input.withUnsafeBytes { pk.seal(StandardIO.droppingTrailingNewline($0, carriageReturn: false)) }
                try StandardIO.write(sealed.text + "\n")
            }
        }
    }
}

/// Seals card JSON lines into envelope JSON lines.
struct CardLineSealer: Sendable {
    let publicKey: PublicKey
    let validator: CardValidator

    func envelopeJSON(_ input: UnsafeRawBufferPointer) throws(VaultError) -> String {
        let card = try CardData.parseJSON(StandardIO.droppingTrailingNewline(input))
        return try CardEnvelope.seal(card, to: publicKey, validator: validator).json
    }

    var maxOutput: @Sendable (Int) -> Int { { 1024 + $0 * 2 } }

    var seal: LinePipeline.Transform {
        { [self] (line, out) throws(VaultError) in
            var json = try envelopeJSON(line)
            return json.withUTF8 { b in
                UnsafeMutableRawBufferPointer(rebasing: out[0..<b.count]).copyMemory(from: UnsafeRawBufferPointer(b))
                return b.count
            }
        }
    }
}

/// Parses `--accept visa,mastercard`.
func acceptedBrands(_ list: String?) throws(VaultError) -> Set<CardBrand>? {
    guard let list else { return nil }
    var brands: Set<CardBrand> = []
    for name in list.split(separator: ",").map({ String($0).lowercased() }) where !name.isEmpty {
        guard let brand = CardBrand.all.first(where: { $0.rawValue == name }) else {
            throw VaultError(.unknownCardBrand, "no card brand is called \(JSONReaderSafe.name(name)); brands: \(CardBrand.all.map(\.rawValue).joined(separator: ","))")
        }
        brands.insert(brand)
    }
    return brands
}

/// The directory part of a path ("." when there is none).
func directoryOf(_ path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return "." }
    return slash == path.startIndex ? "/" : String(path[..<slash])
}

/// Short, printable echo of a user-typed word (never card input).
enum JSONReaderSafe {
    static func name(_ s: String) -> String { JSONReader.printable(s) }
}
