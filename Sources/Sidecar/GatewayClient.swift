import Foundation
import GatewayAPI
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import Tokenizer
import VaultCrypto

/// The sidecar's side of the gateway adapter's socket (`vault serve --gateway PATH`).
///
/// It sends sealed envelopes only; it cannot open them. A failure is one case per cause; what is
/// known about the charge (`nothingSent`) decides what the sidecar may do next: drop the intent
/// and let the same idempotency key be tried again, keep the payment `processing` until it is
/// reconciled with `authorization(of:)`, or record a refusal (final).
public struct GatewayClient: Sendable {
    public enum Failure: Error, Sendable, Equatable {
        /// The gateway's socket cannot be reached (no connection was made, or the one taken was
        /// found closed before a byte of the request was written to it): nothing was sent.
        case unreachable(String)
        /// Connecting to the gateway timed out: nothing was sent.
        case connectTimedOut
        /// The gateway refused this sidecar (403 `PEER_NOT_ALLOWED`): nothing was sent.
        case peerRefused
        /// The gateway answered that the processor was not reached (503 `GATEWAY_UNAVAILABLE`):
        /// nothing was charged.
        case processorUnavailable(String)
        /// Sent; no answer came within the call's timeout.
        case timedOut(String)
        /// Sent; the connection closed before the answer (e.g. a kept-alive connection the
        /// gateway closed as the request went out).
        case connectionClosed(String)
        /// Sent; the call failed midway for another reason.
        case failedMidway(String)
        /// The gateway answered that the outcome is not known yet (504): it settles it.
        case outcomeUnknown(ErrorCode, String)
        /// An answer the sidecar cannot read (not an outcome, an unexpected status).
        case badAnswer(String)
        /// The gateway refused the request itself with a coded error (an envelope it would not
        /// open, a 3-D Secure result): final. A code this sidecar does not know is `GATEWAY_ERROR`.
        case refused(ErrorCode, String)

        /// Whether the request certainly never reached a processor: nothing was charged, the
        /// intent can be dropped and the same idempotency key tried again.
        public var nothingSent: Bool {
            switch self {
            case .unreachable, .connectTimedOut, .peerRefused, .processorUnavailable: true
            case .timedOut, .connectionClosed, .failedMidway, .outcomeUnknown, .badAnswer, .refused: false
            }
        }

        /// Whether the request may have reached a processor and no answer says what happened: the
        /// payment stays open until the gateway's recorded outcome is known.
        public var answerLost: Bool {
            if case .refused = self { return false }
            return !nothingSent
        }

        /// For people and logs.
        public var reason: String {
            switch self {
            case .unreachable(let why), .processorUnavailable(let why), .timedOut(let why), .connectionClosed(let why),
                 .failedMidway(let why), .outcomeUnknown(_, let why), .badAnswer(let why):
                why
            case .connectTimedOut: "connecting to the gateway timed out"
            case .peerRefused: "the gateway refused this sidecar (PEER_NOT_ALLOWED): check its --allow-uid"
            case .refused(let code, let message): "\(code): \(message)"
            }
        }
    }

    /// The gateway's answer to an authorization (GatewayAPI).
    public typealias Outcome = GatewayOutcome

    /// What the gateway knows of a payment id (`GET /v1/authorizations/{id}`; GatewayAPI).
    public typealias Authorization = GatewayAuthorization

    public let socketPath: String
    /// How long one authorization may take before its outcome counts as unknown.
    public var timeout: TimeAmount = .seconds(30)

    /// The HTTP client of `socketPath` (one per socket for the process).
    let http: GatewayHTTP

    public init(socketPath: String) {
        self.socketPath = socketPath
        http = Self.http(for: socketPath)
    }

    /// A client over a given HTTP client (tests: one on an event-loop group of their own).
    init(socketPath: String, http: GatewayHTTP) {
        self.socketPath = socketPath
        self.http = http
    }

