import Foundation
import GatewayAPI
import Money
import NIOCore
import Store
import VaultCrypto

/// Capture, void and refund through the relay (the template's `capture`, `void`, `refund`
/// sections, `RelayOperationTemplate`): by the processor's reference its authorization left in the
/// ledger, never the card (no envelope is opened, no card placeholder can be in these requests).
///
/// Like an authorization: the operation's ledger row (`vault_ledger_operations`, checked against
/// the authorization and its other operations in one transaction) is written `sending` before
/// anything is sent, to the template's hosts only, over https, never following a redirect, within
/// the template's timeout. The operation id is the processor's idempotency key
/// (`{{idempotency_key}}`), so sending it again is safe:
/// - a connection never made on the row's first send (or a 5xx when the template says
///   `"server_errors": "not_charged"`) removes the row: 503, nothing done, the same id may be sent
///   again;
/// - anything else without a clear answer (a timeout, a dropped connection, a 5xx, a 3xx, an
///   unreadable or unlisted answer) is an unknown outcome: within `settle.retry_within_seconds`
///   the call sends again under the same key (backoff, full jitter); still unknown, the row is left
///   `unknown` and the answer is 504. `GET /v1/operations/{id}` then answers 409 (pending), and the
///   sidecar's reconciler posts the operation again: the gateway takes the row over (a
///   compare-and-swap on its `updated_at`, so one call sends) and sends it again under the same
///   key, until the processor's answer is recorded. A row another call is sending (updated less
///   than a send's timeout plus the margin ago) answers 504 `AUTHORIZATION_IN_PROGRESS`.
/// - Past `settle.deadline_seconds` from its first send an unknown operation is not sent again
///   (the processor may have forgotten the key: Stripe keeps keys 24 h, and a refund sent again
///   after that would be a second refund): 504, with an error log line for an operator.
///
/// A template without the section refuses the operation before anything is sent
/// (`OPERATION_NOT_SUPPORTED`, nothing recorded).
extension RelayProcessor {
    public func operate(_ request: OperationRequest) async throws(ProcessorError) -> GatewayOperationOutcome {
        guard let op = template.operations[request.kind] else { throw Self.unsupported("a \(request.kind.rawValue)") }
        let started = ContinuousClock.now
        let t = now()
        let row = LedgerOperation(
            operationID: request.operationID, paymentID: request.paymentID, kind: request.kind.rawValue, processor: name,
            amount: request.amount, currency: request.currency, state: .sending, createdAt: t)
        let claim = try await store("record the operation", { () throws(StoreError) in try await ledger.claimOperation(row) })
        switch claim {
        case .refused(let code, let message):
            throw .refused(code, message)
        case .claimed(let authorization):
            return try await sendOperation(request, op, reference: authorization.reference ?? "", heldSince: t, isFirst: true, started: started)
        case .existing(let first):
            guard first.sameRequest(kind: request.kind.rawValue, paymentID: request.paymentID, amount: request.amount) else {
                throw .refused(.paymentIDReused, "this operation id was already used for another operation")
            }
            if first.state == .done, let status = first.status {
                return GatewayOperationOutcome(status: status, failureCode: first.failureCode, reference: first.reference)
            }
            // Sent by another call that may still be talking to the processor: never a second send now.
            if first.state == .sending, t.timeIntervalSince(first.updatedAt) <= sendTimeout + timing.margin { throw .inProgress }
            if t.timeIntervalSince(first.createdAt) > settle.deadline {
                let reason = first.reason ?? Self.neverAnswered
                logger.error("operation outcome unknown after the settlement deadline", metadata: [
                    "operation": "\(first.operationID)", "kind": "\(first.kind)", "payment": "\(first.paymentID)", "reason": "\(reason)",
                ])
                throw .outcomeUnknown(
                    "\(reason); past the settlement deadline the operation is not sent again (the processor may have forgotten its idempotency key): settle it with the processor by hand")
            }
            guard try await store("take the operation over", { () throws(StoreError) in
                try await ledger.retakeOperation(first.operationID, updatedAt: first.updatedAt, now: t)
            }) else { throw .inProgress }
            let authorization = try await store("read the authorization", { () throws(StoreError) in try await ledger.entry(first.paymentID) })
            metrics.settled("resent")
            logger.notice("re-sending an operation whose outcome is unknown", metadata: [
                "operation": "\(first.operationID)", "kind": "\(first.kind)", "payment": "\(first.paymentID)",
            ])
            return try await sendOperation(
                request, op, reference: authorization?.reference ?? "", heldSince: t, isFirst: false, started: started)
        }
    }

