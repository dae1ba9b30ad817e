#if canImport(Glibc)
import Glibc
#endif
import CardRules
import Foundation
@testable import Sidecar
import Testing
import Tokenizer
import VaultCrypto

/// `GatewayFingerprinter` against a scripted gateway on a real Unix socket: requests that arrive
/// while a call is out go together in the next call, each caller gets its own envelope's answer,
/// one kept-alive connection serves every call, a filler's batch is split at `maxBatch`, and a
/// gateway that is down is answered `unavailable` (then at once, without asking, for `retryAfter`).
struct GatewayFingerprinterTests {
    /// A gateway that answers `POST /v1/fingerprints` with one fingerprint per envelope, made from
    /// the envelope's sealed key (so a test can tell which answer belongs to which envelope). It
    /// holds its first answer until `release()`, so that requests pile up behind it.
    final class ScriptedGateway: @unchecked Sendable {
        /// What the connections share: the batches seen, the gate, the failure switches.
        final class State: @unchecked Sendable {
            let lock = NSLock()
            var batches: [Int] = []
            let gate = DispatchSemaphore(value: 0)
            var failFirst = false, answerShort = false
        }

        private let state = State()
        private let server: ScriptedServer

        var path: String { server.path }
        var batches: [Int] { state.lock.withLock { state.batches } }
        var connections: Int { server.connections }
        /// The held first call is answered 503 (a gateway without a fingerprint key).
        var failFirst: Bool {
            get { state.lock.withLock { state.failFirst } }
            set { state.lock.withLock { state.failFirst = newValue } }
        }
        /// Every answer leaves out its last envelope's entry (a broken gateway).
        var answerShort: Bool {
            get { state.lock.withLock { state.answerShort } }
            set { state.lock.withLock { state.answerShort = newValue } }
        }

        init() throws {
            let state = self.state
            server = try ScriptedServer { server, fd in Self.serve(server, fd, state) }
        }

        func release() { state.gate.signal() }

        func stop() { server.stop() }

        /// The fingerprint the gateway answers for an envelope.
        static func fingerprint(_ envelope: CardEnvelope) -> String {
            let raw = Array(Data(base64Encoded: envelope.sealedKey) ?? Data()).prefix(32)
            return "fp1_0123456789abcdef_" + raw.map { String(format: "%02x", $0) }.joined()
        }

        private static func serve(_ server: ScriptedServer, _ fd: Int32, _ state: State) {
            var buffer: [UInt8] = []
            var first = true
            while let request = server.readRequest(fd, &buffer) {
                let object = (try? JSONSerialization.jsonObject(with: ScriptedServer.body(of: request))) as? [String: Any]
                let envelopes = object?["envelopes"] as? [[String: Any]] ?? []
                state.lock.withLock { state.batches.append(envelopes.count) }
                if first {
                    first = false
                    state.gate.wait()
                    if state.lock.withLock({ state.failFirst }) {
                        ScriptedServer.answer(fd, status: "503 Service Unavailable", body: #"{"error":{"code":"FINGERPRINT_KEY_MISSING","message":"no key"}}"#)
                        continue
                    }
                }
                let short = state.lock.withLock { state.answerShort }
                let data = envelopes.dropLast(short ? 1 : 0).map { e -> String in
                    let raw = Array(Data(base64Encoded: e["key"] as? String ?? "") ?? Data()).prefix(32)
                    let fp = "fp1_0123456789abcdef_" + raw.map { String(format: "%02x", $0) }.joined()
                    return "{\"fingerprint\":\"\(fp)\",\"fingerprints\":[\"\(fp)\"]}"
                }
                ScriptedServer.answer(fd, body: "{\"data\":[\(data.joined(separator: ","))]}")
            }
        }
    }

    static func envelopes(_ n: Int) throws -> [CardEnvelope] {
        let key = try PublicKey(rawBytes: Array(repeating: 8, count: 32))
        let card = try CardData(number: SecureBytes(Array("4242424242424242".utf8)), expiry: CardExpiry(month: 12, year: 2030), cvc: nil)
        return try (0..<n).map { _ in try CardEnvelope.seal(card, to: key, now: CalendarMonth(year: 2026, month: 11)) }
    }

