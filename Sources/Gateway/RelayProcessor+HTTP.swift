import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import VaultCrypto
import VaultOpen

// Talking to the processor: one charge request, one status query, and the HTTP exchange both go
// through (the destination check first, no redirects, the request body zeroed after the call).
extension RelayProcessor {

    /// What one charge request did.
    enum Attempt: Sendable {
        case outcome(AuthorizationOutcome)
        /// No connection was made: nothing left this host.
        case notConnected(String)
        /// A 5xx answer.
        case serverError(Int)
        /// Sent; the answer was lost or is not a clear outcome.
        case unknown(String)
    }

    /// Sends the charge request once.
    /// - Throws: `.refused` (`RELAY_URL_NOT_ALLOWED`: a filled-in URL the template may not send
    ///   to) or `.unavailable` (a variable not set): both before anything is sent.
    func charge(_ request: AuthorizationRequest, card: OpenedCard, timeout: Double) async throws(ProcessorError) -> Attempt {
        let url = try render(template.url, request, percentEncode: true)
        try check(url)
        var headers: [(String, String)] = []
        for (name, value) in template.headers { headers.append((name, try render(value, request))) }
        let body = try renderBody(request, card: card)
        let contentType = switch template.body {
        case .form: "application/x-www-form-urlencoded"
        case .json: "application/json"
        }
        switch await exchange(method: template.method, url: url, headers: headers, body: body, contentType: contentType, timeout: timeout) {
        case .notConnected(let why): return .notConnected(why)
        case .lost(let why): return .unknown(why)
        case .answered(let status, let data):
            if status >= 500 { return .serverError(status) }
            do throws(ProcessorError) { return .outcome(try template.outcome(httpStatus: status, body: data)) } catch {
                return .unknown(error.reason)
            }
        }
    }

    /// What the status query told.
    enum StatusAnswer: Sendable, Equatable {
        case found(AuthorizationOutcome)
        /// A `not_found_http_statuses` answer: the processor has no such payment.
        case notFound
        case unknown(String)
    }

    /// Asks the template's status query once (no card data in it).
    func queryStatus(_ request: AuthorizationRequest, timeout: Double) async -> StatusAnswer {
        guard let query = settle.status else { return .unknown("the template has no status query") }
        let url: String
        var headers: [(String, String)] = []
        do throws(ProcessorError) {
            url = try render(query.url, request, percentEncode: true)
            try check(url)
            for (name, value) in query.headers { headers.append((name, try render(value, request))) }
        } catch {
            return .unknown("the status query cannot be sent (\(Self.describe(error)))")
        }
        switch await exchange(method: query.method, url: url, headers: headers, body: nil, contentType: nil, timeout: timeout) {
        case .notConnected(let why), .lost(let why): return .unknown("status query: \(why)")
        case .answered(let status, let data):
            if query.notFoundHTTPStatuses.contains(status) { return .notFound }
            do throws(ProcessorError) { return .found(try template.outcome(httpStatus: status, body: data)) } catch {
                return .unknown("status query: \(error.reason)")
            }
        }
    }

    /// Refuses a filled-in URL the template may not send to, before anything is sent.
    func check(_ url: String) throws(ProcessorError) {
        do throws(RelayTemplate.Invalid) { try destination.check(url) } catch {
            throw .refused(error.code, error.message)
        }
    }

    static func describe(_ error: ProcessorError) -> String {
        switch error {
        case .refused(let code, _): code.rawValue
        default: error.reason
        }
    }

    /// What one HTTP exchange did.
    enum Exchange: Sendable {
        case answered(Int, ByteBuffer)
        case notConnected(String)
        case lost(String)
    }

    /// One request, never following a redirect. The body (card data) is zeroed when it returns.
    func exchange(
        method: String, url: String, headers: [(String, String)], body: SecureBytes?, contentType: String?, timeout: Double
    ) async -> Exchange {
        var outbound = HTTPClientRequest(url: url)
        outbound.method = .init(rawValue: method)
        for (name, value) in headers { outbound.headers.add(name: name, value: value) }
        var buffer: ByteBuffer?
        if let body {
            buffer = body.withUnsafeBytes { ByteBuffer(bytes: $0) }
            if let contentType { outbound.headers.replaceOrAdd(name: "Content-Type", value: contentType) }
            outbound.body = .bytes(buffer!)
        }
        defer {
            // Best effort: our reference to the request bytes is zeroed once the call is over.
            outbound.body = nil
            buffer?.withUnsafeMutableReadableBytes { raw in if let base = raw.baseAddress { memset(base, 0, raw.count) } }
        }
        do {
            let response = try await http.execute(outbound, timeout: .milliseconds(Int64(max(timeout, 0.05) * 1000)))
            let data = try await response.body.collect(upTo: 256 * 1024)
            return .answered(Int(response.status.code), data)
        } catch let error as HTTPClientError where error == .connectTimeout {
            return .notConnected("connecting to the processor timed out")
        } catch let error as IOError where [ECONNREFUSED, ENETUNREACH, EHOSTUNREACH, ENOENT].contains(error.errnoCode) {
            return .notConnected("the processor refused the connection")
        } catch is NIOConnectionError {
            return .notConnected("the processor cannot be reached")
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout {
            return .lost("the processor did not answer within \(Int(timeout.rounded(.up))) s")
        } catch let error as HTTPClientError where error == .remoteConnectionClosed {
            return .lost("the processor closed the connection without answering")
        } catch {
            return .lost("the processor call failed after sending (\(type(of: error)))")
        }
    }
}
