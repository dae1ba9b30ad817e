import Foundation
import Testing

/// Issue 6, item 4: the processes that hold card data or secret keys cannot be dumped.
///
/// A non-dumpable process (`prctl(PR_SET_DUMPABLE, 0)`) writes no core file, cannot be ptraced
/// or have its memory read through `/proc/PID/mem` by other processes of its user, and the kernel
/// shows this from outside: its `/proc/PID` entries belong to root instead of its user. The test
/// runs the real `vault gateway` and `vault serve` as `nobody` and checks exactly that (and
/// `RLIMIT_CORE` 0), with a plain process of the same user as the control that shows the check
/// can fail.
@Suite(.serialized, .ownThread) struct HardeningCLITests {
    static let nobody: UInt32 = 65534

    @Test(.enabled(if: getuid() == 0, "needs root to start processes as another uid"))
    func gatewayAndSidecarAreNotDumpable() throws {
        let dir = NSTemporaryDirectory() + "vault-dump-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { removeScratch(dir) }
        chmod(dir, 0o755)
        // The binary must be reachable by nobody; a checkout under a private directory is not.
        var binary = vaultBinary
        if try run("/usr/bin/setpriv", asNobody(["/usr/bin/test", "-x", binary])).status != 0 {
            binary = dir + "/vault"
            try FileManager.default.copyItem(atPath: vaultBinary, toPath: binary)
            chmod(binary, 0o755)
        }
        for sub in ["gk", "sk", "run"] {
            try FileManager.default.createDirectory(atPath: "\(dir)/\(sub)", withIntermediateDirectories: true)
            chown("\(dir)/\(sub)", Self.nobody, Self.nobody)
        }
        let keygen = try run("/usr/bin/setpriv", asNobody([binary, "keygen", "--out", dir + "/gk"]))
        #expect(keygen.status == 0, "\(keygen.stderr)")
        let kid = keygen.out.trimmingCharacters(in: .whitespacesAndNewlines)
        try FileManager.default.copyItem(atPath: "\(dir)/gk/\(kid).pub", toPath: "\(dir)/sk/\(kid).pub")
        chown("\(dir)/sk/\(kid).pub", Self.nobody, Self.nobody)

        func start(_ arguments: [String]) throws -> Process {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            p.arguments = asNobody([binary] + arguments)
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try p.run()
            return p
        }
        let gateway = try start(["gateway", "--socket", dir + "/run/g.sock", "--keys", dir + "/gk", "--processor", "sandbox:\(dir)/run/ledger.sqlite"])
        let sidecar = try start(["serve", "--socket", dir + "/run/v.sock", "--keys", dir + "/sk", "--store", "sqlite:\(dir)/run/t.sqlite", "--gateway", dir + "/run/g.sock"])
        let sleeper = Process()
        sleeper.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        sleeper.arguments = asNobody(["/bin/sleep", "60"])
        try sleeper.run()
        defer {
            for p in [gateway, sidecar, sleeper] where p.isRunning {
                kill(p.processIdentifier, SIGKILL)
                p.waitUntilExit()
            }
        }
        for socket in ["g.sock", "v.sock"] {
            for _ in 0..<200 where !FileManager.default.fileExists(atPath: "\(dir)/run/\(socket)") { usleep(50_000) }
            #expect(FileManager.default.fileExists(atPath: "\(dir)/run/\(socket)"), "\(socket) never appeared")
        }
        usleep(200_000)

        // The control: an ordinary process of nobody has its /proc entries owned by nobody.
        let plain = try procInfo(sleeper.processIdentifier)
        #expect(plain.uid == Self.nobody && plain.owner == Self.nobody, "control: \(plain)")

        for (name, p) in [("gateway", gateway), ("sidecar", sidecar)] {
            #expect(p.isRunning, "\(name) exited")
            let info = try procInfo(p.processIdentifier)
            #expect(info.uid == Self.nobody, "\(name) runs as nobody: \(info)")
            #expect(info.owner == 0, "\(name) is dumpable: /proc/\(p.processIdentifier) belongs to uid \(info.owner)")
            #expect(info.coreLimit == ["0", "0"], "\(name) may write a core file: \(info.coreLimit)")
        }
    }