    @Test func requestsThatArriveDuringACallGoTogetherInTheNext() async throws {
        let gateway = try ScriptedGateway()
        defer { gateway.stop() }
        let fingerprinter = GatewayFingerprinter(gatewaySocket: gateway.path, timeout: .seconds(60))
        let all = try Self.envelopes(21)
        let answers = try await withThrowingTaskGroup(of: (Int, [FingerprintAnswer]).self) { group in
            // The first call goes out alone and is held; 20 more requests queue behind it.
            group.addTask { (0, try await fingerprinter.fingerprints(of: [all[0]])) }
            while gateway.batches.isEmpty { try await Task.sleep(for: .milliseconds(5)) }
            for i in 1..<21 { group.addTask { (i, try await fingerprinter.fingerprints(of: [all[i]])) } }
            while fingerprinter.queued < 20 { try await Task.sleep(for: .milliseconds(5)) }
            gateway.release()
            var out: [Int: [FingerprintAnswer]] = [:]
            for try await (i, a) in group { out[i] = a }
            return out
        }
        for (i, envelope) in all.enumerated() {
            let fp = ScriptedGateway.fingerprint(envelope)
            #expect(answers[i] == [.fingerprint(fp, others: [])], "envelope \(i)")
        }
        // One call of 1, then the 20 queued ones in one call (one call at a time by default).
        #expect(gateway.batches == [1, 20])
        #expect(gateway.connections == 1)
        // The calling thread carries its name where `top -H` and `perf` read it.
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        let names = tasks.compactMap { try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8) }
        #expect(names.contains(GatewayFingerprinter.threadName + "\n"))
    }

    @Test func tokenizesQueuedDuringAFailedCallAreAnsweredWithoutAnotherCall() async throws {
        let gateway = try ScriptedGateway()
        gateway.failFirst = true
        defer { gateway.stop() }
        let fingerprinter = GatewayFingerprinter(gatewaySocket: gateway.path, timeout: .seconds(60), retryAfter: .seconds(3600))
        let all = try Self.envelopes(11)
        let outcomes = await withTaskGroup(of: FingerprintFailure?.self) { group in
            group.addTask {
                do throws(FingerprintFailure) { _ = try await fingerprinter.fingerprints(of: [all[0]]) } catch { return error }
                return nil
            }
            while gateway.batches.isEmpty { try? await Task.sleep(for: .milliseconds(5)) }
            for i in 1..<11 {
                group.addTask {
                    do throws(FingerprintFailure) { _ = try await fingerprinter.fingerprints(of: [all[i]]) } catch { return error }
                    return nil
                }
            }
            while fingerprinter.queued < 10 { try? await Task.sleep(for: .milliseconds(5)) }
            gateway.release()
            var out: [FingerprintFailure?] = []
            for await o in group { out.append(o) }
            return out
        }
        // Every caller is told `unavailable`; only the first call reached the gateway.
        #expect(outcomes.count == 11 && outcomes.allSatisfy { if case .unavailable? = $0 { true } else { false } }, "\(outcomes)")
        #expect(gateway.batches == [1])
    }

    @Test func withTwoInFlightASecondCallGoesOutWhileTheFirstIsHeld() async throws {
        let gateway = try ScriptedGateway()
        defer { gateway.stop() }
        let fingerprinter = GatewayFingerprinter(gatewaySocket: gateway.path, timeout: .seconds(60), maxInFlight: 2)
        let all = try Self.envelopes(7)
        let answers = try await withThrowingTaskGroup(of: (Int, [FingerprintAnswer]).self) { group in
            // Each connection's first call is held: the second request starts a second thread and
            // connection, and the 5 after them queue for whichever thread is free first.
            group.addTask { (0, try await fingerprinter.fingerprints(of: [all[0]])) }
            while gateway.batches.count < 1 { try await Task.sleep(for: .milliseconds(5)) }
            group.addTask { (1, try await fingerprinter.fingerprints(of: [all[1]])) }
            while gateway.batches.count < 2 { try await Task.sleep(for: .milliseconds(5)) }
            for i in 2..<7 { group.addTask { (i, try await fingerprinter.fingerprints(of: [all[i]])) } }
            while fingerprinter.queued < 5 { try await Task.sleep(for: .milliseconds(5)) }
            #expect(fingerprinter.running == 2)
            gateway.release()
            gateway.release()
            var out: [Int: [FingerprintAnswer]] = [:]
            for try await (i, a) in group { out[i] = a }
            return out
        }
        for (i, envelope) in all.enumerated() {
            #expect(answers[i] == [.fingerprint(ScriptedGateway.fingerprint(envelope), others: [])], "envelope \(i)")
        }
        #expect(gateway.batches == [1, 1, 5])
        #expect(gateway.connections == 2)
    }

