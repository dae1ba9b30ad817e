import CardRules
import Foundation
import VaultCrypto

/// Talks to a running sidecar over its Unix socket (HTTP/1.1 with keep-alive: a call reuses an
/// idle connection of this client, and its copies, when there is one; up to
/// `maxIdleConnections` are kept; a call that waits longer than `timeout` seconds to send or
/// for its answer fails with `SIDECAR_UNREACHABLE` and its connection is closed).
///
/// For non-PCI callers: seal locally with the public key (`CardSealer`) and send only the
/// envelope (`tokenize(envelope:)`); or, for ops scripts, send a raw card JSON held in
/// `SecureBytes` (`tokenize(cardJSON:)`) to be sealed at the sidecar's door. Calls block the
/// calling thread; answers carry metadata only.
public struct SidecarClient: Sendable {
    /// The socket path.
    public let socketPath: String
    /// Seconds connecting, and each send and receive of a call, may take (nil: no limit).
    public var timeout: Double?
    let pool: ConnectionPool
    /// How messages name the server (`vault health` asks either server: "the server").
    public var serverName = "the sidecar"

    /// A client for the sidecar at `socketPath`.
    public init(socketPath: String, timeout: Double? = 30, maxIdleConnections: Int = 8) {
        self.socketPath = socketPath
        self.timeout = timeout
        pool = ConnectionPool(maxIdle: maxIdleConnections)
    }

    /// An answer: status and JSON body (metadata only).
    public struct Answer: Sendable {
        public let status: Int
        public let body: String
        /// The body parsed as a JSON object.
        public var json: [String: Any]? {
            (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any]
        }
        /// The `{"error":{…}}` of a failed call, as a `VaultError`.
        public var error: VaultError? {
            guard status >= 400 else { return nil }
            let e = json?["error"] as? [String: Any]
            let text = e?["code"] as? String
            let message = e?["message"] as? String ?? "the sidecar answered \(status)"
            guard let code = text.flatMap(ErrorCode.init(rawValue:)) else {
                // A code this client does not know (a newer sidecar), or no code at all.
                return VaultError(.sidecarError, "\(text ?? "HTTP \(status)"): \(message)", field: e?["field"] as? String)
            }
            return VaultError(code, message, field: e?["field"] as? String)
        }
    }

    /// Tokenizes an envelope sealed by this caller. `tokenFormat`: `"tok"` or `"card"` (card-shaped,
    /// docs/card-tokens.md); nil: the sidecar's default. `dedupe`: an existing reusable token of
    /// the same card is answered (200) when there is one (docs/dedupe.md).
    /// - Throws: the sidecar's error code, or `SIDECAR_UNREACHABLE`.
    public func tokenize(envelope: CardEnvelope, tokenFormat: String? = nil, dedupe: Bool = false) throws(VaultError) -> Answer {
        try checked(request("POST", "/v1/tokens", body: Array(("{\"envelope\":" + envelope.json + Self.options(tokenFormat, dedupe) + "}").utf8)))
    }

    /// `,"token_format":"…"` (letters only) and `,"dedupe":true`, each when asked.
    private static func options(_ format: String?, _ dedupe: Bool) -> String {
        let f = format.map { ",\"token_format\":\"" + String($0.unicodeScalars.filter { $0.properties.isAlphabetic && $0.isASCII }.map(Character.init)) + "\"" }
        return (f ?? "") + (dedupe ? ",\"dedupe\":true" : "")
    }

    /// Sends a raw card JSON object (`{"number",…}`, kept in `SecureBytes`) to be sealed at the door,
    /// for a token of `tokenFormat` (`"tok"`, `"card"`; nil: the sidecar's default); `dedupe` as for an envelope.
    /// - Throws: the sidecar's error code, or `SIDECAR_UNREACHABLE`.
    public func tokenize(cardJSON: SecureBytes, tokenFormat: String? = nil, dedupe: Bool = false) throws(VaultError) -> Answer {
        let head = Array("{\"card\":".utf8), tail = Array((Self.options(tokenFormat, dedupe) + "}").utf8)
        let body = SecureBytes(capacity: head.count + cardJSON.count + tail.count) { out in
            out.copyBytes(from: head)
            cardJSON.withUnsafeBytes { c in
                if !c.isEmpty { (out.baseAddress! + head.count).copyMemory(from: c.baseAddress!, byteCount: c.count) }
            }
            UnsafeMutableRawBufferPointer(rebasing: out[(head.count + cardJSON.count)...]).copyBytes(from: tail)
            return head.count + cardJSON.count + tail.count
        }
        return try checked(body.withUnsafeBytes { b in Result { () throws(VaultError) in try request("POST", "/v1/tokens", body: b) } }.get())
    }

    /// A token's metadata.
    public func token(_ token: String) throws(VaultError) -> Answer {
        try checked(request("GET", "/v1/tokens/" + Self.pathSafe(token)))
    }

    /// Deletes a token.
    public func delete(_ token: String) throws(VaultError) {
        _ = try checked(request("DELETE", "/v1/tokens/" + Self.pathSafe(token)))
    }

