// Sections 6 and 7: the sidecar's tokenize, pay and no-op routes under load from the benchmark
// package's own load generator (Sources/loadgen: C, epoll, one thread, HTTP/1.1 over the Unix
// socket). Keep-alive connections by default, as HTTP client libraries keep them; one connection
// per request as a second row. Tokenize is also reported against its modeled limit,
// 1 / (1/no-op + 1/(cores × C crypto_box_seal rate) + 1/(cores × C crypto_box_seal_open rate)):
// what it would do if the seal (sidecar) and, with a gateway, the open that fingerprints the card
// (DESIGN §4: the speed targets count that open) were its only costs beyond the server's own
// per-request cost. Without a gateway, the open term is left out.
import CBaseline
import Foundation
import VaultClient
import VaultCrypto

/// One load generator run.
struct Load {
    var rate: Double
    var p50: Double
    var p99: Double
    var requests: Int
}

/// Runs the load generator at `path` and reads its JSON line. Throws when it reports an error
/// (a failed connection, or an answer without the expected status or text).
func runLoad(_ path: String, socket: String, connections: Int, seconds: Double, method: String = "GET",
             urlPath: String = "/v1/health", body: String? = nil, bodies: String? = nil, expect: Int = 200,
             contains: String? = nil, close: Bool = false, scratch: String) throws -> Load {
    var arguments = ["--socket", socket, "--connections", String(connections), "--seconds", String(seconds),
                     "--method", method, "--path", urlPath, "--expect", String(expect)]
    if let body { arguments += ["--body", body] }
    if let bodies { arguments += ["--bodies", bodies] }
    if let contains { arguments += ["--contains", contains] }
    if close { arguments.append("--close") }
    let out = URL(fileURLWithPath: scratch + "/loadgen.json")
    _ = try runProcess(path, arguments, stdin: nil, stdout: out)
    let data = try Data(contentsOf: out)
    guard let json = try JSONSerialization.jsonObject(with: data) as? [String: Any],
          let rate = json["rate"] as? Double, let p50 = json["p50_ms"] as? Double, let p99 = json["p99_ms"] as? Double,
          let requests = json["requests"] as? Int
    else { throw NSError(domain: "bench: loadgen printed no figures", code: 1) }
    return Load(rate: rate, p50: p50, p99: p99, requests: requests)
}

/// One C core's `crypto_box_seal` rate (32-byte message: a data key), median of interleaved rounds.
@MainActor func cSealRatePerCore(_ pk: PublicKey) -> Double {
    compare([("c", { n in pk.bytes.withUnsafeBufferPointer { baseline_seal($0.baseAddress!, 32, Int32(n)) } })],
            iterations: iterations)["c"]!
}

/// One C core's `crypto_box_seal_open` rate (the gateway's open of a data key), median of interleaved rounds.
@MainActor func cOpenRatePerCore(_ pk: PublicKey, _ secret: SecureBytes) -> Double {
    compare([("c", { n in
        pk.bytes.withUnsafeBufferPointer { p in
            secret.withUnsafeBytes { s in baseline_seal_open(p.baseAddress!, s.baseAddress!.assumingMemoryBound(to: UInt8.self), 32, Int32(n)) }
        }
    })], iterations: iterations)["c"]!
}

/// The tokenize rate the seal (and, with a gateway, the open: `openRate`) alone would allow
/// beside the server's per-request cost, on `cores` cores.
func modeledLimit(noop: Double, cores: Int, sealRate: Double, openRate: Double?) -> Double {
    1 / (1 / noop + 1 / (Double(cores) * sealRate) + (openRate.map { 1 / (Double(cores) * $0) } ?? 0))
}

/// A figure of /proc/PID/status (VmHWM, RssAnon, RssFile…), in KiB.
func statusKiB(_ pid: Int32, _ name: String) -> Double {
    let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
    let row = status.split(separator: "\n").first { $0.hasPrefix(name + ":") }.map(String.init) ?? ""
    return Double(row.filter(\.isNumber)) ?? 0
}

