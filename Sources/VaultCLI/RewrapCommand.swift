#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import Foundation
import Logging
import Rewrap
import ServerCLI
import Store
import Tokenizer
import VaultCrypto
import VaultOpen

/// `vault rewrap`: re-seal every stored envelope to the primary key (key rotation, step 3).
struct RewrapCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rewrap",
        abstract: "Re-seal every stored envelope (tokens, instruments) to the key ring's primary key.",
        discussion: """
            Needs the secret keys (run it in the gateway's zone: as root or the gateway's user). Works \
            in batches while the sidecar keeps serving; each batch is one durable transaction, and a \
            row the sidecar changed meanwhile is read again, never overwritten. Safe to kill and run \
            again: rows already sealed to the primary are skipped. Shows a progress bar on a terminal \
            (plain lines otherwise) and ends with counts; exit 0 only when nothing failed.

            With --fingerprints it recomputes stored card fingerprints instead (fingerprint-key \
            rotation, docs/key-files.md): every token and instrument whose fingerprint is not the \
            primary fingerprint key's (fingerprint.fk in --keys) gets it, the old one linked to it so \
            lookups by either still match. Resumable the same way: only rows not yet under the \
            primary are read.

            Examples:
              vault rewrap --store sqlite:/var/lib/vault-sidecar/vault.sqlite \\
                --keys /etc/vault/gateway-keys --ring /etc/vault/keys/ring.json
              vault rewrap --fingerprints \\
                --store sqlite:/var/lib/vault-sidecar/vault.sqlite \\
                --keys /etc/vault/gateway-keys --ring /etc/vault/keys/ring.json
              vault rewrap --store 'postgres://vault@db.internal/vault' \\
                --keys /etc/vault/gateway-keys --ring Keys/ring.json --batch 500
            """
    )
    @Option(help: "The store: sqlite:PATH or a postgres:// URL.")
    var store: String
    @Option(help: "Directory of secret keys (*.key): the old keys and the primary.", completion: .directory)
    var keys: String
    @Option(help: "The key ring file (ring.json); default KEYS/ring.json (optional with --fingerprints).", completion: .file())
    var ring: String?
    @Option(help: "Passphrase file for protected secret keys.", completion: .file())
    var passphraseFile: String?
    @Option(help: "Rows per batch (one transaction each).")
    var batch = 256
    @Option(help: "Threads for the crypto (default: the number of cores).")
    var jobs: Int?
    @Option(help: "At most this many rows per second, to spare a busy store (default: no limit).")
    var maxRate: Double?
    @Option(help: "Append the outcome to this audit log.", completion: .file())
    var auditLog: String?
    @Flag(help: "Recompute stored fingerprints under the primary fingerprint key (KEYS/fingerprint.fk) instead.")
    var fingerprints = false

    func run() async throws {
        var logger = Logger(label: "vault.rewrap")
        logger.logLevel = .notice
        do {
            let passphrase = try passphraseFile.map { (f) throws(VaultError) in try ProtectedKey.readPassphrase(path: f) }
            let names: [String]
            do { names = try FileManager.default.contentsOfDirectory(atPath: keys).sorted() } catch {
                throw VaultError(.keyFileNotFound, "cannot read the keys directory \(keys)", field: "--keys")
            }
            var keyRing = try KeyRing(paths: names.filter { $0.hasSuffix(".key") }.map { keys + "/" + $0 }, passphrase: passphrase)
            let ringPath = ring ?? keys + "/" + KeyRingFile.fileName
            if fingerprints {
                // Opening only: the ring pins what opens when there is one (as the gateway does).
                if ring != nil || FileManager.default.fileExists(atPath: ringPath) { try keyRing.pin(to: try KeyRingFile.load(path: ringPath)) }
                try await recomputeFingerprints(ring: keyRing, names: names, logger: logger)
                return
            }
            let description = try KeyRingFile.load(path: ringPath)
            try keyRing.pin(to: description)
            let display = ProgressDisplay(terminal: isatty(2) != 0)
            let batch = self.batch, jobs = self.jobs, pinned = keyRing, log = logger, maxRate = self.maxRate
            let counts = try await StoreTables.with(store, logger: logger) { tables in
                let rewrapper = try Rewrapper(
                    ring: pinned, tables: tables, batchSize: batch, workers: jobs ?? ProcessInfo.processInfo.activeProcessorCount, maxRate: maxRate, logger: log)
                return try await rewrapper.run { display.show($0) }
            }
            display.finish()
            let summary = "rewrapped \(counts.rewrapped), skipped \(counts.skipped), failed \(counts.failed) (primary \(description.primary))\n"
            try StandardIO.write(summary)
            CLIAudit.record(
                auditLog, action: "rewrap", kid: description.primary, outcome: counts.failed == 0 ? "ok" : ErrorCode.rewrapIncomplete.rawValue,
                detail: [("rewrapped", counts.rewrapped), ("skipped", counts.skipped), ("failed", counts.failed)])
            if counts.failed > 0 { throw ExitCode(1) }
        } catch let error as VaultError {
            throw fail(error)
        } catch let error as StoreError {
            throw fail(VaultError(store: error))
        }
    }
}

