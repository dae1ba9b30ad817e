import Foundation
import Logging
import PostgresNIO
import Store
import Testing

/// Issue 37, item 7 (DESIGN §6, "Zones hold on a shared database too"): on one PostgreSQL
/// database, the sidecar and the gateway each connect as a role of their own (deploy/README.md,
/// "PostgreSQL: one role per zone"). Whichever starts first, both start; the gateway zone's
/// tables are the gateway role's, and the sidecar's role is refused every write on them.
@Suite(.enabled(if: StoreBackend.postgresSocket != nil, "needs VAULT_TEST_POSTGRES_SOCKET (scripts/test)"))
struct ZoneRolesTests {
    /// A fresh database, and two login roles (one per zone) that may create tables in it and
    /// nothing more, as deploy/README.md has an operator make them; `admin` is the superuser.
    struct TwoRoles {
        let database: String, sidecarRole: String, gatewayRole: String
        let clients: [PG]
        let admin: Database, sidecar: Database, gateway: Database

        init() async throws {
            let socket = try #require(StoreBackend.postgresSocket)
            let suffix = UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16)
            (database, sidecarRole, gatewayRole) = ("vault_zones_\(suffix)", "vault_sidecar_\(suffix)", "vault_gateway_\(suffix)")
            let server = PG(socket: socket, database: "postgres")
            for sql in ["CREATE DATABASE \(database)", "CREATE ROLE \(sidecarRole) LOGIN", "CREATE ROLE \(gatewayRole) LOGIN"] {
                try await server.client.query(PostgresQuery(unsafeSQL: sql))
            }
            let here = PG(socket: socket, database: database)
            let sidecar = PG(socket: socket, database: database, user: sidecarRole), gateway = PG(socket: socket, database: database, user: gatewayRole)
            clients = [server, here, sidecar, gateway]
            let log = Logger(label: "test.zones")
            (admin, self.sidecar, self.gateway) = (
                Database(postgres: here.client, logger: log), Database(postgres: sidecar.client, logger: log), Database(postgres: gateway.client, logger: log)
            )
            try await admin.write("GRANT CREATE ON SCHEMA public TO \(sidecarRole), \(gatewayRole)")
        }

        func remove() async {
            for c in clients.dropFirst() { c.stop() }
            for sql in ["DROP DATABASE IF EXISTS \(database) WITH (FORCE)", "DROP ROLE IF EXISTS \(sidecarRole)", "DROP ROLE IF EXISTS \(gatewayRole)"] {
                _ = try? await clients[0].client.query(PostgresQuery(unsafeSQL: sql))
            }
            clients[0].stop()
        }

        /// Each gateway-zone table there, with its owner.
        func gatewayTableOwners() async throws -> [String: String] {
            let names = Migrations.gatewayZoneTables.map { "'\($0)'" }.joined(separator: ", ")
            var out: [String: String] = [:]
            for r in try await admin.query("""
                SELECT c.relname::text, pg_get_userbyid(c.relowner)::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname IN (\(names))
                """) {
                out[try r.string(0)] = try r.string(1)
            }
            return out
        }