    /// The sidecar's memory after it has tokenized cards: the card number must not be anywhere in
    /// it, not in freed buffers either. It reads each card body into `SecureBytes` and zeroes
    /// NIO's read buffer where the body lay; without that (or with a wipe that zeroes a copy, as
    /// an earlier version did) this scan finds the number dozens of times. Root reads the
    /// memory of a non-dumpable process through CAP_SYS_PTRACE; without it the scan is skipped.
    @Test(.enabled(if: getuid() == 0, "needs root to read another process's memory"))
    func sidecarMemoryHoldsNoCardNumberAfterTokenizing() throws {
        var s = try ServeCLITests.Sidecar()
        defer { s.process?.terminate(); s.process?.waitUntilExit(); s.remove() }
        try s.start()
        let pan = "5555555555554444"
        for i in 0..<60 {
            // Tokenize, validate and a refused card (wrong Luhn digit): every route that reads a number.
            let (status, body) = try s.curl("POST", "/v1/tokens", #"{"card":{"number":"\#(pan)","exp_month":12,"exp_year":2031,"cvc":"\#(100 + i)"}}"#)
            #expect(status == 201, "\(body)")
            _ = try s.curl("POST", "/v1/validate", #"{"number":"\#(pan)"}"#)
            _ = try s.curl("POST", "/v1/tokens", #"{"card":{"number":"5555555555554445","exp_month":12,"exp_year":2031}}"#)
        }
        usleep(300_000)
        let pid = s.process!.processIdentifier
        guard let regions = try? String(contentsOfFile: "/proc/\(pid)/maps", encoding: .utf8) else { return }
        let fd = open("/proc/\(pid)/mem", O_RDONLY)
        guard fd >= 0 else {
            print("sidecar memory scan skipped: cannot read /proc/\(pid)/mem (errno \(errno))")
            return
        }
        defer { close(fd) }
        var found: [String] = []
        var scanned = 0
        let needles = [pan, "5555555555554445"].map { Array($0.utf8) }
        for line in regions.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 2, fields[1].hasPrefix("r") else { continue }
            let bounds = fields[0].split(separator: "-").compactMap { UInt64($0, radix: 16) }
            guard bounds.count == 2, bounds[1] - bounds[0] <= 512 << 20 else { continue }
            var buffer = [UInt8](repeating: 0, count: Int(bounds[1] - bounds[0]))
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(Int64(bitPattern: bounds[0]))) }
            guard n > 0 else { continue }
            scanned += n
            for needle in needles {
                var i = 0
                while i + needle.count <= n {
                    if buffer[i] == needle[0], buffer[i..<(i + needle.count)].elementsEqual(needle) {
                        found.append("\(String(decoding: needle.suffix(4), as: UTF8.self)) at \(String(bounds[0] + UInt64(i), radix: 16)) in \(fields.count > 5 ? String(fields[5]) : "anonymous memory")")
                        i += needle.count
                    } else {
                        i += 1
                    }
                }
            }
        }
        #expect(scanned > 1 << 20, "scanned only \(scanned) bytes")
        #expect(found.isEmpty, "card numbers left in the sidecar's memory: \(found.count) (\(found.prefix(5)))")
    }

    func asNobody(_ command: [String]) -> [String] {
        ["--reuid=\(Self.nobody)", "--regid=\(Self.nobody)", "--clear-groups", "--"] + command
    }

    struct ProcInfo: CustomStringConvertible {
        var uid: UInt32
        var owner: UInt32
        var coreLimit: [String]
        var description: String { "uid \(uid), /proc owner \(owner), core limit \(coreLimit)" }
    }

    /// The process's real uid (`/proc/PID/status`), the owner of its `/proc/PID/environ` and its
    /// core file size limits (soft, hard).
    func procInfo(_ pid: Int32) throws -> ProcInfo {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let uidLine = status.split(separator: "\n").first { $0.hasPrefix("Uid:") } ?? ""
        let uid = UInt32(uidLine.split(whereSeparator: { $0 == "\t" || $0 == " " }).dropFirst().first ?? "") ?? UInt32.max
        var st = stat()
        guard stat("/proc/\(pid)/environ", &st) == 0 else { throw TestFailure("cannot stat /proc/\(pid)/environ") }
        let limits = (try? String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)) ?? ""
        let core = limits.split(separator: "\n").first { $0.hasPrefix("Max core file size") } ?? ""
        return ProcInfo(uid: uid, owner: st.st_uid, coreLimit: Array(core.split(separator: " ").filter { !$0.isEmpty }.dropFirst(4).prefix(2).map(String.init)))
    }
}