extension RewrapCommand {
    /// `--fingerprints`: the fingerprint keys of --keys, the recompute, its summary and audit line.
    func recomputeFingerprints(ring: KeyRing, names: [String], logger: Logger) async throws {
        guard let fk = try FingerprintKeys.load(directory: keys, names: names) else {
            throw VaultError(.fingerprintKeyMissing, "no \(KeyFiles.fingerprintKeyFileName) in \(keys): it is the primary fingerprint key", field: "--keys")
        }
        let display = ProgressDisplay(terminal: isatty(2) != 0, verb: "recomputed", command: "rewrap --fingerprints")
        let opener = EnvelopeOpener(ring: ring, fingerprintKeys: fk)
        let batch = self.batch, jobs = self.jobs ?? ProcessInfo.processInfo.activeProcessorCount, maxRate = self.maxRate
        let (counts, left) = try await StoreTables.withStore(store, logger: logger) { db in
            let recomputer = try FingerprintRecomputer(database: db, opener: opener, batchSize: batch, workers: jobs, maxRate: maxRate, logger: logger)
            let counts = try await recomputer.run { display.show($0) }
            return (counts, try await FingerprintRecomputer.remaining(in: db, primaryKid: fk.primary.kid))
        }
        display.finish()
        try StandardIO.write(
            "recomputed \(counts.rewrapped), changed meanwhile \(counts.skipped), failed \(counts.failed), left \(left) (fingerprint key \(fk.primary.kid))\n")
        CLIAudit.record(
            auditLog, action: "rewrap_fingerprints", kid: KeyID(fk.primary.kid), outcome: left == 0 ? "ok" : ErrorCode.rewrapIncomplete.rawValue,
            detail: [("recomputed", counts.rewrapped), ("skipped", counts.skipped), ("failed", counts.failed), ("left", left)])
        if left > 0 { throw ExitCode(1) }
    }
}

/// Progress on standard error: a bar redrawn in place on a terminal, a plain line every few
/// seconds otherwise. Rate and ETA are over the rows walked.
final class ProgressDisplay: @unchecked Sendable {
    let terminal: Bool
    /// What the first count is called, and the command named on plain lines.
    let verb: String, command: String
    private let lock = NSLock()
    private var lastDraw = ContinuousClock.now
    private var drewBar = false

    init(terminal: Bool, verb: String = "rewrapped", command: String = "rewrap") {
        self.terminal = terminal
        self.verb = verb
        self.command = command
    }

    func show(_ p: Rewrapper.Progress) {
        let c = p.counts
        show(table: p.table, done: p.done, total: p.total, elapsed: p.elapsed, counts: [(verb, c.rewrapped), ("skipped", c.skipped), ("failed", c.failed)])
    }

    /// Draws `done` of `total` (rate and ETA over the elapsed time) and the named counts.
    func show(table: String, done: Int, total: Int, elapsed: Duration, counts: [(String, Int)]) {
        lock.lock()
        defer { lock.unlock() }
        let now = ContinuousClock.now
        let every: Duration = terminal ? .milliseconds(100) : .seconds(2)
        guard now - lastDraw >= every || done == total else { return }
        lastDraw = now
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let rate = seconds > 0 ? Double(done) / seconds : 0
        let left = rate > 0 ? Double(max(0, total - done)) / rate : 0
        let fraction = total > 0 ? min(1, Double(done) / Double(total)) : 1
        let figures = "\(done)/\(total) \(Int(rate))/s ETA \(Int(left.rounded()))s  " + counts.map { "\($0.0) \($0.1)" }.joined(separator: " ")
        if terminal {
            let width = 30, filled = Int(fraction * Double(width))
            let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
            try? StandardIO.write(fd: 2, "\r\u{1B}[K\(table) [\(bar)] \(Int(fraction * 100))% \(figures)")
            drewBar = true
        } else {
            try? StandardIO.write(fd: 2, "\(command) \(table): \(figures)\n")
        }
    }

    func finish() {
        lock.lock()
        defer { lock.unlock() }
        if drewBar { try? StandardIO.write(fd: 2, "\n") }
    }
}
