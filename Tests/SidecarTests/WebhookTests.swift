import Events
import Foundation
import Testing
import VaultCrypto

/// Webhook delivery's parts (docs/events.md): the endpoints allowed (loopback HTTP or a Unix
/// socket, nothing else), the signature (HMAC-SHA256 over "<t>." + body, known vectors computed
/// apart with Python's hmac), the secret file's checks, and the backoff's bounds.
@Suite struct WebhookTests {
    @Test func onlyLoopbackHTTPOrAUnixSocketIsAnEndpoint() throws {
        #expect(try WebhookEndpoint("http://127.0.0.1:8080/hooks").target == .http(url: "http://127.0.0.1:8080/hooks"))
        #expect(try WebhookEndpoint("http://localhost/hooks").target == .http(url: "http://localhost/hooks"))
        #expect(try WebhookEndpoint("http://[::1]:9/x").target == .http(url: "http://[::1]:9/x"))
        #expect(try WebhookEndpoint("http://127.10.0.3/").target == .http(url: "http://127.10.0.3/"))
        #expect(try WebhookEndpoint("unix:/run/app/hooks.sock").target == .unix(socket: "/run/app/hooks.sock", path: "/"))
        #expect(try WebhookEndpoint("unix:/run/app/hooks.sock:/hooks/vault").target == .unix(socket: "/run/app/hooks.sock", path: "/hooks/vault"))
        for bad in [
            "https://127.0.0.1/hooks", "http://example.com/hooks", "http://10.0.0.1/", "http://127.0.0.1.example.com/", "http://user@127.0.0.1/",
            "unix:relative.sock", "ftp://127.0.0.1/", "127.0.0.1:80", "http://128.0.0.1/", "unix:/" + String(repeating: "a", count: 120),
        ] {
            #expect(throws: VaultError.self, "\(bad)") { try WebhookEndpoint(bad) }
            do { _ = try WebhookEndpoint(bad) } catch { #expect(error.code == .configInvalid && error.field == "sidecar.webhook") }
        }
    }

    @Test func signaturesMatchHMACSHA256AsOtherLanguagesComputeIt() {
        // RFC 4231-style known answer (the Wikipedia vector), and one over "<t>." + body.
        let fox = HMACSHA256.hex(key: SecureBytes(Array("key".utf8)), [Array("The quick brown fox jumps over the lazy dog".utf8)])
        #expect(fox == "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8")
        let secret = WebhookSecret(key: SecureBytes(Array("whsec-test-0123456789abcdef0123456789".utf8)))
        #expect(secret.signature(body: Array(#"{"id":"evt_1"}"#.utf8), timestamp: 1_800_000_000)
                == "t=1800000000,v1=85177b428709722cc3572d359c4af20f4fd620823f248139bb2ca682effdb4ed")
        // One byte of the body changed: another signature.
        #expect(secret.signature(body: Array(#"{"id":"evt_2"}"#.utf8), timestamp: 1_800_000_000)
                != secret.signature(body: Array(#"{"id":"evt_1"}"#.utf8), timestamp: 1_800_000_000))
        #expect(secret.signature(body: Array(#"{"id":"evt_1"}"#.utf8), timestamp: 1_800_000_001).hasPrefix("t=1800000001,v1="))
    }

    @Test func theSecretFileIsPrivateAndLongEnough() throws {
        let dir = NSTemporaryDirectory() + "webhook-secret-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        func write(_ name: String, _ text: String, mode: Int) -> String {
            let path = dir + "/" + name
            _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: mode])
            return path
        }
        let good = write("good", String(repeating: "s", count: 32) + "\n", mode: 0o600)
        let loaded = try WebhookSecret.load(path: good)
        #expect(loaded.signature(body: [], timestamp: 1) == WebhookSecret(key: SecureBytes(Array(String(repeating: "s", count: 32).utf8))).signature(body: [], timestamp: 1),
                "the trailing newline is not part of the secret")
        #expect(try WebhookSecret.load(path: write("group", String(repeating: "s", count: 40), mode: 0o640)).signature(body: [], timestamp: 1).hasPrefix("t=1,"))
        let short = write("short", String(repeating: "s", count: 31) + "\n", mode: 0o600)
        let open = write("open", String(repeating: "s", count: 40), mode: 0o644)
        let groupWritable = write("group-writable", String(repeating: "s", count: 40), mode: 0o660)
        for path in [short, open, groupWritable, dir + "/missing", dir] {
            do {
                _ = try WebhookSecret.load(path: path)
                Issue.record("\(path) was accepted")
            } catch {
                #expect(error.code == .configInvalid && error.field == "sidecar.webhook_secret_file")
                #expect(!error.message.contains("sssss"), "the secret is never shown")
            }
        }
    }

    @Test func theBackoffDoublesUpToItsCapWithJitterInTheUpperHalf() {
        #expect(WebhookDispatcher.backoff(attempt: 1, max: 300, random: 0) == 0.5)
        #expect(WebhookDispatcher.backoff(attempt: 1, max: 300, random: 1) == 1)
        #expect(WebhookDispatcher.backoff(attempt: 4, max: 300, random: 1) == 8)
        #expect(WebhookDispatcher.backoff(attempt: 20, max: 300, random: 0) == 150)
        #expect(WebhookDispatcher.backoff(attempt: 1000, max: 300, random: 1) == 300)
        for attempt in 1...30 {
            let d = WebhookDispatcher.backoff(attempt: attempt, max: 60)
            #expect(d > 0 && d <= 60)
        }
    }
}
