#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import Foundation
import Logging
import Portability
import ServerCLI
import Store
import VaultCrypto

/// `vault import`: cards from a legacy store or a processor's export become tokens (docs/portability.md).
struct ImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import cards (CSV or JSON lines, plain or sealed to our key) as tokens. Gateway zone.",
        discussion: """
            Reads INPUT through a column mapping (--map field=column: number, exp or exp_month and \
            exp_year, name, sealed, metadata.KEY), checks each card with the rules tokenize applies, \
            seals it to the key ring's primary, fingerprints it with the fingerprint key, and stores it \
            as a reusable token (until the end of the card's expiry month, or --ttl). A card already \
            stored as a reusable token, or met earlier in the file, is a duplicate: its line gets that \
            token. A row may instead hold one sealed value (vault:v1:<our kid>:<base64> of a card JSON \
            sealed to our public key), so no plaintext file is needed. Needs the secret keys and the \
            fingerprint key: run it in the gateway's zone.

            Resumable: each batch's tokens and its lines' outcomes commit together; run the same \
            command again after a kill and it continues after the last committed line. --out gets \
            line,token,outcome for every line (imported or duplicate); the rejects report (--rejects, \
            else standard error) gets each rejected line with its code and field, never its content. \
            Progress on standard error (a bar on a terminal). Exit 0 when no line was rejected, 1 \
            (IMPORT_ROWS_REJECTED) when some were.

            Examples:
              vault import cards.csv --out tokens.csv --rejects rejects.jsonl \\
                --store sqlite:/var/lib/vault-sidecar/vault.sqlite \\
                --keys /etc/vault/gateway-keys \\
                --map number=card_number --map exp=expiry
              vault import sealed.jsonl --format jsonl --map sealed=card \\
                --out tokens.csv --store 'postgres://vault@db/vault' \\
                --keys /etc/vault/gateway-keys
            """
    )

    @Argument(help: "The input file (CSV with a header row, or JSON lines).", completion: .file())
    var input: String
    @Option(help: "csv or jsonl (default: from the file name; .jsonl/.ndjson/.json are jsonl).")
    var format: String?
    @Option(help: "field=column, repeatable (fields: number, exp, exp_month, exp_year, name, sealed, metadata.KEY).")
    var map: [String] = []
    @Option(help: "A file of field=column lines (# comments), before any --map.", completion: .file())
    var mapFile: String?
    @Option(help: "The mapping output: line,token,outcome (CSV, mode 0600, rewritten complete on every run).", completion: .file())
    var out: String
    @Option(help: "The rejects report: JSON lines {line, code, field, message} (default: standard error).", completion: .file())
    var rejects: String?
    @Option(help: "The store: sqlite:PATH (made if missing) or a postgres:// URL.")
    var store: String
    @Option(help: "The gateway's keys directory: secret keys (*.key), ring.json, fingerprint.fk.", completion: .directory)
    var keys: String
    @Option(help: "The key ring file (default KEYS/ring.json when present).", completion: .file())
    var ring: String?
    @Option(help: "Passphrase file for protected secret keys.", completion: .file())
    var passphraseFile: String?
    @Option(help: "Token lifetime in seconds (default: until the end of the card's expiry month).")
    var ttl: Double?
    @Option(help: "Lines per batch (one transaction each; the next batch's crypto runs while one commits).")
    var batch = 2048
    @Option(help: "Threads for the crypto (default: the number of cores).")
    var jobs: Int?
    @Option(help: "At most this many lines per second, to spare a busy store (default: no limit).")
    var maxRate: Double?
    @Option(help: "Append the outcome to this audit log.", completion: .file())
    var auditLog: String?

    func run() async throws {
        ProcessHardening.disableCoreDumps()
        var logger = Logger(label: "vault.import")
        logger.logLevel = .notice
        do {
            let format = try resolvedFormat()
            let mapping = try ImportMapping(try mapFileItems() + map)
            let zone = try ZoneKeys(keys: keys, ring: ring, passphraseFile: passphraseFile)
            guard let fk = zone.fingerprintKeys else {
                throw VaultError(.fingerprintKeyMissing, "no \(KeyFiles.fingerprintKeyFileName) in \(keys): imported cards are fingerprinted to dedupe them", field: "--keys")
            }
            let data = try readInput()
            let importID = Importer.importID(input: data, format: format, mapping: mapping, key: fk.primary)
            let importer = Importer(
                ring: zone.ring, primary: zone.primary, fingerprintKeys: fk, batchSize: batch,
                workers: jobs ?? ProcessInfo.processInfo.activeProcessorCount, ttl: ttl, maxRate: maxRate)
            let display = ProgressDisplay(terminal: isatty(2) != 0, verb: "imported", command: "import")
            let (counts, journal) = try await withStore(logger: logger) { db in
                let counts = try await importer.run(input: data, format: format, mapping: mapping, importID: importID, db: db) { p in
                    display.show(table: "lines", done: p.done, total: p.total, elapsed: p.elapsed,
                                 counts: [("imported", p.counts.imported), ("duplicates", p.counts.duplicates), ("rejected", p.counts.rejected)])
                }
                return (counts, try await ImportLines.rows(importID: importID, in: db))
            }
            display.finish()
            try writeReports(journal)
            try StandardIO.write(
                "imported \(counts.imported), duplicates \(counts.duplicates), rejected \(counts.rejected), lines \(counts.done) (import \(importID), primary \(zone.primary.kid))\n")
            CLIAudit.record(
                auditLog, action: "import", kid: zone.primary.kid, outcome: counts.rejected == 0 ? "ok" : ErrorCode.importRowsRejected.rawValue,
                detail: [("imported", counts.imported), ("duplicates", counts.duplicates), ("rejected", counts.rejected)])
            if counts.rejected > 0 { throw fail(VaultError(.importRowsRejected, "\(counts.rejected) lines rejected: see the rejects report")) }
        } catch let error as VaultError {
            throw fail(error)
        } catch let error as StoreError {
            throw fail(VaultError(store: error))
        }
    }

    func resolvedFormat() throws(VaultError) -> ImportFormat {
        if let format {
            guard let f = ImportFormat(rawValue: format) else { throw VaultError(.importMappingInvalid, "--format is csv or jsonl", field: "--format") }
            return f
        }
        let lower = input.lowercased()
        return [".jsonl", ".ndjson", ".json"].contains { lower.hasSuffix($0) } ? .jsonl : .csv
    }

    func mapFileItems() throws(VaultError) -> [String] {
        guard let mapFile else { return [] }
        guard let text = try? String(contentsOfFile: mapFile, encoding: .utf8) else {
            throw VaultError(.importMappingInvalid, "cannot read the mapping file \(mapFile)", field: "--map-file")
        }
        return text.split(whereSeparator: \.isNewline).map(String.init).filter {
            let t = $0.trimmingCharacters(in: .whitespaces)
            return !t.isEmpty && !t.hasPrefix("#")
        }
    }

    /// The whole input in wiped memory (a plain file holds card numbers).
    func readInput() throws(VaultError) -> SecureBytes {
        let fd = open(input, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw VaultError(.ioError, "cannot read \(input)", field: "INPUT") }
        defer { close(fd) }
        return try StandardIO.readAll(fd: fd, limit: 1 << 31)
    }

    /// The store, a SQLite file made (and migrated) if it does not exist yet: an import may be a new vault's first data.
    func withStore<T: Sendable>(logger: Logger, _ body: (Database) async throws -> T) async throws -> T {
        do {
            return try await StoreLocation(store).withDatabase(logger: logger, body)
        } catch let error as StoreError {
            throw VaultError(store: error)
        }
    }

    /// The mapping file (every line imported or duplicate) and the rejects report, from the journal.
    func writeReports(_ journal: [ImportLines.Row]) throws(VaultError) {
        let mapping = try OutputFile(out, refuseExisting: false)
        var text = "line,token,outcome\n"
        for row in journal where row.outcome != "rejected" {
            text += "\(row.line),\(row.token ?? ""),\(row.outcome)\n"
            if text.utf8.count > 1 << 16 { try mapping.write(text); text = "" }
        }
        try mapping.write(text)
        try mapping.commit()
        let rejected = journal.filter { $0.outcome == "rejected" }
        if let rejects {
            let file = try OutputFile(rejects, refuseExisting: false)
            var lines = ""
            for row in rejected { lines += Self.rejectJSON(row) + "\n" }
            try file.write(lines)
            try file.commit()
        } else {
            for row in rejected.prefix(1000) {
                try? StandardIO.write(fd: 2, "vault import: line \(row.line): \(row.code ?? "?")\(row.field.map { " (\($0))" } ?? "")\n")
            }
        }
    }

    /// A reject: the line, the code, the field and the code's meaning (never the line's content).
    static func rejectJSON(_ row: ImportLines.Row) -> String {
        var out = "{\"line\":\(row.line),\"code\":"
        JSONText.appendString(row.code ?? "", to: &out)
        if let field = row.field { out += ",\"field\":"; JSONText.appendString(field, to: &out) }
        out += ",\"message\":"
        JSONText.appendString(row.code.flatMap(ErrorCode.init(rawValue:))?.meaning ?? "", to: &out)
        return out + "}"
    }
}