    public func operation(_ operationID: String) async throws(ProcessorError) -> LedgerOperation? {
        do { return try await ledger.operation(operationID) } catch { throw .unavailable("the ledger failed (\(error.code))") }
    }

    static func unsupported(_ what: String) -> ProcessorError {
        .refused(.operationNotSupported, "the relay processor cannot send \(what): its template has no such request; nothing was sent")
    }

    /// What one operation request did.
    enum OperationAttempt: Sendable {
        case outcome(GatewayOperationOutcome)
        case notConnected(String)
        case serverError(Int)
        case unknown(String)
    }

    /// Sends (the call holds the row since `heldSince`) and, while the outcome is unknown and the
    /// template's retry window allows, sends again under the same idempotency key.
    func sendOperation(
        _ request: OperationRequest, _ op: RelayOperationTemplate, reference: String, heldSince: Date, isFirst: Bool,
        started: ContinuousClock.Instant
    ) async throws(ProcessorError) -> GatewayOperationOutcome {
        var heldSince = heldSince
        var isFirst = isFirst
        var retries = 0
        while true {
            let attempt: OperationAttempt
            do throws(ProcessorError) {
                attempt = try await sendOperationOnce(request, op, reference: reference, timeout: remaining(started) ?? sendTimeout)
            } catch {
                // Refused before sending (a URL the template may not send to, a variable not set).
                if isFirst {
                    _ = try? await ledger.forgetOperation(request.operationID, heldSince: heldSince)
                } else {
                    _ = await leaveOperationUnknown(request, heldSince: heldSince, reason: "the re-send was refused before sending")
                }
                throw error
            }
            let reason: String
            switch attempt {
            case .outcome(let outcome):
                if retries > 0 || !isFirst { metrics.settled("settled") }
                return try await recordOperation(outcome, request)
            case .notConnected(let why) where isFirst:
                if (try? await ledger.forgetOperation(request.operationID, heldSince: heldSince)) == true { throw .unavailable(why) }
                reason = why
            case .serverError(let status) where isFirst && settle.serverErrors == .notCharged:
                if (try? await ledger.forgetOperation(request.operationID, heldSince: heldSince)) == true {
                    throw .unavailable("the processor answered \(status), which it documents as nothing done")
                }
                reason = "the processor answered \(status)"
            case .notConnected(let why): reason = "\(why) (a later send: an earlier one may have acted)"
            case .serverError(let status): reason = "the processor answered \(status)"
            case .unknown(let why): reason = why
            }
            isFirst = false
            guard let delay = nextDelay(retries, started: started) else {
                throw await leaveOperationUnknown(request, heldSince: heldSince, reason: reason)
            }
            retries += 1
            try? await Task.sleep(for: .milliseconds(Int64(delay * 1000)))
            guard remaining(started) != nil else { throw await leaveOperationUnknown(request, heldSince: heldSince, reason: reason) }
            let t = now()
            guard (try? await ledger.retakeOperation(request.operationID, updatedAt: heldSince, now: t)) == true else { throw .inProgress }
            heldSince = t
            metrics.settled("resent")
        }
    }

    /// Leaves the row `unknown` (if the call still holds it); the error to answer (504).
    func leaveOperationUnknown(_ request: OperationRequest, heldSince: Date, reason: String) async -> ProcessorError {
        _ = try? await ledger.markOperationUnknown(request.operationID, heldSince: heldSince, reason: reason, now: now())
        metrics.settled("unknown")
        return .outcomeUnknown(reason)
    }

    /// Records the processor's answer; the row's recorded outcome if another writer recorded one first.
    func recordOperation(_ outcome: GatewayOperationOutcome, _ request: OperationRequest) async throws(ProcessorError) -> GatewayOperationOutcome {
        do throws(StoreError) {
            if try await ledger.finishOperation(
                request.operationID, status: outcome.status, failureCode: outcome.failureCode, reference: outcome.reference, now: now()) {
                return outcome
            }
            if let row = try await ledger.operation(request.operationID), row.state == .done, let status = row.status {
                return GatewayOperationOutcome(status: status, failureCode: row.failureCode, reference: row.reference)
            }
            return outcome
        } catch {
            throw .outcomeUnknown("the processor answered but the operation's outcome could not be recorded")
        }
    }

