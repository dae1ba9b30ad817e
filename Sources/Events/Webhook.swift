import Foundation
import VaultCrypto

/// Where webhooks go (`sidecar.webhook`, docs/events.md): an HTTP endpoint on this host's loopback
/// (`http://127.0.0.1:8080/hooks`, `http://[::1]/…`, `http://localhost/…`) or a Unix socket
/// (`unix:/run/app/hooks.sock`, posting to `/`, or `unix:/run/app/hooks.sock:/hooks/vault` for
/// another path). Nothing else: events leave the host only through the merchant's own app.
public struct WebhookEndpoint: Sendable, Equatable, CustomStringConvertible {
    public enum Target: Sendable, Equatable {
        case http(url: String)
        case unix(socket: String, path: String)
    }

    public let target: Target

    /// - Throws: `CONFIG_INVALID` (field `sidecar.webhook`) for any other URL.
    public init(_ text: String) throws(VaultError) {
        func refuse(_ why: String) -> VaultError {
            VaultError(.configInvalid, "sidecar.webhook \(why): give http://127.0.0.1[:port]/path (loopback only) or unix:/path/to.sock[:/path]", field: "sidecar.webhook")
        }
        if text.hasPrefix("unix:") {
            let rest = String(text.dropFirst(5))
            var socket = rest, path = "/"
            if let split = rest.range(of: ":/") {
                socket = String(rest[..<split.lowerBound])
                path = String(rest[rest.index(after: split.lowerBound)...])
            }
            guard socket.hasPrefix("/"), socket.utf8.count < 108 else { throw refuse("needs an absolute socket path (under 108 bytes)") }
            guard !path.contains(where: { $0 == " " || $0 == "\n" || $0 == "\r" }) else { throw refuse("has a path with spaces") }
            target = .unix(socket: socket, path: path)
            return
        }
        guard let url = URL(string: text), url.scheme == "http", let host = url.host, url.user == nil else {
            throw refuse("is not an http:// URL")
        }
        let loopback = host == "localhost" || host == "::1" || host == "[::1]" || host.split(separator: ".").first == "127"
            && host.split(separator: ".").count == 4 && host.split(separator: ".").allSatisfy { UInt8($0) != nil }
        guard loopback else { throw refuse("names \(host), which is not this host's loopback") }
        target = .http(url: text)
    }

    public var description: String {
        switch target {
        case .http(let url): url
        case .unix(let socket, let path): path == "/" ? "unix:\(socket)" : "unix:\(socket):\(path)"
        }
    }
}

/// The webhook signing secret (`sidecar.webhook_secret_file`): the file's bytes without trailing
/// line breaks, at least 32 of them, held in wiped memory. The sidecar signs each delivery with it
/// (`Vault-Signature`); the receiver checks with the same secret.
public struct WebhookSecret: Sendable {
    public static let minimumBytes = 32
    let key: SecureBytes

    public init(key: SecureBytes) { self.key = key }

    /// - Throws: `CONFIG_INVALID` (field `sidecar.webhook_secret_file`): unreadable, a mode above
    ///   0640 (group write, anything for others), or shorter than 32 bytes. Never shows the content.
    public static func load(path: String) throws(VaultError) -> WebhookSecret {
        let field = "sidecar.webhook_secret_file"
        let file: (bytes: SecureBytes, mode: mode_t)
        do throws(VaultError) { file = try SecretFile.read(path: path) } catch {
            throw VaultError(.configInvalid, "the webhook secret file \(path) cannot be read (\(error.code))", field: field)
        }
        guard file.mode & 0o037 == 0 else {
            throw VaultError(.configInvalid, "the webhook secret file \(path) has mode \(String(file.mode, radix: 8)): at most 0640 (chmod 0600 or 0640)", field: field)
        }
        guard file.bytes.count >= minimumBytes else {
            throw VaultError(.configInvalid, "the webhook secret in \(path) is shorter than \(minimumBytes) bytes", field: field)
        }
        return WebhookSecret(key: file.bytes)
    }

    /// `Vault-Signature`'s value for `body` sent at `timestamp` (Unix seconds):
    /// `t=<timestamp>,v1=<hex HMAC-SHA256(secret, "<timestamp>." + body)>`.
    public func signature(body: [UInt8], timestamp: Int) -> String {
        "t=\(timestamp),v1=" + HMACSHA256.hex(key: key, [Array("\(timestamp).".utf8), body])
    }
}
