import Foundation
import Hummingbird
import Logging
import Money
import SocketHTTP
import VaultCrypto
import VaultOpen

/// The gateway adapter's API, for the sidecar only (its own Unix socket, docs/threat-model.md):
///
/// `POST /v1/authorize` `{"payment_id":"pay_…","amount":1000,"currency":"EUR","envelope":{…v1…}}`
/// → 200 `{"status":"succeeded|declined|requires_action","reference","decline_code","next_action"}`.
/// The envelope is opened here and nowhere else, its metadata re-derived and checked, the card
/// handed to the processor, and the plaintext wiped when the call returns. Answers carry the
/// outcome only, never card data.
///
/// When the outcome is not known (docs/errors.md "Unknown outcomes"):
/// - 503 `GATEWAY_UNAVAILABLE`: nothing was charged (no connection was made on the payment id's
///   first send, or a 5xx from a processor whose template says `server_errors: not_charged`);
///   the ledger has no row for it, the same payment id may be sent again.
/// - 504 `GATEWAY_UNAVAILABLE`: sent, the answer lost or unclear (a timeout, a dropped
///   connection, a 5xx, a 3xx, an unreadable answer) and not settled within the call: the
///   gateway settles it (status query, re-send on a re-post, deadline); ask
///   `GET /v1/authorizations/{payment_id}`.
/// - 504 `AUTHORIZATION_IN_PROGRESS`: another call (on any gateway of the store) is sending it or
///   asking about it now; never sent twice at once.
/// - 504 `AUTHORIZATION_PENDING`: being settled, nothing to do with this call now (the body is
///   the pending state below).
/// - 200 `{"status":"unknown",…}`: the settlement deadline passed (the shape below).
///
/// `GET /v1/authorizations/{payment_id}`: what the gateway knows of a payment id.
/// - 200 `{"status":"succeeded|declined|requires_action",…}`: the outcome (as `POST /v1/authorize`
///   answers it).
/// - 404 `AUTHORIZATION_NOT_FOUND`: no ledger row: never sent, or the processor said it never
///   received it. Nothing was charged.
/// - 409 `AUTHORIZATION_PENDING`: sent, outcome not known yet, being settled:
///   `{"error":{"code":"AUTHORIZATION_PENDING","message"},"status":"pending","resend":true|false,
///   "status_query":true|false,"in_flight":true|false,"attempts":N,"next_try_at":"<ISO 8601>",
///   "deadline_at":"<ISO 8601>","reason":"…"}`. With `resend` true, re-posting the payment
///   (`POST /v1/authorize`, same payment id, amount, currency and envelope, once `next_try_at` has
///   passed and `in_flight` is false) re-sends it with the same processor idempotency key: how a
///   template without a status query settles. With `status_query`, the gateway asks the processor
///   by itself: just ask again later.
/// - 200 `{"status":"unknown","reason":"…","attempts":N,"deadline_at":"<ISO 8601>"}`: still not
///   known at the deadline: an operator settles it (`vault payments settle`).
public struct GatewayRoutes: Sendable {
    public static let maxBodyBytes = 16 * 1024
    /// The audit log's action per route (docs/audit-log.md).
    public static let auditedActions: [String: String] = [
        "POST /v1/authorize": "authorize", "GET /v1/authorizations/{payment}": "payment_read",
        "POST /v1/authorizations/{payment}/confirm": "confirm", "POST /v1/fingerprints": "fingerprint",
    ]
    /// Most envelopes one `POST /v1/fingerprints` takes.
    public static let maxFingerprintBatch = 64

    public static let documentedRoutes = [
        "POST /v1/authorize", "GET /v1/authorizations/{payment_id}", "POST /v1/authorizations/{payment_id}/confirm",
        "POST /v1/sandbox/acs/{transaction_id}", "POST /v1/fingerprints", "GET /v1/keys", "GET /v1/health", "GET /metrics",
    ]

    let openers: Openers
    var opener: EnvelopeOpener { openers.current }
    /// What `GET /metrics` serves.
    public let metrics: GatewayMetrics
    let processor: any PaymentProcessor
    /// The sandbox's ACS (challenge pages), when the processor is the sandbox.
    let sandbox: SandboxProcessor?

    /// Routes over one opener; `GET /metrics` serves the relay's metrics (its settlement counters)
    /// when the processor is a relay.
    public init(opener: EnvelopeOpener, processor: any PaymentProcessor) {
        self.init(openers: Openers(opener), processor: processor, metrics: (processor as? RelayProcessor)?.metrics ?? GatewayMetrics())
    }

