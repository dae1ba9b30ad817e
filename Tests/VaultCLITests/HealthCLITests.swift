#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing

/// Issue 18, health and readiness: `GET /v1/health/ready` on both servers, `vault health` and its
/// exit codes, systemd `Type=notify` (`READY=1` once the socket accepts, `STOPPING=1` on
/// SIGTERM), and the probes of the container image and the Kubernetes manifests.
@Suite(.serialized, .ownThread) struct HealthCLITests {
    /// `vault health` with `arguments`, as a probe runs it.
    static func health(_ arguments: String...) throws -> RunResult {
        let r = try run(vaultBinary, ["health"] + arguments)
        keepArtifact("responses.log", r.out + r.stderr)
        return r
    }

    /// The sidecar's readiness follows its gateway: 503 `NOT_READY` naming the gateway while
    /// nothing listens on the gateway's socket (`vault health --ready` exit 16, liveness still 0),
    /// 200 once the gateway runs; the gateway's own readiness; nothing on a socket: exit 8.
    @Test func sidecarReadyFollowsItsGateway() throws {
        var g = try GatewayCLITests.Gateway()
        var s = try ServeCLITests.Sidecar()
        defer { s.process?.terminate(); g.process?.terminate(); s.remove(); g.remove() }
        try s.start(extra: ["--gateway", g.socket])
        #expect(s.process?.isRunning == true)

        let alive = try Self.health("--socket", s.socket)
        #expect(alive.status == 0 && alive.out == "ok\n", "\(alive.out) \(alive.stderr)")
        let notReady = try Self.health("--socket", s.socket, "--ready")
        #expect(notReady.status == 16, "\(notReady.status) \(notReady.out) \(notReady.stderr)")
        #expect(notReady.stderr.hasPrefix("vault: NOT_READY: not ready: gateway: ") && notReady.stderr.split(separator: "\n").count == 1, "\(notReady.stderr)")
        let (status, body) = try s.curl("GET", "/v1/health/ready")
        #expect(status == 503, "\(body)")
        let json = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
        let checks = json?["checks"] as? [String: [String: String]]
        #expect((json?["error"] as? [String: String])?["code"] == "NOT_READY" && json?["status"] as? String == "not_ready", "\(body)")
        #expect(checks?["store"]?["status"] == "ok" && checks?["keys"]?["status"] == "ok" && checks?["gateway"]?["status"] == "failed", "\(body)")
        #expect(checks?["gateway"]?["reason"]?.contains("cannot be reached") == true, "\(body)")

        // The gateway starts: the sidecar becomes ready (once its last answer, kept up to 1 s, ages).
        try g.start()
        #expect(g.process?.isRunning == true, "\(g.logs())")
        var ready = try Self.health("--socket", s.socket, "--ready")
        for _ in 0..<100 where ready.status != 0 {
            usleep(50_000)
            ready = try Self.health("--socket", s.socket, "--ready")
        }
        #expect(ready.status == 0 && ready.out == "ready (gateway ok, keys ok, store ok)\n", "\(ready.status) \(ready.out) \(ready.stderr)")
        let (okStatus, okBody) = try s.curl("GET", "/v1/health/ready")
        #expect(okStatus == 200 && okBody.hasPrefix(#"{"status":"ready","checks":{"store":{"status":"ok"},"gateway":{"status":"ok"},"keys":{"status":"ok","detail":"primary "#), "\(okBody)")

        // The gateway's own probes.
        let gatewayAlive = try Self.health("--socket", g.socket)
        #expect(gatewayAlive.status == 0 && gatewayAlive.out == "ok (gateway, processor sandbox)\n", "\(gatewayAlive.out) \(gatewayAlive.stderr)")
        let gatewayReady = try Self.health("--socket", g.socket, "--ready", "--timeout", "3")
        #expect(gatewayReady.status == 0 && gatewayReady.out == "ready (keys ok, processor ok, store ok)\n", "\(gatewayReady.out) \(gatewayReady.stderr)")
        let (gStatus, gBody) = try g.curl("GET", "/v1/health/ready")
        #expect(gStatus == 200 && gBody.contains(#""keys":{"status":"ok","detail":"opens \#(g.kid); fingerprint key absent"}"#), "\(gBody)")
        #expect(gBody.contains(#""processor":{"status":"ok","detail":"sandbox"}"#) && gBody.contains(#""store":{"status":"ok"}"#), "\(gBody)")

        // The sidecar logged the change both ways.
        s.process?.terminate()
        s.process?.waitUntilExit()
        let logs = s.logs()
        #expect(logs.contains("not ready") && logs.contains("ready again"), "\(logs)")

        // Nothing listens: exit 8, one line naming the socket.
        let nothing = try Self.health("--socket", s.dir + "/nothing.sock")
        #expect(nothing.status == 8 && nothing.stderr.hasPrefix("vault: SIDECAR_UNREACHABLE: cannot connect to the server at \(s.dir)/nothing.sock"), "\(nothing.stderr)")
        // No socket at all: a usage error; $VAULT_HEALTH_SOCKET stands in for --socket.
        #expect(try Self.health().status == 64)
        let byEnvironment = try run(vaultBinary, ["health"], environment: ProcessInfo.processInfo.environment.merging(["VAULT_HEALTH_SOCKET": g.socket]) { $1 })
        #expect(byEnvironment.status == 0 && byEnvironment.out.hasPrefix("ok"), "\(byEnvironment.stderr)")
    }

