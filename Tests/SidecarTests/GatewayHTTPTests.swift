#if canImport(Glibc)
import Glibc
#endif
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
@testable import Sidecar
import Testing
import VaultCrypto

/// `GatewayHTTP`, the sidecar's client of its gateway's socket, against scripted servers on real
/// Unix sockets: answers on a kept-alive connection, and each way a call can fail classified as
/// the crash guarantees need it (`GatewayClient.Failure.nothingSent`, `answerLost`).
@Suite struct GatewayHTTPTests {
    /// The test process's other suites may hold NIO's shared loops and Swift's pool busy for a
    /// long while on a loaded CI machine: each test's client runs on a loop of its own, with a
    /// connect timeout no load reaches (what a test checks is what failed, not how fast).
    static let loops = MultiThreadedEventLoopGroup(numberOfThreads: 1)

    static func client(_ path: String) -> GatewayHTTP {
        GatewayHTTP(socketPath: path, connectTimeout: .seconds(120), group: loops)
    }

    static func gatewayClient(_ path: String) -> GatewayClient {
        var c = GatewayClient(socketPath: path, http: client(path))
        c.timeout = patience
        return c
    }

    /// A call's timeout where the test is not about timeouts.
    static let patience: TimeAmount = .seconds(300)

    /// Answers every request with its own request line, on one kept-alive connection.
    static func echo() throws -> ScriptedServer {
        try ScriptedServer { server, fd in
            var buffer: [UInt8] = []
            while let request = server.readRequest(fd, &buffer) {
                ScriptedServer.answer(fd, body: "{\"line\":\"\(request.split(separator: "\r\n").first ?? "")\"}")
            }
        }
    }