    /// Validates a number held in `SecureBytes` (stores nothing).
    public func validate(number: SecureBytes, partial: Bool = false) throws(VaultError) -> Answer {
        let head = Array("{\"partial\":\(partial),\"number\":\"".utf8), tail = Array("\"}".utf8)
        let body = SecureBytes(capacity: head.count + number.count + tail.count) { out in
            out.copyBytes(from: head)
            number.withUnsafeBytes { n in
                for (i, b) in n.enumerated() { out[head.count + i] = (b == 34 || b == 92 || b < 32) ? 32 : b }
            }
            UnsafeMutableRawBufferPointer(rebasing: out[(head.count + number.count)...]).copyBytes(from: tail)
            return out.count
        }
        return try checked(body.withUnsafeBytes { b in Result { () throws(VaultError) in try request("POST", "/v1/validate", body: b) } }.get())
    }

    /// Pays with a token (`POST /v1/payments`): the answer is the payment (201, or 200 for a
    /// replay of `idempotencyKey`); its `status` is succeeded, declined or requires_action.
    /// - Throws: the sidecar's error code, or `SIDECAR_UNREACHABLE`.
    public func pay(token: String, amount: Int, currency: String, idempotencyKey: String) throws(VaultError) -> Answer {
        let safe = { (s: String) in String(s.unicodeScalars.filter { $0.isASCII && $0.value > 32 && $0 != "\"" && $0 != "\\" }.map(Character.init)) }
        let body = #"{"token":"\#(Self.pathSafe(token))","amount":\#(amount),"currency":"\#(safe(currency))","idempotency_key":"\#(safe(idempotencyKey))"}"#
        return try checked(request("POST", "/v1/payments", body: Array(body.utf8)))
    }

    /// A payment's authoritative status.
    public func payment(_ id: String) throws(VaultError) -> Answer {
        try checked(request("GET", "/v1/payments/" + Self.pathSafe(id)))
    }

    /// Liveness.
    public func health() throws(VaultError) -> Bool { try request("GET", "/v1/health").status == 200 }

    /// Posts `json`, a text that holds no card data (ciphertext and metadata only: an envelope batch
    /// for the gateway's `POST /v1/fingerprints`), to `path` on any server speaking this API; the
    /// head and the body go out in one write. The answer as it came, whatever its status.
    /// - Throws: `SIDECAR_UNREACHABLE` (named `serverName`) when no answer came.
    public func post(_ path: String, json: String) throws(VaultError) -> Answer {
        try request("POST", path, body: Array(json.utf8), inline: true)
    }

    /// A plain GET of `path` (any server speaking this API on a Unix socket: the gateway's
    /// `/v1/keys`, `/metrics`).
    public func get(_ path: String) throws(VaultError) -> Answer { try request("GET", path) }

    private func checked(_ answer: Answer) throws(VaultError) -> Answer {
        if let error = answer.error { throw error }
        return answer
    }

    private static func pathSafe(_ s: String) -> String {
        String(s.unicodeScalars.filter { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "_") }.map(Character.init))
    }

    private func request(_ method: String, _ path: String, body: [UInt8], inline: Bool = false) throws(VaultError) -> Answer {
        try body.withUnsafeBytes { b in Result { () throws(VaultError) in try request(method, path, body: b, inline: inline) } }.get()
    }

    /// Sends the request on an idle connection (or a new one) and reads its answer. A reused
    /// connection that the server had already closed (it answers nothing, not a byte: the request
    /// was never read) is dropped and the request sent once more on a new connection.
    /// `inline`: the body holds no card data and goes in the head's write (one syscall); otherwise
    /// (a card in `SecureBytes`) it is sent from where it is, never copied.
    private func request(_ method: String, _ path: String, body: UnsafeRawBufferPointer? = nil, inline: Bool = false) throws(VaultError) -> Answer {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: vault\r\n"
        if let body { head += "Content-Type: application/json\r\nContent-Length: \(body.count)\r\n" }
        head += "\r\n"
        var headBytes = Array(head.utf8)
        var body = body
        if inline, let b = body {
            headBytes.append(contentsOf: b)
            body = nil
        }
        while true {
            let pooled = pool.take()
            let fd: Int32
            if let pooled { fd = pooled } else { fd = try UnixSocket.connect(socketPath, timeout: timeout, peer: serverName) }
            var answer: (raw: [UInt8], keepAlive: Bool)?
            do throws(VaultError) {
                try UnixSocket.send(fd, headBytes, peer: serverName)
                if let body { try UnixSocket.send(fd, body, peer: serverName) }
                answer = try UnixSocket.receiveAnswer(fd, peer: serverName)
            } catch {
                close(fd)
                if pooled != nil, error.message.hasSuffix("closed the connection") { continue }
                throw error
            }
            guard let answer else {
                close(fd)
                if pooled != nil { continue }
                throw VaultError(.sidecarUnreachable, "\(serverName) closed the connection without an answer")
            }
            if answer.keepAlive { pool.give(fd) } else { close(fd) }
            return try HTTPResponseParser.parse(answer.raw, peer: serverName)
        }
    }
}
