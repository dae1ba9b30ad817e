import Foundation
import Testing

/// Issue 37, item 7, with the real binary: `vault serve` and `vault gateway` on one PostgreSQL
/// database, each as a role of its own (deploy/README.md, "PostgreSQL: one role per zone").
/// Whichever starts first, both start and a card is paid through them; the sidecar's role is
/// then refused (SQLSTATE 42501) every write on the gateway zone's tables.
@Suite(.serialized, .ownThread) struct ZoneRolesCLITests {
    /// A fresh database and two login roles made by the test server's superuser, as the README's
    /// block makes them; their store URLs.
    struct Roles {
        let dir: String, port: String, database: String, sidecarRole: String, gatewayRole: String

        init() throws {
            let socket = try #require(GatewayCLITests.postgresSocket)
            (dir, port) = ((socket as NSString).deletingLastPathComponent, String(socket.split(separator: ".").last ?? "5432"))
            let suffix = UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16)
            (database, sidecarRole, gatewayRole) = ("vault_zones_\(suffix)", "vault_sidecar_\(suffix)", "vault_gateway_\(suffix)")
            for sql in ["CREATE DATABASE \(database)", "CREATE ROLE \(sidecarRole) LOGIN", "CREATE ROLE \(gatewayRole) LOGIN"] {
                let r = try psql("postgres", "postgres", sql)
                #expect(r.status == 0, "\(sql): \(r.stderr)")
            }
            let r = try psql("postgres", database, "GRANT CREATE ON SCHEMA public TO \(sidecarRole), \(gatewayRole)")
            #expect(r.status == 0, "\(r.stderr)")
        }

        func url(_ role: String) -> String { "postgres://\(role)@localhost:\(port)/\(database)?host=\(dir)" }

        /// psql as `role` (errors verbose: with their SQLSTATE).
        func psql(_ role: String, _ db: String, _ sql: String) throws -> RunResult {
            let asPG = getuid() == 0 ? ["runuser", "-u", "postgres", "--"] : []
            return try run("/usr/bin/env", asPG + ["psql", "-X", "-h", dir, "-p", port, "-U", role, "-d", db, "-At", "-v", "VERBOSITY=verbose", "-c", sql])
        }

        func remove() {
            for sql in ["DROP DATABASE IF EXISTS \(database) WITH (FORCE)", "DROP ROLE IF EXISTS \(sidecarRole)", "DROP ROLE IF EXISTS \(gatewayRole)"] {
                _ = try? psql("postgres", "postgres", sql)
            }
        }
    }

    @Test(.enabled(if: GatewayCLITests.postgresSocket != nil, "needs VAULT_TEST_POSTGRES_SOCKET (scripts/test)"), arguments: [false, true])
    func eachZoneItsOwnRole(gatewayFirst: Bool) throws {
        let roles = try Roles()
        var g = try GatewayCLITests.Gateway()
        var s = try ServeCLITests.Sidecar()
        defer { s.process?.terminate(); g.process?.terminate(); s.remove(); g.remove(); roles.remove() }
        // The sidecar seals to the gateway's key.
        let publicKeys = s.dir + "/public-keys"
        try FileManager.default.createDirectory(atPath: publicKeys, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: "\(g.keys)/\(g.kid).pub", toPath: "\(publicKeys)/\(g.kid).pub")
        let sidecarArguments = ["--gateway", g.socket, "--store", roles.url(roles.sidecarRole)]
        if gatewayFirst {
            try g.start(store: roles.url(roles.gatewayRole))
            try s.start(keysDir: publicKeys, extra: sidecarArguments)
        } else {
            try s.start(keysDir: publicKeys, extra: sidecarArguments)
            try g.start(store: roles.url(roles.gatewayRole))
        }
        #expect(g.process?.isRunning == true, "\(g.logs())")
        #expect(s.process?.isRunning == true, "\(s.logs())")
        for socket in [g.socket, s.socket] {
            let ready = try run(vaultBinary, ["health", "--socket", socket, "--ready"])
            #expect(ready.status == 0, "\(socket): \(ready.stderr)")
        }

        // A card paid through both: the sidecar's tables and the gateway's ledger each written by their own role.
        let (made, token) = try s.curl("POST", "/v1/tokens", #"{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2030,"cvc":"123"}}"#)
        #expect(made == 201, "\(token)")
        let tok = (try? JSONSerialization.jsonObject(with: Data(token.utf8)) as? [String: Any])?["token"] as? String ?? ""
        let (paid, payment) = try s.curl("POST", "/v1/payments", #"{"token":"\#(tok)","amount":1999,"currency":"EUR","idempotency_key":"k1"}"#)
        #expect(paid == 201 && payment.contains(#""status":"succeeded""#), "\(payment)")
        #expect(try roles.psql("postgres", roles.database, "SELECT count(*) FROM vault_ledger").out.trimmingCharacters(in: .whitespacesAndNewlines) == "1")

        // The gateway zone's tables: the gateway's role's, and the sidecar's role writes none of them.
        let owners = try roles.psql("postgres", roles.database, """
            SELECT relname || ' ' || pg_get_userbyid(relowner) FROM pg_class
            WHERE relkind = 'r' AND relname IN ('vault_ledger', 'vault_ledger_operations', 'vault_sandbox_3ds', 'vault_sandbox_3ds_used',
                                                'vault_sandbox_refund_rules', 'vault_fingerprint_guesses') ORDER BY relname
            """).out.split(separator: "\n").map(String.init)
        #expect(owners.count >= 5 && owners.allSatisfy { $0.hasSuffix(" " + roles.gatewayRole) }, "\(owners)")
        for table in owners.map({ String($0.split(separator: " ")[0]) }) {
            let column = try roles.psql("postgres", roles.database, "SELECT attname FROM pg_attribute WHERE attrelid = '\(table)'::regclass AND attnum = 1")
                .out.trimmingCharacters(in: .whitespacesAndNewlines)
            for sql in ["INSERT INTO \(table) DEFAULT VALUES", "UPDATE \(table) SET \(column) = \(column)", "DELETE FROM \(table)", "TRUNCATE \(table)"] {
                let r = try roles.psql(roles.sidecarRole, roles.database, sql)
                #expect(r.status != 0 && r.stderr.contains("42501"), "\(sql): \(r.status) \(r.stderr)")
            }
        }
        #expect(try roles.psql("postgres", roles.database, "SELECT count(*) FROM vault_ledger").out.trimmingCharacters(in: .whitespacesAndNewlines) == "1")

        for p in [s.process!, g.process!] {
            p.terminate()
            p.waitUntilExit()
            #expect(p.terminationStatus == 0)
        }
    }
}