    @Test func answersComeOverOneKeptAliveConnection() async throws {
        let server = try Self.echo()
        defer { server.stop() }
        let http = Self.client(server.path)
        for i in 0..<3 {
            let (status, body) = try await http.call(.POST, "/v1/authorize/\(i)", body: #"{"amount":1050}"#, timeout: Self.patience)
            #expect(status == 200 && String(buffer: body) == "{\"line\":\"POST /v1/authorize/\(i) HTTP/1.1\"}")
        }
        let (status, _) = try await http.call(.GET, "/v1/health", body: nil, timeout: Self.patience)
        #expect(status == 200)
        #expect(server.connections == 1 && http.idleCount == 1)
        let first = try #require(server.requests.first)
        #expect(first.hasSuffix("\r\n\r\n{\"amount\":1050}") && first.lowercased().contains("content-length: 15\r\n"), "\(first)")
    }

    /// Test hygiene: a stopped server's connection threads end even while a client keeps its
    /// connection alive (they used to stay blocked in `recv` for the rest of the test process).
    @Test func aStoppedScriptedServerServesNoConnection() async throws {
        let server = try Self.echo()
        let http = Self.client(server.path)
        _ = try await http.call(.GET, "/v1/health", body: nil, timeout: Self.patience)
        #expect(server.serving == 1 && http.idleCount == 1)
        server.stop()
        for _ in 0..<500 where server.serving > 0 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(server.serving == 0)
    }

    @Test func noSocketIsUnreachableAndNothingWasSent() async throws {
        let client = Self.gatewayClient(NSTemporaryDirectory() + "no-gateway-\(UUID().uuidString).sock")
        let failure = await Self.failure { () throws(GatewayClient.Failure) in _ = try await client.authorization(of: "pay_1") }
        guard case .unreachable? = failure else { Issue.record("\(String(describing: failure))"); return }
        #expect(failure?.nothingSent == true)
    }

    @Test func aRefusedConnectionIsUnreachableAndNothingWasSent() async throws {
        let server = try ScriptedServer(listening: false) { _, _ in }
        defer { server.stop() }
        let failure = await Self.failure { () throws(GatewayClient.Failure) in _ = try await Self.gatewayClient(server.path).authorization(of: "pay_1") }
        guard case .unreachable? = failure else { Issue.record("\(String(describing: failure))"); return }
        #expect(failure?.nothingSent == true)
    }

    @Test func aConnectionClosedBeforeTheAnswerMayHaveCharged() async throws {
        // Reads the request, then closes without a byte of answer.
        let server = try ScriptedServer { server, fd in
            var buffer: [UInt8] = []
            _ = server.readRequest(fd, &buffer)
        }
        defer { server.stop() }
        let failure = await Self.failure { () throws(GatewayClient.Failure) in
            _ = try await Self.gatewayClient(server.path).authorize(paymentID: "pay_1", amount: 1050, currency: "EUR", envelopeJSON: "{}")
        }
        guard case .connectionClosed? = failure else { Issue.record("\(String(describing: failure))"); return }
        #expect(failure?.nothingSent == false && failure?.answerLost == true)
        #expect(server.requests.count == 1)
    }

    @Test func anAnswerCutShortMayHaveCharged() async throws {
        // The head and half the body, then the close.
        let server = try ScriptedServer { server, fd in
            var buffer: [UInt8] = []
            _ = server.readRequest(fd, &buffer)
            ScriptedServer.send(fd, raw: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"status\":")
        }
        defer { server.stop() }
        let failure = await Self.failure { () throws(GatewayClient.Failure) in
            _ = try await Self.gatewayClient(server.path).authorize(paymentID: "pay_1", amount: 1050, currency: "EUR", envelopeJSON: "{}")
        }
        #expect(failure?.answerLost == true, "\(String(describing: failure))")
    }

    @Test func noAnswerWithinTheTimeoutMayHaveCharged() async throws {
        // Reads the request and answers nothing: only the client's timeout ends the call (its
        // close ends this connection's thread).
        let server = try ScriptedServer { server, fd in
            var buffer: [UInt8] = []
            _ = server.readRequest(fd, &buffer)
            _ = server.readRequest(fd, &buffer)
        }
        defer { server.stop() }
        var client = Self.gatewayClient(server.path)
        client.timeout = .milliseconds(300)
        var failure: GatewayClient.Failure?
        // A test process stalled by other suites can use the time up before the request goes out
        // (`connectTimedOut`: nothing was sent, which is right too): again, until one went out.
        for _ in 0..<20 {
            failure = await Self.failure { () throws(GatewayClient.Failure) in
                _ = try await client.authorize(paymentID: "pay_1", amount: 1050, currency: "EUR", envelopeJSON: "{}")
            }
            if case .connectTimedOut? = failure, server.requests.isEmpty { continue }
            break
        }
        guard case .timedOut? = failure else { Issue.record("\(String(describing: failure))"); return }
        #expect(failure?.answerLost == true)
    }

    @Test func aKeptConnectionTheGatewayClosedIsNotUsedAgain() async throws {
        // Answers one request per connection, then closes it (as a gateway restarting would).
        let server = try ScriptedServer { server, fd in
            var buffer: [UInt8] = []
            guard server.readRequest(fd, &buffer) != nil else { return }
            ScriptedServer.answer(fd, body: "{}")
        }
        defer { server.stop() }
        let http = Self.client(server.path)
        for _ in 0..<3 {
            let (status, _) = try await http.call(.GET, "/v1/health", body: nil, timeout: Self.patience)
            #expect(status == 200)
            // The close reaches the client's event loop, and the connection leaves the pool.
            for _ in 0..<200 where http.idleCount > 0 { try await Task.sleep(for: .milliseconds(5)) }
            #expect(http.idleCount == 0)
        }
        #expect(server.connections == 3 && server.requests.count == 3)
    }

    @Test func anAnswerOver64KiBIsRefused() async throws {
        let server = try ScriptedServer { server, fd in
            var buffer: [UInt8] = []
            _ = server.readRequest(fd, &buffer)
            ScriptedServer.answer(fd, body: "{\"x\":\"" + String(repeating: "a", count: 70_000) + "\"}")
        }
        defer { server.stop() }
        let failure = await Self.failure { () throws(GatewayClient.Failure) in _ = try await Self.gatewayClient(server.path).authorization(of: "pay_1") }
        guard case .failedMidway? = failure else { Issue.record("\(String(describing: failure))"); return }
        #expect(failure?.answerLost == true)
    }

    /// Every way a call fails, as the crash guarantees read it: nothing sent (the intent may be
    /// dropped and the key tried again) only when no byte of the request was written.
    @Test func eachFailureIsClassifiedForTheCrashGuarantees() {
        let nothingSent: [GatewayHTTP.Failure] = [
            .connect(IOError(errnoCode: ENOENT, reason: "connect")), .connect(IOError(errnoCode: ECONNREFUSED, reason: "connect")),
            .connect(IOError(errnoCode: EAGAIN, reason: "connect")), .connectTimedOut, .notSent,
        ]
        let maybeSent: [GatewayHTTP.Failure] = [.closedBeforeAnswer, .timedOut, .tooLarge, .failed(IOError(errnoCode: EPIPE, reason: "write"))]
        for f in nothingSent {
            let c = GatewayClient.classify(f)
            #expect(c.nothingSent && !c.answerLost, "\(f) → \(c)")
        }
        for f in maybeSent {
            let c = GatewayClient.classify(f)
            #expect(!c.nothingSent && c.answerLost, "\(f) → \(c)")
        }
    }

    /// An answer with `Connection: close` is read whole, and its connection is not kept.
    @Test func aConnectionTheGatewayClosesAfterItsAnswerIsNotKept() async throws {
        let server = try ScriptedServer { server, fd in
            var buffer: [UInt8] = []
            guard server.readRequest(fd, &buffer) != nil else { return }
            ScriptedServer.send(fd, raw: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}")
        }
        defer { server.stop() }
        let http = Self.client(server.path)
        for _ in 0..<2 {
            let (status, body) = try await http.call(.GET, "/v1/health", body: nil, timeout: Self.patience)
            #expect(status == 200 && String(buffer: body) == "{}")
            #expect(http.idleCount == 0)
        }
        #expect(server.connections == 2)
    }

    /// A chunked answer is read whole.
    @Test func aChunkedAnswerIsReadWhole() async throws {
        let server = try ScriptedServer { server, fd in
            var buffer: [UInt8] = []
            while server.readRequest(fd, &buffer) != nil {
                ScriptedServer.send(fd, raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n2\r\n1}\r\n0\r\n\r\n")
            }
        }
        defer { server.stop() }
        let http = Self.client(server.path)
        for _ in 0..<2 {
            let (status, body) = try await http.call(.GET, "/v1/health", body: nil, timeout: Self.patience)
            #expect(status == 200 && String(buffer: body) == "{\"a\":1}")
        }
        #expect(server.connections == 1)
    }

    /// At most 16 connections at once: more calls at once wait for a free one, and all are answered.
    @Test func callsBeyondSixteenWaitForAConnection() async throws {
        let inFlight = NIOLockedValueBox((now: 0, most: 0))
        let server = try ScriptedServer { server, fd in
            var buffer: [UInt8] = []
            while server.readRequest(fd, &buffer) != nil {
                inFlight.withLockedValue { $0.now += 1; $0.most = max($0.most, $0.now) }
                usleep(20_000)
                inFlight.withLockedValue { $0.now -= 1 }
                ScriptedServer.answer(fd, body: "{}")
            }
        }
        defer { server.stop() }
        let http = Self.client(server.path)
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for i in 0..<40 { group.addTask { try await http.call(.GET, "/v1/health/\(i)", body: nil, timeout: Self.patience).status } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses.count == 40 && statuses.allSatisfy { $0 == 200 })
        #expect(server.connections <= GatewayHTTP.maxConnections, "\(server.connections) connections")
        #expect(inFlight.withLockedValue { $0.most } <= GatewayHTTP.maxConnections)
    }

    @Test func aPathThatIsNotVisibleASCIIIsNeverSent() async throws {
        let server = try Self.echo()
        defer { server.stop() }
        let client = Self.gatewayClient(server.path)
        for id in ["pay_1\r\nX-Evil: 1", "pay 1", "pay_é"] {
            let failure = await Self.failure { () throws(GatewayClient.Failure) in _ = try await client.authorization(of: id) }
            #expect(failure?.nothingSent == true, "\(String(describing: failure))")
        }
        #expect(server.connections == 0)
    }

    static func failure(_ body: () async throws(GatewayClient.Failure) -> Void) async -> GatewayClient.Failure? {
        do throws(GatewayClient.Failure) { try await body() } catch { return error }
        return nil
    }
}