/// The peak RSS of a process (VmHWM), in KiB.
func peakRSS(_ pid: Int32) -> Double { statusKiB(pid, "VmHWM") }

/// "now: anonymous A MiB, file-backed F MiB" (file-backed: the executable's pages in use).
func rssParts(_ pid: Int32) -> String {
    "now: anonymous \(fmt(statusKiB(pid, "RssAnon") / 1024, 1)) MiB, file-backed \(fmt(statusKiB(pid, "RssFile") / 1024, 1)) MiB"
}

/// A sidecar (and, with `withGateway`, a `vault gateway` holding the keys) in a scratch directory.
final class Servers {
    let dir: String
    let sidecar: Process
    let gateway: Process?
    var socket: String { dir + "/v.sock" }
    let client: SidecarClient

    init(vault: String, store: String, name: String, withGateway: Bool = true) throws {
        dir = NSTemporaryDirectory() + "vault-bench-\(name)-\(getpid())"
        for sub in ["keys", "gk"] { try FileManager.default.createDirectory(atPath: dir + "/" + sub, withIntermediateDirectories: true) }
        func vaultCommand(_ arguments: [String]) throws -> String {
            let c = Process()
            c.executableURL = URL(fileURLWithPath: vault)
            c.arguments = arguments
            let out = Pipe()
            c.standardOutput = out
            try c.run()
            c.waitUntilExit()
            return String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let kid = try vaultCommand(["keygen", "--out", dir + "/gk"])
        _ = try vaultCommand(["keygen", "--fingerprint", "--out", dir + "/gk"])
        try FileManager.default.copyItem(atPath: "\(dir)/gk/\(kid).pub", toPath: "\(dir)/keys/\(kid).pub")
        func start(_ arguments: [String]) throws -> Process {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: vault)
            p.arguments = arguments + ["--log-level", "error"]
            p.standardError = FileHandle.nullDevice
            try p.run()
            return p
        }
        if withGateway {
            gateway = try start(["gateway", "--socket", dir + "/g.sock", "--keys", dir + "/gk", "--processor", "sandbox:\(dir)/ledger.sqlite"])
            for _ in 0..<200 where !FileManager.default.fileExists(atPath: dir + "/g.sock") { usleep(50_000) }
        } else {
            gateway = nil
        }
        sidecar = try start(["serve", "--socket", dir + "/v.sock", "--keys", dir + "/keys",
                             "--store", store.replacingOccurrences(of: "DIR", with: dir), "--gateway", dir + "/g.sock"])
        client = SidecarClient(socketPath: dir + "/v.sock")
        for _ in 0..<200 where (try? client.health()) != true { usleep(50_000) }
    }

    func stop() {
        for p in [sidecar] + (gateway.map { [$0] } ?? []) { p.terminate(); p.waitUntilExit() }
        try? FileManager.default.removeItem(atPath: dir)
    }
}

let cardBody = #"{"number":"4242424242424242","exp_month":12,"exp_year":2030,"cvc":"123"}"#
/// `POST /v1/tokens` with a card to seal at the door.
let tokenizeBody = #"{"card":"# + cardBody + "}"
let loadSeconds = quick ? 1.5 : 4.0