    /// Routes over a reloadable opener (SIGHUP swaps the keys and the key ring).
    public init(openers: Openers, processor: any PaymentProcessor, metrics: GatewayMetrics = GatewayMetrics()) {
        self.openers = openers
        self.metrics = metrics
        self.processor = processor
        self.sandbox = processor as? SandboxProcessor
    }

    public func register<Context: RequestContext>(on router: Router<Context>) {
        router.get("/v1/health") { _, _ in JSONOut.response(.ok, "{\"status\":\"ok\",\"processor\":\"\(processor.name)\"}") }
        router.get("/metrics") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: self.metrics.exposition())))
        }
        // The kids this gateway opens now: `vault keys rotate` waits for the new kid here before
        // it promotes it, so nothing is sealed to a key the gateway cannot open yet.
        router.get("/v1/keys") { _, _ in
            let ring = opener.ring
            var out = "{\"primary\":"
            if let primary = ring.pinned?.primary { JSONOut.string(primary.rawValue, into: &out) } else { out += "null" }
            out += ",\"opens\":["
            out += ring.openingKids.map { "\"\($0.rawValue)\"" }.joined(separator: ",")
            out += "]}"
            return JSONOut.response(.ok, out)
        }
        router.post("/v1/authorize") { request, context in try await self.authorize(request, logger: context.logger) }
        router.post("/v1/fingerprints") { request, _ in try await self.fingerprints(request) }
        // What is known of a payment id (see the type's documentation for the answers).
        router.get("/v1/authorizations/:payment") { _, context in
            let id = context.parameters.get("payment") ?? ""
            let state: AuthorizationState?
            do throws(ProcessorError) { state = try await processor.authorization(of: id) } catch {
                throw APIError(.gatewayUnavailable, "the processor's ledger could not be read")
            }
            switch state {
            case nil:
                throw APIError(.authorizationNotFound, "the processor has no authorization for this payment id: nothing was charged")
            case .outcome(let outcome)?:
                return JSONOut.response(.ok, Self.json(outcome))
            case .pending(let pending)?:
                return JSONOut.response(.conflict, Self.json(pending))
            case .unknown(let reason, let attempts, let deadline)?:
                return JSONOut.response(.ok, Self.unknownJSON(reason: reason, attempts: attempts, deadline: deadline))
            }
        }
        // `{"three_ds_result":"<JWT>"}`: completes a payment that required 3-D Secure.
        router.post("/v1/authorizations/:payment/confirm") { request, context in
            let id = context.parameters.get("payment") ?? ""
            let jwt = try await Self.stringField("three_ds_result", of: request, maxBytes: 8192)
            let outcome = try await Self.mapped { () async throws(ProcessorError) in try await processor.confirm(paymentID: id, threeDSResult: jwt) }
            context.logger.info("3DS confirmed", metadata: ["payment": "\(id)", "status": "\(outcome.status)"])
            return JSONOut.response(.ok, Self.json(outcome))
        }
        // The sandbox ACS: `{"action":"SUCCESS"}` completes a challenge and answers its result JWT.
        router.post("/v1/sandbox/acs/:transaction") { request, context in
            guard let sandbox else { throw APIError(.notSandbox, "only the sandbox processor has an ACS") }
            let action = try await Self.stringField("action", of: request, maxBytes: 16)
            let id = context.parameters.get("transaction") ?? ""
            let jwt = try await Self.mapped { () async throws(ProcessorError) in try await sandbox.completeChallenge(transactionID: id, action: action) }
            var out = "{\"three_ds_result\":"
            JSONOut.string(jwt, into: &out)
            return JSONOut.response(.ok, out + "}")
        }
    }

    /// Processor errors of a 3-D Secure step as coded answers.
    static func mapped<T>(_ body: () async throws(ProcessorError) -> T) async throws(APIError) -> T {
        do throws(ProcessorError) {
            return try await body()
        } catch {
            switch error {
            case .refused(let code, let message): throw APIError(code, message)
            case .unavailable: throw APIError(.gatewayUnavailable, "the processor could not be reached")
            default: throw APIError(error.code, error.reason)
            }
        }
    }

    /// A body `{"<name>":"<string>"}` with nothing else.
    static func stringField(_ name: String, of request: Request, maxBytes: Int) async throws -> String {
        guard (request.headers[.contentType] ?? "").lowercased().hasPrefix("application/json") else {
            throw APIError(.unsupportedMediaType, "send Content-Type: application/json")
        }
        let body: ByteBuffer
        do { body = try await request.body.collect(upTo: maxBytes + 256) } catch {
            throw APIError(.bodyTooLarge, "the request body is too large")
        }
        return try body.withUnsafeReadableBytes { raw throws(APIError) -> String in
            do throws(VaultError) {
                var r = JSONReader(raw, errorCode: .requestMalformed, maxDepth: 2)
                var value: String?
                try r.readObject { (r, key) throws(VaultError) in
                    guard key == name else { throw VaultError(.requestFieldUnknown, "the body has only \(name)") }
                    value = try r.readString(maxBytes: maxBytes)
                }
                try r.finish()
                guard let value else { throw VaultError(.requestFieldMissing, "\(name) is missing", field: name) }
                return value
            } catch {
                throw APIError(error)
            }
        }
    }

    struct Parsed {
        var paymentID: String
        var amount: Int
        var currency: Currency
        var envelope: CardEnvelope
    }

    func authorize(_ request: Request, logger: Logger) async throws -> Response {
        guard (request.headers[.contentType] ?? "").lowercased().hasPrefix("application/json") else {
            throw APIError(.unsupportedMediaType, "send Content-Type: application/json")
        }
        let body: ByteBuffer
        do { body = try await request.body.collect(upTo: Self.maxBodyBytes) } catch {
            throw APIError(.bodyTooLarge, "a request body is at most \(Self.maxBodyBytes) bytes")
        }
        let parsed = try body.withUnsafeReadableBytes { raw throws(APIError) in try Self.parse(raw) }
        if let note = AuditNote.current {
            note.payment = parsed.paymentID
            note.kid = parsed.envelope.kid.rawValue
            note.envelope = parsed.envelope.id
        }
        let authorized: Result<AuthorizationOutcome, ProcessorError>
        do {
            // The opened card lives in SecureBytes for this scope only; released (wiped) after.
            let card: OpenedCard
            do throws(VaultError) { card = try opener.open(parsed.envelope) } catch {
                metrics.opened(error.code.rawValue)
                throw APIError(error)
            }
            metrics.opened("ok")
            let start = ContinuousClock.now
            do throws(ProcessorError) {
                let outcome = try await processor.authorize(
                    AuthorizationRequest(paymentID: parsed.paymentID, amount: parsed.amount, currency: parsed.currency),
                    card: card)
                metrics.authorized(status: "\(outcome.status)", duration: ContinuousClock.now - start)
                authorized = .success(outcome)
            } catch {
                authorized = .failure(error)
            }
        }
        let outcome: AuthorizationOutcome
        switch authorized {
        case .success(let o):
            outcome = o
        case .failure(.paymentIDReused):
            throw APIError(.paymentIDReused, "this payment id was already used with another amount, currency or card")
        case .failure(.inProgress):
            // 504 like an unknown outcome: the sidecar keeps the payment processing and reconciles it.
            metrics.processorFailed("in_progress")
            logger.notice("authorization already in progress", metadata: ["payment": "\(parsed.paymentID)"])
            throw APIError(.authorizationInProgress, "another call is sending this payment id to the processor or asking about it now; it is not sent again")
        case .failure(.pending(let pending)):
            metrics.processorFailed("pending")
            logger.notice("authorization pending settlement", metadata: ["payment": "\(parsed.paymentID)", "reason": "\(pending.reason)"])
            return JSONOut.response(.gatewayTimeout, Self.json(pending))
        case .failure(.deadlinePassed(let reason, let attempts, let deadline)):
            metrics.processorFailed("unknown_past_deadline")
            // The error line operators alert on is the settler's, once per payment id.
            logger.notice("answered unknown: past the settlement deadline", metadata: ["payment": "\(parsed.paymentID)", "reason": "\(reason)"])
            return JSONOut.response(.ok, Self.unknownJSON(reason: reason, attempts: attempts, deadline: deadline))
        case .failure(.refused(let code, let message)):
            metrics.processorFailed("refused")
            logger.error("relay refused to send", metadata: ["payment": "\(parsed.paymentID)", "code": "\(code)"])
            throw APIError(code, message)
        case .failure(.outcomeUnknown(let reason)):
            metrics.processorFailed("unknown")
            logger.error("processor outcome unknown", metadata: ["payment": "\(parsed.paymentID)", "reason": "\(reason)"])
            throw APIError(.gatewayUnavailable, status: 504, "the processor's answer was lost or unclear; the outcome is not known yet and is being settled (GET /v1/authorizations/\(parsed.paymentID))")
        case .failure(.unavailable(let reason)):
            metrics.processorFailed("unavailable")
            logger.warning("processor unavailable", metadata: ["payment": "\(parsed.paymentID)", "reason": "\(reason)"])
            throw APIError(.gatewayUnavailable, "nothing was charged (\(reason)); retry with the same payment id")
        }
        logger.info("authorized", metadata: [
            "payment": "\(parsed.paymentID)", "status": "\(outcome.status)", "processor": "\(processor.name)",
            "brand": "\(parsed.envelope.card.brand.rawValue)", "last4": "\(parsed.envelope.card.last4)",
        ])
        return JSONOut.response(.ok, Self.json(outcome))
    }

    /// `POST /v1/fingerprints` `{"envelopes":[{…v1…}, …]}` (at most `maxFingerprintBatch`) →
    /// 200 `{"data":[{"fingerprint":"<64 hex>"} | {"error":{"code","message"}}, …]}`, in order.
    ///
    /// The sidecar's way to a token's fingerprint (docs/threat-model.md): each envelope is opened
    /// and checked exactly as for a payment (a tampered envelope, or metadata that does not match
    /// the card, is refused here, at tokenize time), and only the keyed hash of its PAN goes back.
    /// 503 `FINGERPRINT_KEY_MISSING` when this gateway has no `fingerprint.fk`.
    func fingerprints(_ request: Request) async throws -> Response {
        guard (request.headers[.contentType] ?? "").lowercased().hasPrefix("application/json") else {
            throw APIError(.unsupportedMediaType, "send Content-Type: application/json")
        }
        let limit = Self.maxFingerprintBatch * Self.maxBodyBytes
        let body: ByteBuffer
        do { body = try await request.body.collect(upTo: limit) } catch {
            throw APIError(.bodyTooLarge, "a fingerprint request is at most \(limit) bytes")
        }
        let envelopes = try body.withUnsafeReadableBytes { raw throws(APIError) -> [CardEnvelope] in
            do throws(VaultError) {
                var r = JSONReader(raw, errorCode: .requestMalformed, maxDepth: 8)
                var found: [CardEnvelope]?
                try r.readObject { (r, key) throws(VaultError) in
                    guard key == "envelopes" else { throw VaultError(.requestFieldUnknown, "a fingerprint request has only envelopes") }
                    var list: [CardEnvelope] = []
                    try r.readArray { (r) throws(VaultError) in
                        guard list.count < Self.maxFingerprintBatch else {
                            throw VaultError(.requestFieldInvalid, "at most \(Self.maxFingerprintBatch) envelopes", field: "envelopes")
                        }
                        list.append(try CardEnvelope.parse(from: &r))
                    }
                    found = list
                }
                try r.finish()
                guard let found else { throw VaultError(.requestFieldMissing, "envelopes is missing", field: "envelopes") }
                return found
            } catch {
                throw APIError(error)
            }
        }
        let opener = self.opener
        guard opener.fingerprintKey != nil else {
            throw APIError(.fingerprintKeyMissing, "this gateway has no fingerprint key: make one with `vault keygen --fingerprint --out DIR` in its keys directory")
        }
        var out = "{\"data\":["
        var answered = 0
        defer { metrics.fingerprinted(answered) }
        for (i, envelope) in envelopes.enumerated() {
            if i > 0 { out += "," }
            do throws(VaultError) {
                let fp = try opener.fingerprint(of: envelope)
                metrics.opened("ok")
                answered += 1
                out += "{\"fingerprint\":\"\(fp)\"}"
            } catch {
                metrics.opened(error.code.rawValue)
                out += "{\"error\":{\"code\":"
                JSONOut.string(error.code.rawValue, into: &out)
                out += ",\"message\":"
                JSONOut.string(error.message, into: &out)
                out += "}}"
            }
        }
        return JSONOut.response(.ok, out + "]}")
    }

    static func parse(_ raw: UnsafeRawBufferPointer) throws(APIError) -> Parsed {
        do throws(VaultError) {
            var r = JSONReader(raw, errorCode: .requestMalformed, maxDepth: 8)
            var paymentID: String?, amount: Int?, currency: Currency?, envelope: CardEnvelope?
            try r.readObject { (r, key) throws(VaultError) in
                switch key {
                case "payment_id":
                    let id = try r.readString(maxBytes: 64)
                    guard id.hasPrefix("pay_"), id.utf8.allSatisfy({ (48...57).contains($0) || (97...122).contains($0) || $0 == 95 }) else {
                        throw VaultError(.requestFieldInvalid, "payment_id is pay_ and lower-case letters or digits", field: "payment_id")
                    }
                    paymentID = id
                case "amount":
                    let value = try r.readInt()
                    guard (1...Currency.maximumAmount).contains(value) else {
                        throw VaultError(.amountInvalid, "amount is a positive integer in minor units, at most \(Currency.maximumAmount)", field: "amount")
                    }
                    amount = value
                case "currency":
                    let code = try r.readString(maxBytes: 8)
                    guard let c = Currency(code) else {
                        throw VaultError(.currencyInvalid, "currency is an ISO 4217 code such as EUR or USD", field: "currency")
                    }
                    currency = c
                case "envelope": envelope = try CardEnvelope.parse(from: &r)
                case "idempotency_key":
                    // Accepted for compatibility and ignored: the caller's key is scoped to the
                    // caller and never used here (the payment id is the processor's key).
                    _ = try r.readString(maxBytes: 255)
                default: throw VaultError(.requestFieldUnknown, "an authorization has payment_id, amount, currency, envelope and idempotency_key")
                }
            }
            try r.finish()
            guard let paymentID else { throw VaultError(.requestFieldMissing, "payment_id is missing", field: "payment_id") }
            guard let amount else { throw VaultError(.requestFieldMissing, "amount is missing", field: "amount") }
            guard let currency else { throw VaultError(.requestFieldMissing, "currency is missing", field: "currency") }
            guard let envelope else { throw VaultError(.requestFieldMissing, "envelope is missing", field: "envelope") }
            return Parsed(paymentID: paymentID, amount: amount, currency: currency, envelope: envelope)
        } catch {
            throw APIError(error)
        }
    }

    /// A pending settlement: 409 to `GET /v1/authorizations/{payment_id}`, 504 to a re-post.
    public static func json(_ p: PendingAuthorization) -> String {
        var out = "{\"error\":{\"code\":\"\(ErrorCode.authorizationPending.rawValue)\",\"message\":"
        JSONOut.string(
            p.inFlight ? "this payment id is being sent or asked about now; its outcome is not known yet"
                : "this payment id was sent and its outcome is not known yet; it is being settled", into: &out)
        out += "},\"status\":\"pending\",\"resend\":\(p.resend),\"status_query\":\(p.statusQuery),\"in_flight\":\(p.inFlight)"
        out += ",\"attempts\":\(p.attempts),\"next_try_at\":\"\(JSONOut.iso(p.nextTryAt))\",\"deadline_at\":\"\(JSONOut.iso(p.deadlineAt))\",\"reason\":"
        JSONOut.string(p.reason, into: &out)
        return out + "}"
    }

    /// An outcome still unknown at the settlement deadline.
    public static func unknownJSON(reason: String, attempts: Int, deadline: Date) -> String {
        var out = "{\"status\":\"unknown\",\"reason\":"
        JSONOut.string(reason, into: &out)
        return out + ",\"attempts\":\(attempts),\"deadline_at\":\"\(JSONOut.iso(deadline))\"}"
    }

    /// The outcome as the gateway's answer.
    public static func json(_ outcome: AuthorizationOutcome) -> String {
        var out = "{\"status\":\"\(outcome.status)\""
        switch outcome {
        case .succeeded(let reference):
            out += ",\"reference\":"
            JSONOut.string(reference, into: &out)
        case .declined(let code, let reference):
            out += ",\"decline_code\":"
            JSONOut.string(code, into: &out)
            if let reference {
                out += ",\"reference\":"
                JSONOut.string(reference, into: &out)
            }
        case .requiresAction(let challenge):
            out += ",\"next_action\":{\"type\":\"three_ds_challenge\",\"transaction_id\":"
            JSONOut.string(challenge.transactionID, into: &out)
            out += ",\"payload\":"
            JSONOut.string(challenge.payload, into: &out)
            out += ",\"challenge_url\":"
            JSONOut.string(challenge.challengeURL, into: &out)
            out += "}"
        }
        return out + "}"
    }
}

/// The gateway's opener as one value that a reload swaps whole (requests in flight keep theirs).
public final class Openers: @unchecked Sendable {
    private let lock = NSLock()
    private var opener: EnvelopeOpener

    public init(_ opener: EnvelopeOpener) { self.opener = opener }

    /// The opener now.
    public var current: EnvelopeOpener {
        lock.lock()
        defer { lock.unlock() }
        return opener
    }

    /// Swaps in a new opener.
    public func replace(with opener: EnvelopeOpener) {
        lock.lock()
        self.opener = opener
        lock.unlock()
    }
}