        /// The gateway's tables are its role's, every one of the ledger's is there, and the
        /// sidecar's role is refused (SQLSTATE 42501) each way of changing their rows.
        func gatewayHoldsItsZone() async throws {
            let owners = try await gatewayTableOwners()
            for t in ["vault_ledger", "vault_ledger_operations", "vault_sandbox_3ds", "vault_sandbox_3ds_used", "vault_sandbox_refund_rules"] {
                #expect(owners[t] == gatewayRole, "\(t): \(owners[t] ?? "missing")")
            }
            #expect(owners.values.allSatisfy { $0 == gatewayRole }, "\(owners)")
            for table in owners.keys.sorted() {
                let column = try #require(try await admin.query(
                    "SELECT attname::text FROM pg_attribute WHERE attrelid = to_regclass(?) AND attnum = 1", [table]).first?.string(0))
                for sql in ["INSERT INTO \(table) DEFAULT VALUES", "UPDATE \(table) SET \(column) = \(column)", "DELETE FROM \(table)", "TRUNCATE \(table)"] {
                    do throws(StoreError) {
                        try await sidecar.write(sql)
                        Issue.record("the sidecar's role ran \(sql)")
                    } catch {
                        #expect(error.message.contains("SQLSTATE 42501"), "\(sql): \(error)")
                    }
                }
            }
        }

        /// The gateway's ledger works under its role: a sandbox charge with its 3-D Secure
        /// challenge and refund rule, its settlement, a refund operation.
        func ledgerWorksAsTheGateway() async throws {
            let ledger = LedgerStore(database: gateway), now = Date()
            let id = "pay_" + UUID().uuidString.prefix(8).lowercased()
            let e = LedgerEntry(paymentID: id, processor: "sandbox", amount: 1000, currency: "EUR", envelopeID: "env_1", state: .sending,
                                leaseUntil: now.addingTimeInterval(30), createdAt: now)
            #expect(try await ledger.claim(e, challenge: (transactionID: "tx_" + id, requestJTI: "jti_" + id), refundRule: "pending") == .claimed)
            #expect(try await ledger.challenge("tx_" + id)?.paymentID == id)
            #expect(try await ledger.refundRule(id) == "pending")
            #expect(try await ledger.settle(id, status: "succeeded", declineCode: nil, reference: "ch_1", now: now))
            let refund = LedgerOperation(operationID: "op_" + id, paymentID: id, kind: "refund", processor: "sandbox", amount: 400, currency: "EUR",
                                         state: .sending, createdAt: now)
            guard case .claimed = try await ledger.claimOperation(refund) else {
                Issue.record("the refund was not recorded")
                return
            }
            #expect(try await ledger.operation("op_" + id)?.amount == 400)
            #expect(try await ledger.entry(id)?.status == "succeeded")
        }
    }

    /// The sidecar's role migrates first (its own zone only: no gateway table is made), then the
    /// gateway's role: both start, and the gateway holds its zone.
    @Test func theSidecarFirstThenTheGateway() async throws {
        let t = try await TwoRoles()
        defer { Task { await t.remove() } }
        try await t.sidecar.migrate(as: .sidecar)
        #expect(try await t.gatewayTableOwners().isEmpty)
        try await t.gateway.migrate(as: .gateway)
        // Both again (restarts), in either order: nothing to do, nothing refused.
        try await t.sidecar.migrate(as: .sidecar)
        try await t.gateway.migrate(as: .gateway)
        #expect(Set(try await t.admin.appliedMigrations()) == Set(Migrations.all.map(\.name)))
        try await t.gatewayHoldsItsZone()
        try await t.ledgerWorksAsTheGateway()
    }

    /// The gateway's role migrates first (its own zone only), then the sidecar's.
    @Test func theGatewayFirstThenTheSidecar() async throws {
        let t = try await TwoRoles()
        defer { Task { await t.remove() } }
        try await t.gateway.migrate(as: .gateway)
        try await t.sidecar.migrate(as: .sidecar)
        try await t.gateway.migrate(as: .gateway)
        #expect(Set(try await t.admin.appliedMigrations()) == Set(Migrations.all.map(\.name)))
        try await t.gatewayHoldsItsZone()
        try await t.ledgerWorksAsTheGateway()
        // The sidecar's own tables are its role's.
        let owner = try await t.admin.query("SELECT pg_get_userbyid(relowner)::text FROM pg_class WHERE oid = to_regclass('vault_payments')")
        #expect(try owner.first?.string(0) == t.sidecarRole)
    }

    /// The issue's store: every table made by the sidecar's role (as earlier versions did, the
    /// sidecar starting first), and the ledger granted by it to every role. The gateway's role cannot take
    /// the tables and refuses to start, naming what to run; once it may (a member of the
    /// sidecar's role, for its start), it takes them and revokes the sidecar's grants.
    @Test func aStoreTheSidecarMadeWholeIsTakenByTheGateway() async throws {
        let t = try await TwoRoles()
        defer { Task { await t.remove() } }
        try await t.sidecar.migrate()
        #expect(try await t.gatewayTableOwners().values.allSatisfy { $0 == t.sidecarRole })
        try await t.sidecar.write("GRANT ALL ON vault_ledger TO PUBLIC")
        do throws(StoreError) {
            try await t.gateway.migrate(as: .gateway)
            Issue.record("the gateway started on tables the sidecar's role owns")
        } catch {
            #expect(error.code == .unavailable && error.message.contains("is owned by the role \(t.sidecarRole)"), "\(error)")
            #expect(error.message.contains("ALTER TABLE … OWNER TO \(t.gatewayRole)"), "\(error)")
        }
        #expect(try await t.gatewayTableOwners().values.allSatisfy { $0 == t.sidecarRole }, "nothing changed")
        try await t.admin.write("GRANT \(t.sidecarRole) TO \(t.gatewayRole)")
        try await t.gateway.migrate(as: .gateway)
        // Handed over, and the ledger's grant to PUBLIC revoked.
        try await t.admin.write("REVOKE \(t.sidecarRole) FROM \(t.gatewayRole)")
        try await t.gatewayHoldsItsZone()
        try await t.ledgerWorksAsTheGateway()
        // A write granted to the sidecar later (by the gateway's role) is revoked at the next start.
        try await t.gateway.write("GRANT INSERT, DELETE ON vault_ledger TO \(t.sidecarRole)")
        try await t.gateway.migrate(as: .gateway)
        try await t.gatewayHoldsItsZone()
        try await t.sidecar.migrate(as: .sidecar)
    }
}