// 6. Tokenize against the no-op route (GET /v1/health) of the same server in the same run, at
// concurrency 1, 8, 64, keep-alive and one connection per request; the modeled limit; the
// sidecar's peak RSS. With `withGateway`, every tokenize includes the gateway's fingerprint (one
// open per card, requests batched: a tokenize's cost in production, docs/threat-model.md).
@MainActor func sidecarLoad(vault: String, loadgen: String, store: String, label: String, sealRate: Double, openRate: Double, withGateway: Bool = true) throws {
    let servers = try Servers(vault: vault, store: store, name: "sidecar", withGateway: withGateway)
    defer { servers.stop() }
    let cores = ProcessInfo.processInfo.processorCount
    for c in [1, 8, 64] {
        for close in [false, true] {
            let noop = try runLoad(loadgen, socket: servers.socket, connections: c, seconds: loadSeconds, close: close, scratch: servers.dir)
            let tok = try runLoad(loadgen, socket: servers.socket, connections: c, seconds: loadSeconds, method: "POST", urlPath: "/v1/tokens",
                                  body: tokenizeBody, expect: 201, close: close, scratch: servers.dir)
            let limit = modeledLimit(noop: noop.rate, cores: cores, sealRate: sealRate, openRate: withGateway ? openRate : nil)
            let key = close ? "tokenize_close_\(label)_\(c)" : "tokenize_\(label)_\(c)"
            figures[key] = tok.rate
            figures[key + "_p99"] = tok.p99
            figures[key + "_limit"] = limit
            figures[(close ? "noop_close_" : "noop_") + "\(label)_\(c)"] = noop.rate
            let how = close ? "one connection per request" : "keep-alive"
            line("| tokenize (\(label)), c=\(c), \(how): p50 \(fmt(tok.p50, 2)) ms, p99 \(fmt(tok.p99, 2)) ms | \(fmt(tok.rate)) req/s | \(fmt(noop.rate)) (p99 \(fmt(noop.p99, 2)) ms) | \(fmt(tok.rate / noop.rate, 3)) | \(fmt(limit)) | \(fmt(tok.rate / limit, 2)) |")
        }
    }
    let rss = peakRSS(servers.sidecar.processIdentifier)
    figures["rss_kb_\(label)"] = rss
    line("| sidecar peak RSS (\(label)) after the load: \(fmt(rss / 1024, 1)) MiB (\(rssParts(servers.sidecar.processIdentifier))) | | | | | |")
}

