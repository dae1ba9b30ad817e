import Foundation
import Testing
import VaultClient
import VaultCrypto

/// `SidecarClient` keeps connections alive, drops those a server closed while idle, and gives up
/// after its timeout (against a stand-in server that counts connections: Tests/Interop).
@Suite(.serialized) struct SidecarClientTests {
    /// Starts Tests/Interop/keepalive_server.py in `mode`; answers its socket and process.
    func server(_ mode: String) throws -> (socket: String, process: Process, dir: String) {
        let dir = NSTemporaryDirectory() + "vault-client-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let socket = dir + "/s.sock"
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Interop/keepalive_server.py").path
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["python3", script, socket, mode]
        let out = Pipe()
        p.standardOutput = out
        // Never the test's own stdout/stderr: swift test waits for those to close.
        p.standardError = FileHandle.nullDevice
        p.standardInput = FileHandle.nullDevice
        try p.run()
        // "ready\n" once it listens.
        while let byte = try out.fileHandleForReading.read(upToCount: 1), !byte.isEmpty, byte != Data("\n".utf8) {}
        return (socket, p, dir)
    }

    /// SIGKILL: the test runner's ignored SIGTERM would be inherited by the stand-in.
    func stop(_ s: (socket: String, process: Process, dir: String)) {
        kill(s.process.processIdentifier, SIGKILL)
        s.process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: s.dir)
    }

    func connection(_ answer: SidecarClient.Answer) -> (Int, Int) {
        ((answer.json?["connection"] as? Int) ?? -1, (answer.json?["request"] as? Int) ?? -1)
    }

    @Test func callsReuseOneConnection() throws {
        let s = try server("keepalive")
        defer { stop(s) }
        let client = SidecarClient(socketPath: s.socket)
        for i in 1...5 {
            let answer = try client.get("/v1/health")
            #expect(connection(answer) == (1, i), "call \(i): \(answer.body)")
        }
        // A copy of the client shares its idle connections.
        let copy = client
        #expect(connection(try copy.get("/v1/health")) == (1, 6))
    }

    @Test func aConnectionTheServerClosedIsReplaced() throws {
        let s = try server("close-idle")
        defer { stop(s) }
        let client = SidecarClient(socketPath: s.socket)
        for i in 1...4 {
            let answer = try client.get("/v1/health")
            // Each pooled connection was closed by the server after its answer: the next call
            // finds it closed, drops it and answers on a new one, never an error.
            #expect(connection(answer) == (i, 1), "call \(i): \(answer.body)")
            usleep(50_000)
        }
    }

    @Test func aCallGivesUpAfterItsTimeout() throws {
        let s = try server("slow")
        defer { stop(s) }
        let client = SidecarClient(socketPath: s.socket, timeout: 0.5)
        let start = Date()
        #expect(throws: VaultError.self) { try client.get("/v1/health") }
        do { _ = try client.get("/v1/health") } catch {
            #expect(error.code == .sidecarUnreachable && error.message.contains("in time"), "\(error)")
        }
        #expect(Date().timeIntervalSince(start) < 4.5, "two calls gave up after their 0.5 s timeouts, not the server's 5 s")
    }
}
