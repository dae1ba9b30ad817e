import ArgumentParser
import CardRules
import ServerCLI
import VaultCrypto
import VaultOpen

/// `vault open`: the inverse of `vault seal`, for operators in the gateway's zone.
struct Open: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Open sealed values (or card envelopes) with secret keys. Gateway zone only.",
        discussion: """
            Reads vault:v1:<kid>:<base64> and prints the plaintext exactly (no newline added). With \
            --lines, each line is opened separately and printed with a newline. With --card, reads card \
            envelopes v1 and prints each card as JSON {"number","exp_month","exp_year","cvc","name"}. \
            Give --key once per secret key; the kid picks the key.

            Errors: KEY_MISMATCH (exit 3) when sealed to a key not given; SEALED_VALUE_CORRUPT or \
            ENVELOPE_*_CORRUPT (exit 4) when tampered or truncated; SEALED_VALUE_MALFORMED or \
            ENVELOPE_MALFORMED (exit 5) when not of the format.

            Examples:
              vault open --key Keys/0123456789abcdef.key < sealed.txt
              vault open --lines --key old.key --key new.key < sealed-lines.txt
              vault open --card --key Keys/0123456789abcdef.key < envelope.json
              vault open --key gateway-keys/0123456789abcdef.key \\
                --passphrase-file pass.txt < sealed.txt
            """
    )

    @Option(help: "A secret key file (<kid>.key, mode 0600). Repeat for several.", completion: .file())
    var key: [String]

    @Option(help: "The passphrase of protected secret keys (vault:skp:v1:), in this file (first line; mode 0600).", completion: .file())
    var passphraseFile: String?

    @Flag(help: "Open each line of input separately.")
    var lines = false

    @Flag(help: "Read card envelopes v1 and print cards as JSON.")
    var card = false

    @Option(help: "With --card: also check the fingerprint with this fingerprint key.", completion: .file())
    var fingerprintKey: String?

    @Option(help: "Worker threads for --lines (default: online cores).")
    var jobs: Int?

    func validate() throws {
        guard !key.isEmpty else { throw ValidationError("give at least one --key FILE.key") }
    }

    func run() throws {
        ProcessHardening.disableCoreDumps()
        var ring = KeyRing()
        var fpKey: FingerprintKey?
        try reportingErrors { () throws(VaultError) in
            let passphrase = try passphraseFile.map { (f) throws(VaultError) in try ProtectedKey.readPassphrase(path: f) }
            ring = try KeyRing(paths: key, passphrase: passphrase)
            if let fingerprintKey { fpKey = try KeyFiles.loadFingerprintKey(path: fingerprintKey) }
        }
        let opener = EnvelopeOpener(ring: ring, fingerprintKey: fpKey)
        let transform: LinePipeline.Transform
        let maxOutput: @Sendable (Int) -> Int
        if card {
            transform = { (line, out) throws(VaultError) in
                let opened = try opener.open(CardEnvelope(json: line), checkFingerprint: true)
                return CardJSONWriter.write(opened.card, into: out)
            }
            maxOutput = { _ in CardJSONWriter.maxBytes }
        } else {
            transform = { [ring] (line, out) throws(VaultError) in
                let plain = try ring.open(line: line)
                return plain.withUnsafeBytes { p in
                    if !p.isEmpty { out.baseAddress!.copyMemory(from: p.baseAddress!, byteCount: p.count) }
                    return p.count
                }
            }
            maxOutput = { $0 }
        }
        if lines {
            var pipeline = LinePipeline(maxOutput: maxOutput, transform: transform)
            if let jobs { pipeline.workers = max(1, jobs) }
            try reportingErrors(pipeline)
        } else {
            try reportingErrors { () throws(VaultError) in
                let input = try StandardIO.readAll(limit: card ? CardEnvelope.maxJSONBytes : Seal.maxValueBytes * 2)
                let output = try input.withUnsafeBytes { (raw) throws(VaultError) -> SecureBytes in
                    let line = StandardIO.droppingTrailingNewline(raw)
                    return try SecureBytes(capacity: maxOutput(line.count) + 1) { (out) throws(VaultError) -> Int in
                        var n = try transform(line, out)
                        if card { out[n] = 10; n += 1 }
                        return n
                    }
                }
                try output.withUnsafeBytes { (b) throws(VaultError) in try StandardIO.write(b) }
            }
        }
    }
}