    /// One HTTP client per gateway socket for the process (`GatewayHTTP`): a short connect
    /// timeout tells "not reached" apart quickly, and a failed connect fails its request at once
    /// (a local socket that refuses is down: nothing was sent), so the next request reaches a
    /// restarted gateway without waiting out a backoff.
    static func http(for socketPath: String) -> GatewayHTTP {
        clients.withLockedValue { clients in
            if let client = clients[socketPath] { return client }
            let client = GatewayHTTP(socketPath: socketPath, connectTimeout: .seconds(2))
            clients[socketPath] = client
            return client
        }
    }

    private static let clients = NIOLockedValueBox<[String: GatewayHTTP]>([:])

    /// Asks the gateway to charge `envelopeJSON` (a sealed card envelope v1).
    /// The caller's idempotency key never goes to the gateway: the payment id is the processor's
    /// idempotency key (unique per payment, the same on every retry).
    public func authorize(
        paymentID: String, amount: Int, currency: String, envelopeJSON: String, capture: Bool = true
    ) async throws(Failure) -> Outcome {
        let body = AuthorizeRequest.json(paymentID: paymentID, amount: amount, currency: currency, envelopeJSON: envelopeJSON, capture: capture)
        let (status, text) = try await call("POST", "/v1/authorize", body: body)
        if status == 200 { return try Self.outcome(text) }
        let (code, message) = Self.error(text)
        if status == 504 { throw .outcomeUnknown(code, "the processor's answer was lost") }
        if status == 503 || code == .gatewayUnavailable { throw .processorUnavailable("the gateway could not reach the processor") }
        if status == 403 { throw .peerRefused }
        throw .refused(code, message)
    }

    /// Completes a 3-D Secure payment with the result JWT (validated by the gateway).
    public func confirm(paymentID: String, threeDSResult jwt: String) async throws(Failure) -> Outcome {
        let body = ThreeDSResult.json(String(jwt.unicodeScalars.filter { $0.isASCII && $0 != "\"" && $0 != "\\" && $0.value >= 32 }.map(Character.init)))
        let (status, text) = try await call("POST", "/v1/authorizations/\(paymentID)/confirm", body: body)
        if status == 200 { return try Self.outcome(text) }
        let (code, message) = Self.error(text)
        if status == 503 { throw .processorUnavailable("the gateway could not reach the processor") }
        throw .refused(code, message)
    }

    /// The sandbox ACS: completes a challenge with `action`; answers the result JWT.
    public func completeChallenge(transactionID: String, action: String) async throws(Failure) -> String {
        let safeAction = String(action.unicodeScalars.filter { ("A"..."Z").contains($0) }.prefix(16).map(Character.init))
        let (status, text) = try await call("POST", "/v1/sandbox/acs/\(transactionID)", body: "{\"action\":\"\(safeAction)\"}")
        guard status == 200 else {
            let (code, message) = Self.error(text)
            throw .refused(code, message)
        }
        guard let jwt = GatewayJSON.threeDSResult(text) else {
            throw .badAnswer("the ACS answered no result")
        }
        return jwt
    }

    /// The answers in the gateway's `POST /v1/fingerprints` answer (`status`, `text`) to a batch
    /// of `count` envelopes (JSON v1, without their CVC field), in order. The gateway opens each,
    /// checks it, and answers only the keyed hash of its PAN, named by the fingerprint key's kid,
    /// and the card's fingerprints under the other keys it holds during a rotation; the sidecar
    /// never holds a fingerprint key (docs/key-files.md). `GatewayFingerprinter` makes the call.
    /// - Throws: `.refused` for an error answer, `.badAnswer` for one that is not one entry per envelope.
    static func fingerprintAnswers(status: Int, text: String, count: Int) throws(Failure) -> [FingerprintAnswer] {
        guard status == 200 else {
            let (code, message) = Self.error(text)
            throw .refused(code, message)
        }
        guard let entries = FingerprintBatch.entries(json: text, count: count) else {
            throw .badAnswer("the gateway's fingerprint answer is not one entry per envelope")
        }
        return entries.map { entry in
            switch entry {
            // Named (`fp1_<fkid>_<hex>`), or the bare hex of a gateway older than the named form
            // (stored as it is; `vault rewrap --fingerprints` names it later).
            case .fingerprint(let fp, let all) where FingerprintAnswer.isWellFormed(fp) && all.allSatisfy(FingerprintAnswer.isWellFormed):
                .fingerprint(fp, others: all.filter { $0 != fp })
            case .fingerprint: .refused(code: .gatewayError, message: "the gateway refused the envelope")
            case .refused(let code, let message): .refused(code: code, message: message)
            case .withheld: .withheld
            }
        }
    }