    /// On PostgreSQL the store check is a real query: both servers are ready on a live database,
    /// and not ready, naming the store, once it is gone (dropped, its connections cut).
    @Test(.enabled(if: GatewayCLITests.postgresSocket != nil, "needs VAULT_TEST_POSTGRES_SOCKET (scripts/test)"))
    func notReadyWhenThePostgreSQLStoreIsGone() throws {
        let store = try GatewayCLITests.postgresStore()
        var g = try GatewayCLITests.Gateway()
        var s = try ServeCLITests.Sidecar()
        defer { s.process?.terminate(); g.process?.terminate(); s.remove(); g.remove() }
        try g.start(store: store)
        try s.start(extra: ["--gateway", g.socket, "--store", store])
        for socket in [g.socket, s.socket] {
            let r = try Self.health("--socket", socket, "--ready")
            #expect(r.status == 0, "\(socket): \(r.stderr)")
        }
        let socket = try #require(GatewayCLITests.postgresSocket)
        let dir = (socket as NSString).deletingLastPathComponent, port = String(socket.split(separator: ".").last ?? "5432")
        let name = String(store.split(separator: "?").first?.split(separator: "/").last ?? "")
        let asPG = getuid() == 0 ? ["runuser", "-u", "postgres", "--"] : []
        let drop = try run("/usr/bin/env", asPG + ["psql", "-h", dir, "-p", port, "-U", "postgres", "-d", "postgres", "-At", "-c", "DROP DATABASE \(name) WITH (FORCE)"])
        #expect(drop.status == 0, "\(drop.stderr)")
        for socket in [g.socket, s.socket] {
            var r = try Self.health("--socket", socket, "--ready")
            for _ in 0..<100 where r.status == 0 {
                usleep(50_000)
                r = try Self.health("--socket", socket, "--ready")
            }
            #expect(r.status == 16 && r.stderr.hasPrefix("vault: NOT_READY: not ready: store: "), "\(socket): \(r.status) \(r.stderr)")
            #expect(try Self.health("--socket", socket).status == 0, "liveness does not depend on the store")
        }
    }

    /// A socket that accepts the connection and never answers (a hung server): exit 8 once
    /// `--timeout` has passed, saying no answer came.
    @Test func aSilentServerIsUnreachableAfterTheTimeout() throws {
        let dir = NSTemporaryDirectory() + "vault-silent-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { removeScratch(dir) }
        let path = dir + "/silent.sock"
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        #expect(bound == 0 && listen(fd, 4) == 0)
        let r = try Self.health("--socket", path, "--ready", "--timeout", "0.3")
        #expect(r.status == 8 && r.stderr == "vault: SIDECAR_UNREACHABLE: no answer from the server in time\n", "\(r.status) \(r.stderr)")
    }

