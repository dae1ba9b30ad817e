#if canImport(Glibc)
import Glibc
#endif
import Audit
import ArgumentParser
import Foundation
import Logging
import Portability
import ServerCLI
import Store
import Tokenizer
import VaultCrypto
import VaultOpen

/// `vault export`: stored cards sealed to a recipient's public key, one JSON line each (docs/portability.md).
struct ExportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Export stored cards sealed to a recipient's public key, one JSON line each. Gateway zone.",
        discussion: """
            Opens each selected card's envelope (the secret keys: run it in the gateway's zone) and \
            writes one JSON line: the token (or the stored instrument and its customer), brand, bin, \
            last4, length, expiry, fingerprint, metadata, and "sealed":"vault:v1:<recipient kid>:<base64>", \
            the crypto_box_seal of the card JSON {"number","exp_month","exp_year"[,"name"]} to the \
            recipient's key: the receiver opens each with one crypto_box_seal_open (PyNaCl \
            SealedBox(private_key).decrypt). Never a CVC. Select with --token, --customer (its stored \
            instruments), --ids FILE (tok_… and cus_… lines) or --all; anything unknown stops the export \
            before a line is written. --out is created 0600 and never overwritten (default: standard \
            output). Progress on standard error; with --audit-log one line per card exported and one \
            for the export.

            Examples:
              vault export --recipient new-vault.pub --all --out cards.jsonl \\
                --store sqlite:/var/lib/vault-sidecar/vault.sqlite \\
                --keys /etc/vault/gateway-keys --audit-log /var/log/vault/audit.log
              vault export --recipient processor.pub --customer cus_0123 \\
                --token tok_abcdefghijklmnopqrstuvwxyz --out cards.jsonl \\
                --store 'postgres://vault@db/vault' --keys /etc/vault/gateway-keys
            """
    )

    @Option(help: "The recipient's public key file (vault:pk:v1:…).", completion: .file())
    var recipient: String
    @Option(help: "A token to export (repeatable).")
    var token: [String] = []
    @Option(help: "A customer whose stored instruments to export (repeatable).")
    var customer: [String] = []
    @Option(help: "A file of ids, one a line: tok_… (or card-shaped tokens) and cus_….", completion: .file())
    var ids: String?
    @Flag(help: "Every live token and every stored instrument.")
    var all = false
    @Option(help: "The output file (created 0600, never overwritten; default: standard output).", completion: .file())
    var out: String?
    @Option(help: "The store: sqlite:PATH or a postgres:// URL.")
    var store: String
    @Option(help: "The gateway's keys directory: the secret keys (*.key) and ring.json.", completion: .directory)
    var keys: String
    @Option(help: "The key ring file (default KEYS/ring.json when present).", completion: .file())
    var ring: String?
    @Option(help: "Passphrase file for protected secret keys.", completion: .file())
    var passphraseFile: String?
    @Option(help: "Cards per batch.")
    var batch = 512
    @Option(help: "Threads for the crypto (default: the number of cores).")
    var jobs: Int?
    @Option(help: "Append one line per card exported, and one for the export, to this audit log.", completion: .file())
    var auditLog: String?

    func validate() throws {
        guard all || !token.isEmpty || !customer.isEmpty || ids != nil else {
            throw ValidationError("select what to export: --token, --customer, --ids FILE or --all")
        }
    }

    func run() async throws {
        ProcessHardening.disableCoreDumps()
        var logger = Logger(label: "vault.export")
        logger.logLevel = .notice
        var output: OutputFile?
        do {
            let recipientKey = try KeyFiles.loadPublicKey(path: recipient)
            let zone = try ZoneKeys(keys: keys, ring: ring, passphraseFile: passphraseFile)
            var tokens = token, customers = customer
            if let i = tokens.firstIndex(where: { !Self.isTokenName($0) }) {
                throw VaultError(.tokenNotFound, "--token \(i + 1) of those given is not a token", field: "--token")
            }
            if let ids { try Self.readIDs(ids, tokens: &tokens, customers: &customers) }
            let audit = try auditLog.map { (path) throws(VaultError) in
                do throws(AuditError) { return try AuditLog(path: path, process: "cli", syncInterval: .seconds(1)) } catch {
                    throw VaultError(.auditLogUnavailable, "audit log \(path): \(error)", field: "--audit-log")
                }
            }
            defer { audit?.close() }
            let file = try out.map { (path) throws(VaultError) in try OutputFile(path, refuseExisting: true) }
            output = file
            let exporter = Exporter(opener: EnvelopeOpener(ring: zone.ring), recipient: recipientKey, workers: jobs ?? ProcessInfo.processInfo.activeProcessorCount)
            let display = ProgressDisplay(terminal: isatty(2) != 0, verb: "exported", command: "export")
            let batch = max(1, self.batch), all = self.all
            let exported = try await StoreTables.withStore(store, logger: logger) { db in
                let items = try await Exporter.select(tokens: tokens, customers: customers, all: all, in: db, now: Date())
                let clock = ContinuousClock(), start = clock.now
                var done = 0
                display.show(table: "cards", done: 0, total: items.count, elapsed: .zero, counts: [])
                for at in stride(from: 0, to: items.count, by: batch) {
                    let lines = try await exporter.export(Array(items[at..<min(items.count, at + batch)]), in: db)
                    let text = lines.map { $0.text + "\n" }.joined()
                    if let file { try file.write(text) } else { try StandardIO.write(text) }
                    for line in lines {
                        _ = audit?.record(AuditEvent(
                            action: "export_card", uid: getuid(), token: line.item.kind == .token ? line.item.id : nil, customer: line.customer,
                            kid: recipientKey.kid.rawValue, envelope: line.envelopeID))
                    }
                    done += lines.count
                    display.show(table: "cards", done: done, total: items.count, elapsed: clock.now - start, counts: [])
                }
                return done
            }
            display.finish()
            try file?.commit()
            output = nil
            _ = audit?.record(AuditEvent(action: "export", uid: getuid(), kid: recipientKey.kid.rawValue, detail: [("exported", exported)]))
            try StandardIO.write(fd: 2, "exported \(exported) (recipient \(recipientKey.kid))\n")
        } catch let error as VaultError {
            output?.discard()
            throw fail(error)
        } catch let error as StoreError {
            output?.discard()
            throw fail(VaultError(store: error))
        } catch {
            output?.discard()
            throw error
        }
    }

    /// What may name a token (as the sidecar's rule: a card number is never looked up as one).
    static func isTokenName(_ id: String) -> Bool {
        RandomID.isWellFormed(id, prefix: "tok_") || CardShapedToken.isAccepted(id, luhnValid: false)
    }

    /// `--ids`: tok_… and card-shaped tokens are tokens, cus_… customers; anything else (a card
    /// number among them) is refused without being echoed.
    static func readIDs(_ path: String, tokens: inout [String], customers: inout [String]) throws(VaultError) {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { throw VaultError(.ioError, "cannot read \(path)", field: "--ids") }
        for (n, raw) in text.split(whereSeparator: \.isNewline).enumerated() {
            let id = raw.trimmingCharacters(in: .whitespaces)
            if id.isEmpty || id.hasPrefix("#") { continue }
            if id.hasPrefix("cus_") {
                customers.append(id)
            } else if isTokenName(id) {
                tokens.append(id)
            } else {
                throw VaultError(.tokenNotFound, "line \(n + 1) of \(path) is neither a token nor a customer id", field: "--ids")
            }
        }
    }
}