    /// What the gateway knows of a payment id.
    public func authorization(of paymentID: String) async throws(Failure) -> Authorization {
        let (status, text) = try await call("GET", "/v1/authorizations/" + paymentID, body: nil)
        guard let answer = Authorization(status: status, json: text) else {
            if status == 200 { throw .badAnswer("the gateway's answer is not an outcome") }
            throw .badAnswer("the gateway answered \(status)")
        }
        return answer
    }

    /// Whether the gateway answers its liveness route (`GET /v1/health`) with 200 within
    /// `timeout`: the sidecar's readiness check of its gateway. Sends no card data.
    /// - Throws: `.unreachable`, `.connectTimedOut`, `.timedOut`, `.peerRefused` (403), or
    ///   `.refused` with the gateway's code for any other answer.
    public func checkHealth(timeout: TimeAmount = .seconds(2)) async throws(Failure) {
        var probe = self
        probe.timeout = timeout
        let (status, text) = try await probe.call("GET", "/v1/health", body: nil)
        guard status == 200 else {
            if status == 403 { throw .peerRefused }
            let (code, message) = Self.error(text)
            throw .refused(code, "the gateway answered \(status): \(message)")
        }
    }

    func call(_ method: String, _ path: String, body: String?) async throws(Failure) -> (Int, String) {
        // The path is ours (routes and ids); anything but visible ASCII is never sent.
        guard !path.isEmpty, path.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { throw .unreachable("bad gateway request path") }
        do throws(GatewayHTTP.Failure) {
            let (status, answer) = try await http.call(HTTPMethod(rawValue: method), path, body: body, timeout: timeout)
            return (status, String(buffer: answer))
        } catch {
            throw Self.classify(error)
        }
    }

    /// What a failed call means for the charge (`nothingSent`, `answerLost`).
    static func classify(_ failure: GatewayHTTP.Failure) -> Failure {
        switch failure {
        case .connect(let error):
            if let io = error as? IOError, [ENOENT, ECONNREFUSED, EACCES, ENOTSOCK].contains(io.errnoCode) {
                return .unreachable("the gateway's socket cannot be reached (errno \(io.errnoCode))")
            }
            return .unreachable("the gateway's socket cannot be reached")
        case .connectTimedOut: return .connectTimedOut
        case .notSent: return .unreachable("the gateway closed the connection before the request was sent")
        case .closedBeforeAnswer: return .connectionClosed("the gateway call failed midway (the connection closed before the whole answer)")
        case .timedOut: return .timedOut("the gateway call failed midway (no answer within the call's timeout)")
        case .tooLarge: return .failedMidway("the gateway call failed midway (an answer over 64 KiB)")
        case .failed(let error): return .failedMidway("the gateway call failed midway (\(type(of: error)))")
        }
    }

    static func outcome(_ text: String) throws(Failure) -> Outcome {
        guard let outcome = Outcome(json: text) else { throw .badAnswer("the gateway's answer is not an outcome") }
        return outcome
    }

    /// The code and message of the gateway's `{"error":{…}}` answer.
    static func error(_ text: String) -> (ErrorCode, String) { GatewayJSON.error(text) }
}
