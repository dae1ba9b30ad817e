import Store
import Foundation
import PostgresNIO
import Sidecar
import Testing
import VaultCrypto

/// `--store` parsing and TLS to PostgreSQL (sslmode as libpq has it, without the clear-text
/// fallbacks). The TLS tests run against the loopback listener scripts/test starts: TLS only
/// (pg_hba rejects clear text), a certificate for localhost from a throwaway CA.
@Suite struct StoreLocationTests {
    static let env = ProcessInfo.processInfo.environment
    static let tlsServer = env["VAULT_TEST_POSTGRES_TLS"]
    static let ca = env["VAULT_TEST_POSTGRES_CA"]
    static let otherCA = env["VAULT_TEST_POSTGRES_OTHER_CA"]

    func postgres(_ text: String) throws -> StoreLocation.PostgresLocation {
        guard case .postgres(let p) = try StoreLocation(text) else { throw VaultError(.storeLocationInvalid, "not postgres") }
        return p
    }

    /// The pool opens all its connections at start and sends no keep-alive query: PostgresNIO's
    /// pool starts a timer on every release otherwise, and each one kept memory
    /// (`MemoryCLITests` measures the sidecar).
    @Test func thePoolStartsNoTimers() throws {
        for text in ["postgres://v@/vault?host=/run/postgresql", "postgres://v@localhost/vault"] {
            let config = try postgres(text).configuration()
            #expect(config.options.minimumConnections == StoreLocation.PostgresLocation.maximumConnections)
            #expect(config.options.maximumConnections == StoreLocation.PostgresLocation.maximumConnections)
            #expect(config.options.keepAliveBehavior == nil)
        }
    }

    @Test func sslModesAndDefaults() throws {
        #expect(try postgres("postgres://v@db.internal/vault").tls.mode == .verifyFull)
        #expect(try postgres("postgres://v@localhost/vault").tls.mode == .disable)
        #expect(try postgres("postgres://v@127.0.0.1:6543/vault").tls.mode == .disable)
        #expect(try postgres("postgres://v@/vault?host=/run/postgresql").tls.mode == .disable)
        let p = try postgres("postgres://v:pw@db.internal:6543/vault?sslmode=verify-ca&sslrootcert=/etc/ca.pem")
        #expect(p.tls.mode == .verifyCA && p.tls.rootCertificatePath == "/etc/ca.pem" && p.port == 6543 && p.password == "pw")
        #expect(try postgres("postgres://v@db.internal/vault?sslmode=require").tls.mode == .require)
        #expect(try postgres("postgres://v@db.internal/vault?sslmode=require&sslrootcert=/etc/ca.pem").tls.mode == .verifyCA)
        for bad in [
            "postgres://v@db.internal/vault?sslmode=prefer", "postgres://v@db.internal/vault?sslmode=allow",
            "postgres://v@db.internal/vault?sslmode=bogus", "postgres://v@db.internal/vault?sslcert=/c.pem",
            "postgres://v@/vault?host=/run/postgresql&sslmode=require", "postgres://v@db.internal/vault?application_name=x",
            "postgres://v@db.internal/vault?sslmode=verify-ca",
        ] {
            #expect(throws: VaultError.self, "\(bad)") { try StoreLocation(bad) }
        }
        #expect(throws: VaultError.self) {
            try postgres("postgres://v@db.internal/vault?sslrootcert=/nonexistent/ca.pem").configuration()
        }
    }

    /// Runs `SELECT ssl FROM pg_stat_ssl` for this connection through a client made from `url`.
    func connectionUsesTLS(_ url: String) async throws -> Bool {
        let client = PostgresClient(configuration: try postgres(url).configuration())
        return try await withThrowingTaskGroup(of: Bool?.self) { group in
            group.addTask { await client.run(); return nil }
            group.addTask {
                let rows = try await client.query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
                for try await ssl in rows.decode(Bool.self) { return ssl }
                return false
            }
            group.addTask {
                try await Task.sleep(for: .seconds(30))
                throw VaultError(.storeUnavailable, "timed out (test)")
            }
            defer { group.cancelAll() }
            while let result = try await group.next() {
                if let result { return result }
            }
            return false
        }
    }

    @Test(.enabled(if: tlsServer != nil)) func verifyFullWithTheRightAuthorityConnectsOverTLS() async throws {
        let url = "postgres://postgres@\(Self.tlsServer!)/postgres?sslmode=verify-full&sslrootcert=\(Self.ca!)"
        #expect(try await connectionUsesTLS(url))
        let require = "postgres://postgres@\(Self.tlsServer!)/postgres?sslmode=require"
        #expect(try await connectionUsesTLS(require))
    }

    /// The start-up probe's refusal, which names the TLS failure.
    func probeFailure(_ url: String) async throws -> VaultError? {
        let location = try postgres(url)
        do throws(VaultError) {
            try await location.probe(logger: .init(label: "test"))
            return nil
        } catch {
            return error
        }
    }

    @Test(.enabled(if: tlsServer != nil)) func anUntrustedAuthorityIsRefused() async throws {
        let url = "postgres://postgres@\(Self.tlsServer!)/postgres?sslmode=verify-full&sslrootcert=\(Self.otherCA!)"
        let error = try #require(try await probeFailure(url))
        #expect(error.code.rawValue == "STORE_UNAVAILABLE")
        #expect(error.message.contains("sslmode=verify-full") && error.message.localizedCaseInsensitiveContains("certificate"), "\(error.message)")
        #expect(try await probeFailure("postgres://postgres@\(Self.tlsServer!)/postgres?sslmode=verify-full&sslrootcert=\(Self.ca!)") == nil)
    }

    @Test(.enabled(if: tlsServer != nil)) func verifyFullChecksTheHostNameAndVerifyCADoesNot() async throws {
        // The certificate names only "localhost"; 127.0.0.1 reaches the same server.
        let port = Self.tlsServer!.split(separator: ":").last!
        let full = "postgres://postgres@127.0.0.1:\(port)/postgres?sslmode=verify-full&sslrootcert=\(Self.ca!)"
        let error = try #require(try await probeFailure(full))
        #expect(error.message.contains("sslmode=verify-full"), "\(error.message)")
        let ca = "postgres://postgres@127.0.0.1:\(port)/postgres?sslmode=verify-ca&sslrootcert=\(Self.ca!)"
        #expect(try await probeFailure(ca) == nil)
        #expect(try await connectionUsesTLS(ca))
    }

    @Test(.enabled(if: tlsServer != nil)) func clearTextIsRefusedByTheServer() async throws {
        // pg_hba rejects non-TLS TCP: proves the TLS tests above really went over TLS.
        let port = Self.tlsServer!.split(separator: ":").last!
        let error = try #require(try await probeFailure("postgres://postgres@localhost:\(port)/postgres?sslmode=disable"))
        #expect(error.message.contains("sslmode=disable"), "\(error.message)")
    }

    @Test func tlsIsConfiguredInCI() {
        if Self.env["CI"] == "true" {
            #expect(Self.tlsServer != nil && Self.ca != nil, "CI runs without VAULT_TEST_POSTGRES_TLS: PostgreSQL TLS went untested")
        }
    }
}