    @Test(.timeLimit(.minutes(1))) func aThreadIdleForIdleExitEndsAndTheNextRequestStartsOne() async throws {
        let gateway = try ScriptedGateway()
        defer { gateway.stop() }
        gateway.release()
        let fingerprinter = GatewayFingerprinter(gatewaySocket: gateway.path, timeout: .seconds(60), idleExit: 0.1)
        let all = try Self.envelopes(2)
        #expect(try await fingerprinter.fingerprints(of: [all[0]]) == [.fingerprint(ScriptedGateway.fingerprint(all[0]), others: [])])
        var waited = 0
        while fingerprinter.running > 0, waited < 6000 {
            try await Task.sleep(for: .milliseconds(10))
            waited += 10
        }
        #expect(fingerprinter.running == 0, "the idle thread did not end")
        #expect(try await fingerprinter.fingerprints(of: [all[1]]) == [.fingerprint(ScriptedGateway.fingerprint(all[1]), others: [])])
        #expect(gateway.batches == [1, 1])
    }

    @Test func anAnswerWithoutAnEntryPerEnvelopeIsUnavailableForTheWholeBatch() async throws {
        let gateway = try ScriptedGateway()
        gateway.answerShort = true
        defer { gateway.stop() }
        gateway.release()
        let fingerprinter = GatewayFingerprinter(gatewaySocket: gateway.path, timeout: .seconds(60), retryAfter: .seconds(3600))
        let all = try Self.envelopes(3)
        do throws(FingerprintFailure) {
            let answers = try await fingerprinter.fingerprints(of: all)
            Issue.record("a short answer was taken: \(answers)")
        } catch {
            guard case .unavailable(let why) = error else { Issue.record("\(error)"); return }
            #expect(why.contains("one entry per envelope"), "\(why)")
        }
        // The gateway is then taken as down: a tokenize is answered without a call.
        do throws(FingerprintFailure) {
            _ = try await fingerprinter.fingerprints(of: [all[0]])
            Issue.record("answered")
        } catch {
            guard case .unavailable(let why) = error else { Issue.record("\(error)"); return }
            #expect(why.contains("a moment ago"), "\(why)")
        }
        #expect(gateway.batches == [3])
    }

    @Test func aFillersBatchIsSplitAtMaxBatchAndKeepsItsOrder() async throws {
        let gateway = try ScriptedGateway()
        defer { gateway.stop() }
        gateway.release()
        let fingerprinter = GatewayFingerprinter(gatewaySocket: gateway.path, timeout: .seconds(60), maxBatch: 8)
        let all = try Self.envelopes(19)
        let answers = try await fingerprinter.fingerprints(of: all)
        #expect(answers == all.map { .fingerprint(ScriptedGateway.fingerprint($0), others: []) })
        #expect(gateway.batches == [8, 8, 3])
        #expect(gateway.connections == 1)
    }

    @Test func aGatewayThatIsDownIsUnavailableThenNotAskedForAWhile() async throws {
        let path = NSTemporaryDirectory() + "fp-none-\(getpid()).sock"
        // An hour: a test process under load may take long between the two calls.
        let fingerprinter = GatewayFingerprinter(gatewaySocket: path, timeout: .seconds(1), retryAfter: .seconds(3600))
        let one = try Self.envelopes(1)
        for attempt in 0..<2 {
            do throws(FingerprintFailure) {
                _ = try await fingerprinter.fingerprints(of: one)
                Issue.record("answered without a gateway")
            } catch {
                guard case .unavailable(let why) = error else { return }
                // The first call tried the socket; the second was not made.
                #expect(attempt == 0 ? why.contains("the gateway") : why.contains("a moment ago"), "\(why)")
            }
        }
    }
}