    /// Sends the operation's request once.
    /// - Throws: `.refused` (`RELAY_URL_NOT_ALLOWED`) or `.unavailable` (a variable not set): both
    ///   before anything is sent.
    func sendOperationOnce(
        _ request: OperationRequest, _ op: RelayOperationTemplate, reference: String, timeout: Double
    ) async throws(ProcessorError) -> OperationAttempt {
        let url = try fill(op.url, request, reference: reference, encoding: .url)
        try check(url)
        var headers: [(String, String)] = []
        for (name, value) in op.headers { headers.append((name, try fill(value, request, reference: reference, encoding: .none))) }
        var body: SecureBytes?
        var contentType: String?
        switch op.body {
        case nil: break
        case .form(let pairs)?:
            var text = ""
            for (i, (key, value)) in pairs.enumerated() {
                text += (i == 0 ? "" : "&") + String(decoding: Self.encode(Array(key.utf8), .form), as: UTF8.self) + "="
                text += try fill(value, request, reference: reference, encoding: .form)
            }
            body = Self.bytes(text)
            contentType = "application/x-www-form-urlencoded"
        case .json(let template)?:
            let numeric = template.replacingOccurrences(of: "\"{{#amount}}\"", with: String(request.amount))
                .replacingOccurrences(of: "\"{{#amount_major}}\"", with: try operationValue("amount_major", request, reference: reference))
            body = Self.bytes(try fill(numeric, request, reference: reference, encoding: .json))
            contentType = "application/json"
        }
        switch await exchange(method: op.method, url: url, headers: headers, body: body, contentType: contentType, timeout: timeout) {
        case .notConnected(let why): return .notConnected(why)
        case .lost(let why): return .unknown(why)
        case .answered(let status, let data):
            if status >= 500 { return .serverError(status) }
            if (300..<400).contains(status) { return .unknown("the processor answered a redirect (\(status)), not followed") }
            guard let outcome = op.outcome(httpStatus: status, body: Data(buffer: data)) else {
                return .unknown("the processor answered \(status) without an outcome the template lists")
            }
            return .outcome(outcome)
        }
    }

    enum FillEncoding { case none, url, form, json }

    /// An operation's text with its placeholders filled in (no card field can be among them).
    func fill(_ text: String, _ request: OperationRequest, reference: String, encoding: FillEncoding) throws(ProcessorError) -> String {
        var out = ""
        var rest = Substring(text)
        while let open = rest.range(of: "{{"), let close = rest.range(of: "}}", range: open.upperBound..<rest.endIndex) {
            out += rest[..<open.lowerBound]
            let name = String(rest[open.upperBound..<close.lowerBound])
            let value = try operationValue(name, request, reference: reference)
            switch encoding {
            case .none: out += value
            // A base URL from the environment is taken as it is; every other value is one path segment.
            case .url where name.hasPrefix("env:"): out += value
            case .url: out += String(decoding: Self.encode(Array(value.utf8), .form), as: UTF8.self).replacingOccurrences(of: "+", with: "%20")
            case .form: out += String(decoding: Self.encode(Array(value.utf8), .form), as: UTF8.self)
            case .json: out += String(decoding: Self.encode(Array(value.utf8), .json), as: UTF8.self)
            }
            rest = rest[close.upperBound...]
        }
        return out + rest
    }

    func operationValue(_ name: String, _ request: OperationRequest, reference: String) throws(ProcessorError) -> String {
        switch name {
        case "reference":
            // A template whose answers carry no reference left none: there is nothing to act on.
            guard !reference.isEmpty else {
                throw .refused(.operationNotSupported, "the authorization left no processor reference (the template's response.reference); nothing was sent")
            }
            // The processor's own text goes into a path and headers: never a dot segment (the
            // path would climb) nor a control character (a header would break).
            guard reference != ".", reference != "..", !reference.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
                throw .refused(.operationNotSupported, "the processor reference of this authorization cannot be sent back (a dot segment or a control character); nothing was sent")
            }
            return reference
        case "payment_id": return request.paymentID
        // The operation id: unique per operation and the same on every re-send of it.
        case "operation_id", "idempotency_key": return request.operationID
        case "amount", "#amount": return String(request.amount)
        case "amount_major", "#amount_major":
            guard let currency = Currency(request.currency) else { throw .unavailable("the currency \(request.currency) is not known to this version") }
            return Self.major(request.amount, exponent: currency.exponent)
        case "currency": return request.currency
        case "currency_lower": return request.currency.lowercased()
        case _ where name.hasPrefix("env:"):
            guard let v = environment[String(name.dropFirst(4))] else {
                throw .unavailable("the relay template needs $\(name.dropFirst(4)), which is not set")
            }
            return v
        default: throw .unavailable("placeholder {{\(name)}} has no value here")
        }
    }

    static func bytes(_ text: String) -> SecureBytes {
        let raw = Array(text.utf8)
        return SecureBytes(capacity: max(raw.count, 1)) { out in
            raw.withUnsafeBytes { if !$0.isEmpty { UnsafeMutableRawBufferPointer(rebasing: out[0..<raw.count]).copyMemory(from: $0) } }
            return raw.count
        }
    }
}
