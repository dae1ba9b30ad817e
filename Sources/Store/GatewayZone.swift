import Foundation

/// The trust zone of a process (DESIGN §1, §6): the sidecar's (tokens, payments, customers and
/// every other table it serves) or the gateway's (the processor ledger, the sandbox's 3-D Secure
/// and refund tables, the fingerprint guessing counters: what the gateway decides from). On one
/// PostgreSQL store shared by both, each zone connects as its own role, and the gateway zone's
/// tables are its role's: the sidecar's role cannot write them (deploy/README.md, "PostgreSQL:
/// one role per zone").
public enum Zone: String, Sendable {
    case sidecar, gateway
}

extension Migrations {
    /// The gateway zone's tables, in one place: made by gateway-zone steps only, owned by the
    /// gateway's role and written by no other role (`holdGatewayZone`). A table listed before its
    /// migration exists is skipped until it does.
    public static let gatewayZoneTables = [
        "vault_ledger", "vault_ledger_operations", "vault_sandbox_3ds", "vault_sandbox_3ds_used", "vault_sandbox_refund_rules",
        "vault_fingerprint_guesses",
    ]

    /// The privileges that let a role change a table's rows, add a trigger that would, or hold
    /// them with a foreign key of its own (a row the gateway could then not delete).
    static let writePrivileges = "INSERT, UPDATE, DELETE, TRUNCATE, TRIGGER, REFERENCES"

    /// The gateway zone's tables of `0002-ledger` and `0004-payment-lifecycle`, moved into a step
    /// of the gateway's own: the processor ledger (one row per payment id a processor was asked to
    /// charge, shared by every gateway of the store), its operations (one row per capture, void or
    /// refund id, the processor's idempotency key), the sandbox's 3-D Secure challenges and used
    /// request ids, and its refund behaviour of a test card (recorded at authorization: the card
    /// is never needed again). Each is made where the store lacks it, as it was made before: a
    /// store whose earlier version made them keeps them (`holdGatewayZone` hands them to the
    /// gateway's role). A gateway's own ledger file of earlier versions (sandbox or relay, SQLite)
    /// joins the ledger here.
    static let gatewayZone = Migration("0017-gateway-zone", zone: .gateway) { (tx) throws(StoreError) in
        let d = tx.dialect
        let tables: [(String, [String])] = [
            ("vault_ledger", [
                """
                CREATE TABLE vault_ledger (
                    payment_id TEXT PRIMARY KEY NOT NULL, processor TEXT NOT NULL, amount \(d.int) NOT NULL,
                    currency TEXT NOT NULL, envelope_id TEXT NOT NULL, state TEXT NOT NULL, status TEXT, decline_code TEXT,
                    reference TEXT, transaction_id TEXT, attempts \(d.int) NOT NULL DEFAULT 1, lease_until \(d.int),
                    next_try_at \(d.int), deadline_at \(d.int), reason TEXT, created_at \(d.int) NOT NULL,
                    updated_at \(d.int) NOT NULL)
                """,
                "CREATE INDEX vault_ledger_unsettled ON vault_ledger (next_try_at) WHERE state <> 'done'",
            ]),
            ("vault_sandbox_3ds", ["CREATE TABLE vault_sandbox_3ds (transaction_id TEXT PRIMARY KEY NOT NULL, payment_id TEXT NOT NULL, request_jti TEXT NOT NULL)"]),
            ("vault_sandbox_3ds_used", ["CREATE TABLE vault_sandbox_3ds_used (jti TEXT PRIMARY KEY NOT NULL)"]),
            ("vault_ledger_operations", [
                """
                CREATE TABLE vault_ledger_operations (
                    operation_id TEXT PRIMARY KEY NOT NULL, payment_id TEXT NOT NULL, kind TEXT NOT NULL, processor TEXT NOT NULL,
                    amount \(d.int) NOT NULL, currency TEXT NOT NULL, state TEXT NOT NULL, status TEXT, failure_code TEXT,
                    reference TEXT, reason TEXT, created_at \(d.int) NOT NULL, updated_at \(d.int) NOT NULL)
                """,
                "CREATE INDEX vault_ledger_operations_payment ON vault_ledger_operations (payment_id)",
            ]),
            ("vault_sandbox_refund_rules", ["CREATE TABLE vault_sandbox_refund_rules (payment_id TEXT PRIMARY KEY NOT NULL, rule TEXT NOT NULL)"]),
        ]
        for (table, statements) in tables where try await !tx.tableExists(table) {
            for sql in statements { try await tx.query(sql) }
        }
        try await importLegacyLedgers(tx)
    }