    /// The health routes answer the server's own uid and root even when its allow list names
    /// neither (probes run as the service's user); other routes stay refused, and so does any
    /// other unlisted user.
    @Test func probesWorkForTheServersOwnUser() throws {
        var s = try ServeCLITests.Sidecar()
        defer { s.process?.terminate(); s.remove() }
        try s.start(extra: ["--allow", "uid:\(getuid() == 4242 ? 4243 : 4242)=admin", "--gateway", s.dir + "/no-gateway.sock", "--socket-mode", "666"])
        #expect(try Self.health("--socket", s.socket).status == 0)
        #expect(try Self.health("--socket", s.socket, "--ready").status == 16)
        #expect(try s.curl("GET", "/metrics").0 == 403)
        if getuid() == 0 {
            let other = try run("/usr/bin/env", ["runuser", "-u", "nobody", "--", vaultBinary, "health", "--socket", s.socket])
            #expect(other.status == 10 && other.stderr.contains("PEER_NOT_ALLOWED"), "\(other.status) \(other.stderr)")
        }
        var g = try GatewayCLITests.Gateway()
        defer { g.process?.terminate(); g.remove() }
        try g.start(extra: ["--allow-uid", getuid() == 4242 ? "4243" : "4242"])
        #expect(g.process?.isRunning == true, "\(g.logs())")
        #expect(try Self.health("--socket", g.socket).status == 0)
        #expect(try Self.health("--socket", g.socket, "--ready").status == 0)
        #expect(try g.curl("GET", "/v1/keys").0 == (getuid() == 0 ? 200 : 403))
    }

    /// `Type=notify`: the sidecar sends `READY=1` to `$NOTIFY_SOCKET` (a path) only once its
    /// socket accepts connections, the gateway likewise to an abstract-namespace address, and both
    /// `STOPPING=1` on SIGTERM.
    @Test(arguments: ["sidecar", "gateway"]) func notifiesSystemdWhenReadyAndWhenStopping(server: String) throws {
        let dir = NSTemporaryDirectory() + "vault-notify-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { removeScratch(dir) }
        let address = server == "sidecar" ? dir + "/notify.sock" : "@vault-notify-" + UUID().uuidString
        let notify = try NotifySocket(address)
        defer { notify.close() }

        let socket: String, arguments: [String], keysDirectory: String
        if server == "sidecar" {
            let s = try ServeCLITests.Sidecar()
            (socket, keysDirectory) = (dir + "/vault.sock", s.dir)
            arguments = ["serve", "--socket", socket, "--keys", s.keys, "--store", "sqlite:\(dir)/t.sqlite", "--gateway", dir + "/gw.sock"]
        } else {
            let g = try GatewayCLITests.Gateway()
            (socket, keysDirectory) = (dir + "/gateway.sock", g.dir)
            arguments = ["gateway", "--socket", socket, "--keys", g.keys, "--processor", "sandbox:\(dir)/ledger.sqlite"]
        }
        defer { removeScratch(keysDirectory) }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: vaultBinary)
        p.arguments = arguments
        p.environment = ProcessInfo.processInfo.environment.merging(["NOTIFY_SOCKET": address]) { $1 }
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        defer { if p.isRunning { p.terminate() } }

        let first = notify.receive()
        // At the moment READY=1 arrives, the socket is in place and accepts a connection.
        let accepts = Self.connects(socket)
        #expect(first?.split(separator: "\n").contains("READY=1") == true, "\(first ?? "nothing within 60 s")")
        #expect(first?.contains("STATUS=listening on \(socket)") == true, "\(first ?? "")")
        #expect(accepts, "READY=1 came before \(socket) accepted connections")