// 7. Payments through sidecar → gateway → sandbox: payments/s and p50/p99 at c=1/8/64 on
// keep-alive connections (each payment uses a token made beforehand, outside the timing, and its
// own idempotency key), against the no-op route and the tokenize rate of the same run.
@MainActor func paymentsLoad(vault: String, loadgen: String, store: String, label: String) throws {
    let servers = try Servers(vault: vault, store: store, name: "pay")
    defer { servers.stop() }
    let client = servers.client
    let card = SecureBytes(Array(cardBody.utf8))
    for c in [1, 8, 64] {
        // Enough tokens for the run (the load generator stops early if they run out), made first.
        let count = Int(1500 * loadSeconds) + 500
        final class Tokens: @unchecked Sendable { var list: [String] = []; let lock = NSLock() }
        let tokens = Tokens()
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            var mine: [String] = []
            for _ in 0..<(count / 4) {
                if let t = (try? client.tokenize(cardJSON: card))?.json?["token"] as? String { mine.append(t) }
            }
            tokens.lock.withLock { tokens.list += mine }
        }
        let bodies = servers.dir + "/pay-\(c).txt"
        try tokens.list.map { #"{"token":"\#($0)","amount":1050,"currency":"EUR","idempotency_key":"bench-\#($0)"}"# }
            .joined(separator: "\n").write(toFile: bodies, atomically: true, encoding: .utf8)
        let noop = try runLoad(loadgen, socket: servers.socket, connections: c, seconds: loadSeconds, scratch: servers.dir)
        let pay = try runLoad(loadgen, socket: servers.socket, connections: c, seconds: loadSeconds, method: "POST", urlPath: "/v1/payments",
                              bodies: bodies, expect: 201, contains: #""status":"succeeded""#, scratch: servers.dir)
        figures["pay_\(label)_\(c)"] = pay.rate
        figures["pay_noop_\(label)_\(c)"] = noop.rate
        let tokenize = figures["tokenize_\(label)_\(c)"]
        line("| payment (\(label)), c=\(c), keep-alive: p50 \(fmt(pay.p50, 2)) ms, p99 \(fmt(pay.p99, 2)) ms | \(fmt(pay.rate)) payments/s | \(fmt(noop.rate)) | \(fmt(pay.rate / noop.rate, 3)) | \(tokenize.map { fmt(pay.rate / $0, 2) } ?? "") |")
    }
    for (name, p) in [("sidecar", servers.sidecar), ("gateway", servers.gateway!)] {
        let rss = peakRSS(p.processIdentifier)
        if name == "sidecar" { figures["rss_pay_kb_\(label)"] = rss }
        line("| \(name) peak RSS after the payment load (\(label)): \(fmt(rss / 1024, 1)) MiB (\(rssParts(p.processIdentifier))) | | | | |")
    }
}

@MainActor func serverSections(vault: String, loadgen: String, publicKey: PublicKey, secret: SecureBytes) throws {
    let pg = ProcessInfo.processInfo.environment["VAULT_BENCH_POSTGRES"]
    let sqlite = !args.contains("--no-sqlite")
    let sealRate = cSealRatePerCore(publicKey)
    let openRate = cOpenRatePerCore(publicKey, secret)
    let cores = ProcessInfo.processInfo.processorCount
    figures["c_seal_per_core"] = sealRate
    figures["c_open_per_core"] = openRate
    line("")
    line("## Tokenize and pay against the no-op route")
    line("")
    line("Sidecar over its Unix socket; load from the benchmark package's load generator (Benchmarks/Sources/loadgen: C, epoll, one thread, HTTP/1.1), on the same \(cores) cores as the servers. Keep-alive connections (as HTTP client libraries keep them) and, as a second row, one connection per request. A token is acknowledged after its commit is durable: SQLite WAL with synchronous=FULL and group commit, PostgreSQL with synchronous_commit=on over a Unix socket. Modeled limit = 1 / (1/no-op + 1/(\(cores) cores × C crypto_box_seal rate) + 1/(\(cores) cores × C crypto_box_seal_open rate)): the seal at the sidecar's door and the gateway's open that fingerprints the card (DESIGN §4); without a gateway the open term is left out. C crypto_box_seal in this run: \(fmt(sealRate))/s per core, crypto_box_seal_open \(fmt(openRate))/s per core.")
    line("")
    line("| operation | rate | no-op route rate | ÷ no-op | modeled limit | ÷ limit |")
    line("|---|---:|---:|---:|---:|---:|")
    if sqlite {
        try sidecarLoad(vault: vault, loadgen: loadgen, store: "sqlite:DIR/tokens.sqlite", label: "SQLite", sealRate: sealRate, openRate: openRate)
        // Without a gateway, tokens are stored awaiting their fingerprint: what that hop costs.
        if !quick {
            try sidecarLoad(vault: vault, loadgen: loadgen, store: "sqlite:DIR/tokens.sqlite", label: "SQLite, no gateway", sealRate: sealRate, openRate: openRate, withGateway: false)
        }
    }
    if let pg {
        try sidecarLoad(vault: vault, loadgen: loadgen, store: pg, label: "PostgreSQL", sealRate: sealRate, openRate: openRate)
    }
    guard !args.contains("--no-pay") else { return }
    line("")
    line("Payments over the same socket, keep-alive (each payment: the token's envelope sent to `vault gateway`, opened, checked and charged by the sandbox; the gateway's open cost alone is the 'envelope open + metadata check' row above):")
    line("")
    line("| operation | rate | no-op route rate | ÷ no-op | ÷ tokenize (same c, same run) |")
    line("|---|---:|---:|---:|---:|")
    if sqlite { try paymentsLoad(vault: vault, loadgen: loadgen, store: "sqlite:DIR/t.sqlite", label: "SQLite") }
    if let pg { try paymentsLoad(vault: vault, loadgen: loadgen, store: pg, label: "PostgreSQL") }
}