    /// A gateway's own ledger file from before (sandbox or relay, SQLite): its rows join the ledger.
    static func importLegacyLedgers(_ tx: Transaction) async throws(StoreError) {
        if try await tx.tableExists("sandbox_charges") {
            try await tx.query("""
                INSERT INTO vault_ledger (payment_id, processor, amount, currency, envelope_id, state, status, decline_code,
                                          reference, transaction_id, created_at, updated_at)
                SELECT payment_id, 'sandbox', amount, currency, envelope_id, 'done', status, decline_code, reference,
                       transaction_id, created_at * 1000, created_at * 1000 FROM sandbox_charges
                """)
            try await tx.query("INSERT INTO vault_sandbox_3ds SELECT transaction_id, payment_id, request_jti FROM sandbox_3ds")
            try await tx.query("INSERT INTO vault_sandbox_3ds_used SELECT jti FROM sandbox_3ds_used")
            for t in ["sandbox_charges", "sandbox_3ds", "sandbox_3ds_used"] { try await tx.query("DROP TABLE \(t)") }
        }
        if try await tx.tableExists("relay_charges") {
            // A row left 'sent' was sent and never answered: its outcome is unknown, to settle.
            try await tx.query("""
                INSERT INTO vault_ledger (payment_id, processor, amount, currency, envelope_id, state, status, decline_code,
                                          reference, next_try_at, created_at, updated_at)
                SELECT payment_id, 'relay', amount, currency, envelope_id, CASE state WHEN 'done' THEN 'done' ELSE 'unknown' END,
                       status, decline_code, reference, created_at * 1000, created_at * 1000, created_at * 1000 FROM relay_charges
                """)
            try await tx.query("DROP TABLE relay_charges")
        }
    }

    /// PostgreSQL: `vault_migrations` is the bookkeeping of both zones, so whichever zone's role
    /// made it lets every role read it and record a step (`SELECT, INSERT` to PUBLIC, once). Its
    /// rows decide nothing about the gateway zone's tables: `holdGatewayZone` checks those
    /// themselves at every gateway start.
    static func shareBookkeeping(_ tx: Transaction) async throws(StoreError) {
        let unshared = try await tx.query("""
            SELECT 1 FROM pg_class WHERE oid = to_regclass('vault_migrations') AND pg_has_role(relowner, 'USAGE')
                AND NOT (has_table_privilege('public', oid, 'SELECT') AND has_table_privilege('public', oid, 'INSERT'))
            """)
        if !unshared.isEmpty { try await tx.query("GRANT SELECT, INSERT ON vault_migrations TO PUBLIC") }
    }

    /// PostgreSQL, at every gateway start (under the migration lock): each gateway-zone table
    /// there is owned by the gateway's role (the role connected), and no other role has been
    /// granted a write on it. A table another role owns is taken (`ALTER TABLE … OWNER TO`) when
    /// this role may (a member of the owner's role, or a superuser), and refused otherwise, naming
    /// what an operator runs; write grants to other roles (PUBLIC included) are revoked. Checked
    /// at each start rather than once by a step: the sidecar's role records steps too, so a
    /// record alone proves nothing about who owns the tables.
    /// - Throws: `STORE_UNAVAILABLE`.
    static func holdGatewayZone(_ tx: Transaction) async throws(StoreError) {
        for table in gatewayZoneTables {
            let rows = try await tx.query("""
                SELECT quote_ident(pg_get_userbyid(relowner)), quote_ident(current_user), pg_get_userbyid(relowner) = current_user,
                       pg_has_role(relowner, 'USAGE')
                FROM pg_class WHERE oid = to_regclass(?)
                """, [table])
            guard let row = rows.first else { continue }
            let owner = try row.string(0), me = try row.string(1)
            if try !row.bool(2) {
                guard try row.bool(3) else {
                    throw StoreError(.unavailable, """
                        \(table) is owned by the role \(owner), not by the gateway's role \(me), which cannot take it: the gateway zone's \
                        tables are the gateway's (deploy/README.md, "PostgreSQL: one role per zone"); as the database's owner run \
                        ALTER TABLE … OWNER TO \(me) for \(gatewayZoneTables.joined(separator: ", ")), or GRANT \(owner) TO \(me) before this start
                        """)
                }
                try await tx.query("ALTER TABLE \(table) OWNER TO CURRENT_USER")
            }
            for (grantee, _) in try await otherWriters(table, tx) {
                try await tx.query("REVOKE \(writePrivileges) ON \(table) FROM \(grantee)")
            }
            // A grant made by a role other than the owner is that role's to revoke.
            if let other = try await otherWriters(table, tx).first?.name {
                throw StoreError(.unavailable, "the role \(other) may write \(table) (a grant made by another role than \(me)): revoke it; the gateway zone's tables are the gateway's alone")
            }
        }
    }

    /// The roles other than its owner granted a write on `table` (PUBLIC included): the name to
    /// put in a statement (quoted), and as is.
    static func otherWriters(_ table: String, _ tx: Transaction) async throws(StoreError) -> [(quoted: String, name: String)] {
        try await tx.query("""
            SELECT DISTINCT CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END,
                   CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee)::text END
            FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
            WHERE c.oid = to_regclass(?) AND a.grantee <> c.relowner AND a.privilege_type IN ('INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'TRIGGER', 'REFERENCES')
            """, [table]).map { (r) throws(StoreError) in (try r.string(0), try r.string(1)) }
    }
}