        p.terminate()   // SIGTERM
        let second = notify.receive()
        #expect(second?.split(separator: "\n").contains("STOPPING=1") == true, "\(second ?? "nothing within 60 s")")
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)
    }

    /// The image's HEALTHCHECK and the Kubernetes probes run `vault health` on each server's
    /// socket (the one its configuration names), readiness with `--ready`; the units are
    /// `Type=notify`.
    @Test func deployProbesUseVaultHealth() throws {
        let containerfile = try String(contentsOf: repositoryRoot.appendingPathComponent("deploy/container/Containerfile"), encoding: .utf8)
        #expect(containerfile.contains(#"CMD ["/usr/local/bin/vault", "health""#) && containerfile.contains("HEALTHCHECK "), "no HEALTHCHECK with vault health")
        #expect(containerfile.contains("ENV VAULT_HEALTH_SOCKET="))
        let script = """
            import json, sys, yaml
            for d in yaml.safe_load_all(open(sys.argv[1])):
                if d and d.get("kind") == "ConfigMap" and "vault.json" in d.get("data", {}):
                    config = json.loads(d["data"]["vault.json"])
                if d and d.get("kind") == "Deployment":
                    pod = d["spec"]["template"]["spec"]
                    for c in pod.get("initContainers", []) + pod["containers"]:
                        probes = {k: c[k]["exec"]["command"] for k in ("livenessProbe", "readinessProbe", "startupProbe") if k in c}
                        print(json.dumps({"name": c["name"], "probes": probes}))
            print(json.dumps({"sockets": {"vault-sidecar": config["sidecar"]["socket"], "vault-gateway": config["gateway"]["socket"]}}))
            """
        let r = try run(python, ["python3", "-c", script, repositoryRoot.appendingPathComponent("deploy/kubernetes/vault-pod.yaml").path])
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.out.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let sockets = try #require(lines.last?["sockets"] as? [String: String])
        for (name, socket) in sockets {
            let probes = try #require(lines.first { $0["name"] as? String == name }?["probes"] as? [String: [String]], "\(name)")
            #expect(probes["livenessProbe"]?.prefix(4) == ["/usr/local/bin/vault", "health", "--socket", socket], "\(name): \(probes)")
            #expect(probes["livenessProbe"]?.contains("--ready") == false, "\(name)")
            #expect(probes["readinessProbe"]?.prefix(4) == ["/usr/local/bin/vault", "health", "--socket", socket], "\(name): \(probes)")
            #expect(probes["readinessProbe"]?.contains("--ready") == true, "\(name)")
        }
        for unit in ["vault-sidecar.service", "vault-gateway.service"] {
            let text = try String(contentsOf: repositoryRoot.appendingPathComponent("deploy/systemd/" + unit), encoding: .utf8)
            let lines = text.split(separator: "\n")
            #expect(lines.contains("Type=notify") && lines.contains("NotifyAccess=main"), "\(unit)")
        }
        // The help's examples paste: indented, under 80 columns.
        let help = try vault("help", "health")
        let examples = help.out.components(separatedBy: "Examples:").last?.components(separatedBy: "USAGE:").first ?? ""
        #expect(examples.contains("vault health --socket"), "\(help.out)")
        for line in examples.split(separator: "\n") {
            #expect(line.hasPrefix("  ") && line.count < 80, "\(line)")
        }
    }

    /// Whether a stream connection to `path` succeeds now.
    static func connects(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { $0.copyBytes(from: Array(path.utf8).prefix($0.count - 1)) }
        return withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        } == 0
    }
}

/// A `SOCK_DGRAM` socket bound where `$NOTIFY_SOCKET` will point: a path, or `@name` in the
/// abstract namespace (as systemd's own is for a user manager).
struct NotifySocket {
    let fd: Int32

    init(_ address: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket: \(errno)") }
        var name = Array(address.utf8)
        let abstract = name.first == UInt8(ascii: "@")
        if abstract { name[0] = 0 } else { name.append(0) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { $0.copyBytes(from: name) }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + name.count)
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        guard rc == 0 else { throw TestFailure("bind \(address): \(errno)") }
        // A bound on the wait, so a server that never notifies fails the test instead of hanging it.
        var tv = timeval(tv_sec: 60, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    /// The next datagram, or nil when none came within the bound.
    func receive() -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        return n > 0 ? String(decoding: buffer[..<n], as: UTF8.self) : nil
    }

    func close() { Glibc.close(fd) }
}
