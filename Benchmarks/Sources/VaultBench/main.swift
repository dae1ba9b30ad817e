// Rates of the vault's sealing and opening against plain C loops over libsodium, measured in the
// same run on the same machine, printed as ratios. Usage (Benchmarks/run does all of it):
//   VaultBench [--vault PATH/TO/vault] [--c-lines PATH/TO/seal_lines] [--python PATH]
//              [--pynacl-lines Benchmarks/pynacl/seal_lines.py] [--report SECTION.md] [--json FIGURES.json]
//              [--loadgen PATH/TO/loadgen] [--quick] [--sidecar-only] [--lines-only] [--no-sidecar] [--no-pay]
//   --lines-only: only the `vault seal --lines` and `--card --lines` rows against the C line sealer.
import CBaseline
import CardRules
import Foundation
@_spi(Opening) import VaultCrypto
@_spi(Opening) import VaultOpen
import VaultClient

let args = CommandLine.arguments
func option(_ name: String) -> String? {
    guard let i = args.firstIndex(of: name), i + 1 < args.count else { return nil }
    return args[i + 1]
}
let quick = args.contains("--quick")
/// Only the sidecar and payment load (sections 6 and 7); for re-measuring the servers alone.
let sidecarOnly = args.contains("--sidecar-only")
/// Only the line sealers (section 4), for re-measuring `vault seal --lines` and `--card --lines`.
let linesOnly = args.contains("--lines-only")
let rounds = quick ? 3 : 7
let iterations = quick ? 300 : 1500

func median(_ xs: [Double]) -> Double { let s = xs.sorted(); return s[s.count / 2] }
func now() -> UInt64 { baseline_now_ns() }

/// Runs each candidate `rounds` times, interleaved, and returns the median rate (ops/s) of each.
func compare(_ candidates: [(String, (Int) -> UInt64)], iterations: Int) -> [String: Double] {
    var rates: [String: [Double]] = [:]
    for (_, f) in candidates { _ = f(max(10, iterations / 10)) }   // warm up
    for _ in 0..<rounds {
        for (name, f) in candidates {
            let ns = f(iterations)
            rates[name, default: []].append(Double(iterations) / (Double(ns) / 1e9))
        }
    }
    return rates.mapValues(median)
}

func timed(_ n: Int, _ body: () -> Void) -> UInt64 {
    let t0 = now()
    for _ in 0..<n { body() }
    return now() - t0
}

var report: [String] = []
@MainActor func line(_ s: String) { print(s); report.append(s) }
/// Figures by name, written as JSON with --json (the chart and the targets table read it).
nonisolated(unsafe) var figures: [String: Double] = [:]
func fmt(_ x: Double, _ digits: Int = 0) -> String { String(format: "%.\(digits)f", x) }

let secretBytes = SecureBytes.random(count: 32)
let secret = try SecretKey(bytes: secretBytes)
let pk = secret.publicKey
var ring = KeyRing()
ring.add(secret)
let fingerprintKey = try FingerprintKey(secureBytes: SecureBytes.random(count: 32))
let pan = Array("4242424242424242".utf8)
let card = try CardData(
    number: SecureBytes(pan), expiry: CardExpiry(month: 12, year: 2030),
    cvc: SecureBytes(Array("123".utf8)), name: nil)
let metadata = try CardEnvelope.validate(card)

