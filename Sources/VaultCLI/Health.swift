import ArgumentParser
import Foundation
import ServerCLI
import VaultClient
import VaultCrypto

/// `vault health`: the probe of either server (container HEALTHCHECK, Kubernetes exec probes,
/// scripts): liveness (`GET /v1/health`) or readiness (`GET /v1/health/ready`) over the socket.
struct Health: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Ask a sidecar or gateway over its socket whether it is up, or ready.",
        discussion: """
            Exit 0 when the server answers (with --ready: when every readiness check passed: \
            store, gateway, keys; on a gateway store, keys, processor), printing one line. \
            Otherwise one line `vault: CODE: reason` on standard error and the code's exit \
            status: 8 SIDECAR_UNREACHABLE (nothing listens on the socket, or no answer within \
            --timeout), 16 NOT_READY (the server answers, a check failed: the line names it), \
            10 PEER_NOT_ALLOWED. Both servers answer these routes to their own user and root, \
            whatever their allow lists say. Without --socket: $VAULT_HEALTH_SOCKET.

            Examples:
              vault health --socket /run/vault-sidecar/vault.sock
              vault health --socket /run/vault-sidecar/vault.sock --ready
              vault health --socket /run/vault-gateway/gateway.sock \\
                --ready --timeout 2
            """
    )

    @Option(help: "The server's socket, sidecar or gateway (default: $VAULT_HEALTH_SOCKET).", completion: .file())
    var socket: String?

    @Flag(help: "Ask for readiness (GET /v1/health/ready), not liveness (GET /v1/health).")
    var ready = false

    @Option(help: "Seconds to wait to connect, and for the answer.")
    var timeout: Double = 5

    func validate() throws {
        guard timeout > 0, timeout <= 300 else { throw ValidationError("--timeout is seconds, more than 0 and at most 300") }
        guard socket ?? Self.environmentSocket != nil else { throw ValidationError("give --socket PATH (or set VAULT_HEALTH_SOCKET)") }
    }

    static var environmentSocket: String? {
        ProcessInfo.processInfo.environment["VAULT_HEALTH_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
    }

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            guard let path = socket ?? Self.environmentSocket else { throw VaultError(.configInvalid, "no socket") }
            var client = SidecarClient(socketPath: path, timeout: timeout)
            client.serverName = "the server"
            let answer = try client.get(ready ? "/v1/health/ready" : "/v1/health")
            if let error = answer.error { throw error }
            guard answer.status == 200 else { throw VaultError(.sidecarError, "the server answered HTTP \(answer.status)") }
            try StandardIO.write(Self.summary(answer.json, ready: ready) + "\n")
        }
    }

    /// `ready (gateway ok, keys ok, store ok)`, or `ok` (with the gateway's processor).
    static func summary(_ json: [String: Any]?, ready: Bool) -> String {
        if ready {
            let checks = (json?["checks"] as? [String: Any] ?? [:]).keys.sorted()
            return checks.isEmpty ? "ready" : "ready (" + checks.map { $0 + " ok" }.joined(separator: ", ") + ")"
        }
        if let processor = json?["processor"] as? String { return "ok (gateway, processor \(processor))" }
        return "ok"
    }
}
