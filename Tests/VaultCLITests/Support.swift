import Foundation

/// The repository root (for Tests/Interop and Sources scans).
let repositoryRoot: URL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// The `vault` binary built beside this test bundle (`swift test` builds every product).
let vaultBinary: String = {
    if let path = ProcessInfo.processInfo.environment["VAULT_BINARY"] { return path }
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    var dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
    // On Linux the test bundle is an executable in the build directory; on macOS it is inside a bundle.
    while !FileManager.default.isExecutableFile(atPath: dir.appendingPathComponent("vault").path), dir.path != "/" {
        dir = dir.deletingLastPathComponent()
    }
    return dir.appendingPathComponent("vault").path
}()

/// With VAULT_TEST_ARTIFACTS set (scripts/test sets it, and TMPDIR to the same directory), the
/// end-to-end tests keep what they leave (server logs, stores with their WAL files, ledgers, audit
/// logs) and append every HTTP response and server log they read to files there, for the leak
/// scan that follows the suite (issue 6, item 3).
let testArtifacts = ProcessInfo.processInfo.environment["VAULT_TEST_ARTIFACTS"]

/// Removes a test's scratch directory, unless the artifacts are kept for the leak scan.
func removeScratch(_ path: String) {
    if testArtifacts == nil { try? FileManager.default.removeItem(atPath: path) }
}

/// Appends `text` to `name` in the artifacts directory (responses.log, server-logs.log).
func keepArtifact(_ name: String, _ text: String) {
    guard let dir = testArtifacts else { return }
    let fd = open(dir + "/" + name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
    guard fd >= 0 else { return }
    defer { close(fd) }
    let bytes = Array((text + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
}

struct RunResult {
    var status: Int32
    var stdout: Data
    var stderr: String
    var out: String { String(decoding: stdout, as: UTF8.self) }
}

/// Runs a program with `input` on stdin and returns status, stdout and stderr.
@discardableResult
func run(_ executable: String, _ arguments: [String], input: Data = Data(), environment: [String: String]? = nil) throws -> RunResult {
    // A child that exits before reading all its input must not kill the test process.
    signal(SIGPIPE, SIG_IGN)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let stdin = Pipe(), stdout = Pipe(), stderr = Pipe()
    process.standardInput = stdin
    process.standardOutput = stdout
    process.standardError = stderr
    try process.run()
    // Feed stdin and drain both outputs concurrently so large inputs cannot deadlock. The readers
    // are threads of their own: a read that blocks must not hold a thread of the pool that Swift's
    // tasks share with `DispatchQueue.global()` (`OwnThread`).
    let group = DispatchGroup()
    nonisolated(unsafe) var out = Data(), err = Data()
    group.enter()
    Thread { out = stdout.fileHandleForReading.readDataToEndOfFile(); group.leave() }.start()
    group.enter()
    Thread { err = stderr.fileHandleForReading.readDataToEndOfFile(); group.leave() }.start()
    try? stdin.fileHandleForWriting.write(contentsOf: input)
    try? stdin.fileHandleForWriting.close()
    group.wait()
    process.waitUntilExit()
    return RunResult(status: process.terminationStatus, stdout: out, stderr: String(decoding: err, as: UTF8.self))
}

func vault(_ arguments: String..., input: String = "") throws -> RunResult {
    try run(vaultBinary, arguments, input: Data(input.utf8))
}

func vault(_ arguments: [String], input: Data) throws -> RunResult {
    try run(vaultBinary, arguments, input: input)
}

let python = "/usr/bin/env"

/// Runs Tests/Interop/interop.py with PyNaCl.
func interop(_ arguments: String..., input: String = "") throws -> RunResult {
    try run(python, ["python3", repositoryRoot.appendingPathComponent("Tests/Interop/interop.py").path] + arguments, input: Data(input.utf8))
}

/// A temporary keys directory with one key pair and a fingerprint key.
struct TestKeys {
    let dir: String
    let kid: String
    var pub: String { "\(dir)/\(kid).pub" }
    var key: String { "\(dir)/\(kid).key" }

    init() throws {
        dir = NSTemporaryDirectory() + "vault-cli-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let r = try vault("keygen", "--out", dir)
        guard r.status == 0 else { throw TestFailure("keygen failed: \(r.stderr)") }
        kid = r.out.trimmingCharacters(in: .whitespacesAndNewlines)
        guard try vault("keygen", "--fingerprint", "--out", dir).status == 0 else { throw TestFailure("fingerprint keygen failed") }
    }

    func remove() { removeScratch(dir) }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

/// The public test numbers used here; no output or error text may contain them.
let testPANs = ["4242424242424242", "5555555555554444", "378282246310005", "4000056655665556", "6011111111111117"]

func containsPAN(_ text: String) -> Bool {
    let squeezed = text.replacingOccurrences(of: " ", with: "").replacingOccurrences(of: "-", with: "")
    return testPANs.contains { text.contains($0) || squeezed.contains($0) }
}

/// Starts one of the Python stand-in servers in Tests/Interop (`script` with `arguments`) and
/// returns the port it prints as its first line of output (0 when it printed none).
func startStandIn(_ process: Process, script: String, _ arguments: [String]) throws -> Int {
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["python3", repositoryRoot.appendingPathComponent("Tests/Interop/" + script).path] + arguments
    let out = Pipe()
    process.standardOutput = out
    // Never the test's own stdout/stderr: swift test waits for those to close.
    process.standardError = FileHandle.nullDevice
    process.standardInput = FileHandle.nullDevice
    try process.run()
    var line = Data()
    while let byte = try out.fileHandleForReading.read(upToCount: 1), !byte.isEmpty, byte != Data("\n".utf8) { line += byte }
    return Int(String(decoding: line, as: UTF8.self)) ?? 0
}