let cpu = ((try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? "")
    .split(separator: "\n").first { $0.hasPrefix("model name") }?.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "unknown CPU"
line("## Sealing and opening against raw C libsodium and PyNaCl")
line("")
line("\(ProcessInfo.processInfo.processorCount) cores, \(cpu), libsodium \(String(cString: sodium_version_string_shim())). Each row: \(rounds) interleaved rounds of \(iterations) operations, median rate; baselines are plain C loops over the same libsodium (Benchmarks/Sources/CBaseline, Benchmarks/c), run in the same process and the same run.")
line("")
line("| operation | ops/s | baseline (C) ops/s | ratio |")
line("|---|---:|---:|---:|")

// 1. Seal a 16-byte value.
if !sidecarOnly, !linesOnly {
    var out = [UInt8](repeating: 0, count: 256)
    let r = compare([
        ("c", { n in pk.bytes.withUnsafeBufferPointer { baseline_seal($0.baseAddress!, 16, Int32(n)) } }),
        ("swift", { n in pan.withUnsafeBytes { p in timed(n) { _ = pk.seal(p) } } }),
        ("text", { n in pan.withUnsafeBytes { p in out.withUnsafeMutableBytes { o in timed(n) { _ = pk.sealText(p, into: o) } } } }),
    ], iterations: iterations)
    line("| seal 16 B → SealedValue | \(fmt(r["swift"]!)) | \(fmt(r["c"]!)) | \(fmt(r["swift"]! / r["c"]!, 3)) |")
    figures["seal_ratio"] = r["swift"]! / r["c"]!
    line("| seal 16 B → text line (the --lines path) | \(fmt(r["text"]!)) | \(fmt(r["c"]!)) | \(fmt(r["text"]! / r["c"]!, 3)) |")
}

// 2. Card envelope seal (3 fields) vs one crypto_box_seal, and vs the same work in C.
if !sidecarOnly, !linesOnly {
    let r = compare([
        ("c-seal", { n in pk.bytes.withUnsafeBufferPointer { baseline_seal($0.baseAddress!, 32, Int32(n)) } }),
        ("c-envelope", { n in pk.bytes.withUnsafeBufferPointer { baseline_envelope($0.baseAddress!, 3, 16, Int32(n)) } }),
        ("envelope", { n in timed(n) { _ = CardEnvelope.seal(card, metadata: metadata, to: pk) } }),
        ("envelope+validate", { n in timed(n) { _ = try! CardEnvelope.seal(card, to: pk) } }),
        ("envelope+json", { n in timed(n) { _ = CardEnvelope.seal(card, metadata: metadata, to: pk).json } }),
    ], iterations: iterations)
    line("| envelope seal (pan, exp, cvc) | \(fmt(r["envelope"]!)) | \(fmt(r["c-seal"]!)) (crypto_box_seal) | \(fmt(r["envelope"]! / r["c-seal"]!, 3)) |")
    figures["envelope_seal_ratio"] = r["envelope"]! / r["c-seal"]!
    line("| envelope seal vs the same calls in C | \(fmt(r["envelope"]!)) | \(fmt(r["c-envelope"]!)) | \(fmt(r["envelope"]! / r["c-envelope"]!, 3)) |")
    line("| envelope seal + card rules | \(fmt(r["envelope+validate"]!)) | \(fmt(r["c-seal"]!)) (crypto_box_seal) | \(fmt(r["envelope+validate"]! / r["c-seal"]!, 3)) |")
    line("| envelope seal + JSON text | \(fmt(r["envelope+json"]!)) | \(fmt(r["c-seal"]!)) (crypto_box_seal) | \(fmt(r["envelope+json"]! / r["c-seal"]!, 3)) |")
}

// Building blocks, for reading the rows above.
if !sidecarOnly, !linesOnly {
    let v = CardValidator()
    let r = compare([
        ("securebytes", { n in timed(n) { _ = SecureBytes(capacity: 16) { _ in 16 } } }),
        ("validate", { n in card.number.withUnsafeBytes { d in timed(n) { _ = v.validate(digits: d) } } }),
        ("fingerprint", { n in card.number.withUnsafeBytes { d in timed(n) { _ = fingerprintKey.fingerprint(ofDigits: d) } } }),
    ], iterations: iterations * 10)
    line("| (building block) SecureBytes alloc + wipe + free | \(fmt(r["securebytes"]!)) | | |")
    line("| (building block) card-number validation | \(fmt(r["validate"]!)) | | |")
    line("| (building block) fingerprint (keyed BLAKE2b) | \(fmt(r["fingerprint"]!)) | | |")
}

// 3. Opening (gateway zone).
if !sidecarOnly, !linesOnly {
    let sealed = pan.withUnsafeBytes { pk.seal($0) }
    let envelope = CardEnvelope.seal(card, metadata: metadata, to: pk)
    let opener = EnvelopeOpener(ring: ring, fingerprintKey: fingerprintKey)
    let r = compare([
        ("c", { n in pk.bytes.withUnsafeBufferPointer { p in secretBytes.withUnsafeBytes { s in baseline_seal_open(p.baseAddress!, s.baseAddress!.assumingMemoryBound(to: UInt8.self), 16, Int32(n)) } } }),
        ("open", { n in timed(n) { _ = try! ring.open(sealed) } }),
        ("envelope", { n in timed(n) { _ = try! opener.open(envelope) } }),
    ], iterations: iterations)
    line("| open sealed value | \(fmt(r["open"]!)) | \(fmt(r["c"]!)) (crypto_box_seal_open) | \(fmt(r["open"]! / r["c"]!, 3)) |")
    figures["open_ratio"] = r["open"]! / r["c"]!
    figures["envelope_open_ratio"] = r["envelope"]! / r["c"]!
    line("| envelope open + metadata check | \(fmt(r["envelope"]!)) | \(fmt(r["c"]!)) (crypto_box_seal_open) | \(fmt(r["envelope"]! / r["c"]!, 3)) |")
}

// 4. `vault seal --lines` against the C line sealer, whole processes over the same input.
/// Runs a program with stdin/stdout redirected to files (posix_spawn, so the timing is the
/// process's own, not a Foundation run loop's); returns seconds.
func runProcess(_ path: String, _ arguments: [String], stdin: URL?, stdout: URL?) throws -> Double {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, stdin?.path ?? "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, stdout?.path ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    let t0 = now()
    guard posix_spawn(&pid, path, &actions, nil, argv, environ) == 0 else { throw NSError(domain: "bench", code: 1) }
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    let seconds = Double(now() - t0) / 1e9
    guard status == 0 else { throw NSError(domain: "bench", code: Int(status)) }
    return seconds
}

if !sidecarOnly, let vault = option("--vault"), let cLines = option("--c-lines") {
    let dir = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("vault-bench-\(getpid())")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    let pubPath = dir.appendingPathComponent("\(pk.kid).pub")
    try (pk.text + "\n").write(to: pubPath, atomically: true, encoding: .utf8)
    let count = quick ? 4000 : 20000
    var text = ""
    for i in 0..<count { text += String(4_000_000_000_000_000 + i * 7919) + "\n" }
    let input = dir.appendingPathComponent("in.txt")
    try text.write(to: input, atomically: true, encoding: .utf8)
    // Cards for `--card --lines`: distinct valid Visa numbers, one JSON object a line.
    func luhnCompleted(_ body: String) -> String {
        var sum = 0
        for (i, ch) in body.reversed().enumerated() {
            var d = Int(ch.asciiValue! - 48)
            if i % 2 == 0 { d *= 2; if d > 9 { d -= 9 } }
            sum += d
        }
        return body + String((10 - sum % 10) % 10)
    }
    var cardText = ""
    for i in 0..<count {
        cardText += #"{"number":""# + luhnCompleted(String(400_000_000_000_000 + i * 7919)) + #"","exp_month":12,"exp_year":2030,"cvc":"123"}"# + "\n"
    }
    let cardInput = dir.appendingPathComponent("cards.txt")
    try cardText.write(to: cardInput, atomically: true, encoding: .utf8)
    let b64 = String(pk.text.dropFirst(PublicKey.textPrefix.count))
    var c: [Double] = [], one: [Double] = [], two: [Double] = [], cards: [Double] = [], py: [Double] = []
    let python = option("--python"), pyLines = option("--pynacl-lines")
    for _ in 0..<(quick ? 2 : 3) {
        c.append(try runProcess(cLines, [pk.kid.rawValue, b64], stdin: input, stdout: dir.appendingPathComponent("c.out")))
        one.append(try runProcess(vault, ["seal", "--lines", "--jobs", "1", "--key", pubPath.path], stdin: input, stdout: dir.appendingPathComponent("one.out")))
        two.append(try runProcess(vault, ["seal", "--lines", "--jobs", "2", "--key", pubPath.path], stdin: input, stdout: dir.appendingPathComponent("two.out")))
        cards.append(try runProcess(vault, ["seal", "--card", "--lines", "--key", pubPath.path], stdin: cardInput, stdout: dir.appendingPathComponent("cards.out")))
        if let python, let pyLines {
            py.append(try runProcess(python, [pyLines, pk.kid.rawValue, b64], stdin: input, stdout: dir.appendingPathComponent("py.out")))
        }
    }
    // Every sealer's output is checked, not just timed: the right number of lines, and lines that open.
    for name in ["c.out", "one.out", "two.out"] + (py.isEmpty ? [] : ["py.out"]) {
        let lines = try String(contentsOf: dir.appendingPathComponent(name), encoding: .utf8).split(separator: "\n")
        guard lines.count == count, let last = lines.last,
              let opened = try? ring.open(SealedValue(text: last)),
              opened.withUnsafeBytes({ Array($0) }) == Array(String(4_000_000_000_000_000 + (count - 1) * 7919).utf8)
        else { throw NSError(domain: "bench: \(name) is not \(count) sealed lines that open", code: 1) }
    }
    // The card sealer's output: one envelope a line, the last one opening to the last card.
    let envelopes = try String(contentsOf: dir.appendingPathComponent("cards.out"), encoding: .utf8).split(separator: "\n")
    guard envelopes.count == count, let lastEnvelope = envelopes.last,
          let opened = try? EnvelopeOpener(ring: ring, fingerprintKey: fingerprintKey).open(CardEnvelope(json: String(lastEnvelope))),
          opened.card.number.withUnsafeBytes({ Array($0) }) == Array(luhnCompleted(String(400_000_000_000_000 + (count - 1) * 7919)).utf8)
    else { throw NSError(domain: "bench: cards.out is not \(count) envelopes that open", code: 1) }
    let cRate = Double(count) / median(c), oneRate = Double(count) / median(one), twoRate = Double(count) / median(two)
    let cardRate = Double(count) / median(cards)
    line("| `vault seal --lines --jobs 1` (\(count) lines) | \(fmt(oneRate)) | \(fmt(cRate)) (C line sealer) | \(fmt(oneRate / cRate, 3)) |")
    line("| `vault seal --lines --jobs 2` (\(count) lines) | \(fmt(twoRate)) | \(fmt(cRate)) (C line sealer) | \(fmt(twoRate / cRate, 3)) |")
    figures["lines_ratio_c"] = oneRate / cRate
    figures["lines2_ratio_c"] = twoRate / cRate
    line("| `vault seal --card --lines` on \(ProcessInfo.processInfo.processorCount) cores (\(count) cards → envelopes) | \(fmt(cardRate)) | \(fmt(cRate)) (C line sealer) | \(fmt(cardRate / cRate, 3)) |")
    figures["card_lines_ratio_c"] = cardRate / cRate
    if !py.isEmpty {
        let pyRate = Double(count) / median(py)
        line("| `vault seal --lines --jobs 1` vs PyNaCl (Benchmarks/pynacl/seal_lines.py) | \(fmt(oneRate)) | \(fmt(pyRate)) (PyNaCl line sealer) | \(fmt(oneRate / pyRate, 3)) |")
        line("| PyNaCl line sealer vs the C line sealer | \(fmt(pyRate)) | \(fmt(cRate)) (C line sealer) | \(fmt(pyRate / cRate, 3)) |")
        figures["lines_ratio_pynacl"] = oneRate / pyRate
    }

  if !linesOnly {
    // 5. One value, whole process.
    let single = dir.appendingPathComponent("one.txt")
    try "4242424242424242\n".write(to: single, atomically: true, encoding: .utf8)
    var times: [Double] = []
    for _ in 0..<(quick ? 10 : 40) {
        times.append(try runProcess(vault, ["seal", "--key", pubPath.path], stdin: single, stdout: nil) * 1000)
    }
    times.sort()
    line("")
    line("`vault seal` of one value, whole process: median \(fmt(times[times.count / 2], 1)) ms, p90 \(fmt(times[times.count * 9 / 10], 1)) ms, min \(fmt(times[0], 1)) ms (\(times.count) runs)")
    figures["single_ms"] = times[times.count / 2]
    if let python {
        // The PyNaCl one-liner doing the same job: read stdin, seal, print the vault:v1 line.
        let oneLiner = "import sys,base64,nacl.public as p;print('vault:v1:'+sys.argv[1]+':'+base64.b64encode(p.SealedBox(p.PublicKey(base64.b64decode(sys.argv[2]))).encrypt(sys.stdin.buffer.read().rstrip(b'\\n'))).decode())"
        var pyTimes: [Double] = []
        for _ in 0..<(quick ? 10 : 40) {
            pyTimes.append(try runProcess(python, ["-c", oneLiner, pk.kid.rawValue, b64], stdin: single, stdout: nil) * 1000)
        }
        pyTimes.sort()
        let py50 = pyTimes[pyTimes.count / 2]
        line("")
        line("PyNaCl one-liner doing the same (`python3 -c 'import nacl.public …'`), whole process: median \(fmt(py50, 1)) ms, p90 \(fmt(pyTimes[pyTimes.count * 9 / 10], 1)) ms, min \(fmt(pyTimes[0], 1)) ms (\(pyTimes.count) runs). **`vault seal` takes \(fmt(times[times.count / 2] / py50, 2))× the PyNaCl one-liner's time.**")
        figures["single_ratio_pynacl"] = times[times.count / 2] / py50
    }
  }
}

// 6 and 7: the sidecar's routes under load (ServerLoad.swift).
if let vault = option("--vault"), let loadgen = option("--loadgen"), !args.contains("--no-sidecar"), !linesOnly {
    try serverSections(vault: vault, loadgen: loadgen, publicKey: pk, secret: secretBytes)
}

if let out = option("--json") {
    let data = try JSONSerialization.data(withJSONObject: figures, options: [.sortedKeys, .prettyPrinted])
    try data.write(to: URL(fileURLWithPath: out))
}

if let out = option("--report") {
    // The section this run measured; Benchmarks/run splices it into docs/benchmarks.md.
    try (report.joined(separator: "\n") + "\n").write(toFile: out, atomically: true, encoding: .utf8)
}
