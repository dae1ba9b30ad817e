import Foundation
import Testing

/// Settlement seen from the sidecar's API, against the recording processor of the payment drill
/// (Tests/Interop/recording_processor.py) through the relay: a payment whose answer is lost is
/// `processing` (202) and settles later, and a checkout session paid by it follows it.
@Suite(.serialized, .ownThread) struct SettlementCLITests {
    /// The drill's stand-in processor: idempotent by key, with faults switched at run time.
    final class RecordingProcessor: @unchecked Sendable {
        let process = Process()
        let port: Int

        /// Its records in `dir`/processor.sqlite (they outlive a restart); `latency` LO:HI seconds per
        /// charge, half before it is decided and recorded, half after.
        init(dir: String, listen: Int = 0, latency: String = "0:0") throws {
            port = try startStandIn(
                process, script: "recording_processor.py", ["--db", dir + "/processor.sqlite", "--port", "\(listen)", "--latency", latency])
        }

        /// The charges the processor recorded (`GET /_records`).
        func records() throws -> [[String: Any]] {
            let r = try run("/usr/bin/env", ["curl", "-s", "http://127.0.0.1:\(port)/_records"])
            return (try? JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [[String: Any]]) ?? []
        }

        func stop() {
            guard process.isRunning else { return }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }

        deinit { stop() }
    }

    /// The processor records the charge, then dies before it answers: the session's payment is
    /// answered 202 `processing` (the gateway's in-call re-sends and status queries reach nobody)
    /// and the session stays `paying`; once the processor is back, the gateway finds the charge
    /// (its status query) and the sidecar's reconciler records it: the payment succeeds, the
    /// session is `completed`, a replay of the key gets the settled payment, and the processor
    /// charged the payment id once.
    @Test func aSessionFollowsItsPaymentWhenTheLostAnswerIsSettled() throws {
        let s = try PaymentsCLITests.Stack()
        var processor = try RecordingProcessor(dir: s.dir, latency: "1.6:1.6")
        defer { processor.stop() }
        #expect(processor.port > 0)
        try s.startGateway(
            processor: [
                "--processor", "relay:" + repositoryRoot.appendingPathComponent("Tests/Interop/recording-relay.json").path,
                "--store", "sqlite:\(s.dir)/gateway-ledger.sqlite", "--settle-interval", "0.2",
            ],
            environment: ["RELAY_BASE_URL": "http://127.0.0.1:\(processor.port)"])
        try s.startSidecar(extra: ["--reconcile-after", "1"])
        func json(_ text: String) -> [String: Any] { (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:] }
        let (created, sessionBody) = try s.curl(s.sidecarSocket, "POST", "/v1/sessions", #"{"amount":2599,"currency":"EUR"}"#)
        #expect(created == 201, "\(sessionBody)")
        let id = try #require(json(sessionBody)["id"] as? String)
        let key = "sess-" + UUID().uuidString
        let body = #"{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2030,"cvc":"123"},"idempotency_key":"\#(key)"}"#

        // The charge is recorded 0.8 s into the request and answered at 1.6 s: killed at 1.2 s.
        let first = processor
        let killer = Thread {
            usleep(1_200_000)
            first.stop()
        }
        killer.start()
        let (lost, lostBody) = try s.curl(s.sidecarSocket, "POST", "/v1/sessions/\(id)/pay", body)
        #expect(lost == 202 && json(lostBody)["status"] as? String == "processing", "\(lostBody)")
        let paymentID = try #require(json(lostBody)["id"] as? String)
        let paying = json(try s.curl(s.sidecarSocket, "GET", "/v1/sessions/\(id)").1)
        #expect(paying["status"] as? String == "paying" && paying["payment"] as? String == paymentID, "\(paying)")
        // A replay while it is being settled: the same payment, not SESSION_USED.
        let (early, earlyBody) = try s.curl(s.sidecarSocket, "POST", "/v1/sessions/\(id)/pay", body)
        #expect(early == 202 && json(earlyBody)["id"] as? String == paymentID, "\(earlyBody)")

        processor = try RecordingProcessor(dir: s.dir, listen: first.port)
        #expect(processor.port == first.port)
        var session: [String: Any] = [:]
        for _ in 0..<120 {
            session = json(try s.curl(s.sidecarSocket, "GET", "/v1/sessions/\(id)").1)
            if session["status"] as? String != "paying" { break }
            usleep(250_000)
        }
        #expect(session["status"] as? String == "completed" && session["payment"] as? String == paymentID, "\(session)")
        let payment = json(try s.curl(s.sidecarSocket, "GET", "/v1/payments/\(paymentID)").1)
        #expect(payment["status"] as? String == "succeeded", "\(payment)")
        let (replay, replayBody) = try s.curl(s.sidecarSocket, "POST", "/v1/sessions/\(id)/pay", body)
        #expect(replay == 200 && json(replayBody)["id"] as? String == paymentID && json(replayBody)["status"] as? String == "succeeded", "\(replayBody)")
        let charged = try processor.records().filter { $0["payment_id"] as? String == paymentID }
        #expect(charged.count == 1 && charged.first?["status"] as? String == "succeeded", "\(charged)")
    }
}
