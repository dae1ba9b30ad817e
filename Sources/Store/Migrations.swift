import Foundation
import GRDB

/// One versioned step of the schema. Both backends apply the same list, in order, and record each
/// applied name in `vault_migrations`; a name is never edited once released (stores made by
/// earlier versions upgrade in place by applying what they lack).
///
/// Each step belongs to a zone (`Zone`) and touches only that zone's tables: on a PostgreSQL
/// store shared by both zones, each process applies its own zone's steps as its own role, so
/// the gateway zone's tables are created by (and owned by) the gateway's role.
public struct Migration: Sendable {
    public let name: String
    /// The zone whose process applies it on PostgreSQL (`Database.migrate(as:)`).
    public let zone: Zone
    let apply: @Sendable (Transaction) async throws(StoreError) -> Void

    init(_ name: String, zone: Zone = .sidecar, _ apply: @escaping @Sendable (Transaction) async throws(StoreError) -> Void) {
        self.name = name
        self.zone = zone
        self.apply = apply
    }

    /// A migration that runs statements built for the backend's dialect.
    init(_ name: String, zone: Zone = .sidecar, statements: @escaping @Sendable (Dialect) -> [String]) {
        self.init(name, zone: zone) { (tx) throws(StoreError) in
            for sql in statements(tx.dialect) { try await tx.query(sql) }
        }
    }
}

extension Database {
    /// The advisory lock that serializes migrations of one PostgreSQL database (sidecars and
    /// gateways starting together).
    static let migrationLock: Int64 = 727365001

    /// Applies the migrations this store lacks, in one transaction (on PostgreSQL under the
    /// advisory lock), then runs SQLite's pending maintenance (the old-CVC scrub). Idempotent.
    ///
    /// `zone`: the zone of the process migrating (`Zone`). On PostgreSQL it applies only that
    /// zone's steps (the other zone's process applies its own, as its own role, whichever starts
    /// first), and the gateway then holds its zone's tables (`Migrations.holdGatewayZone`: owned
    /// by its role, written by no other). nil (tools, tests), and always on SQLite (a file per
    /// process): every step.
    /// - Throws: `STORE_UNAVAILABLE` (on PostgreSQL also when a gateway-zone table is another
    ///   role's and cannot be taken); `STORE_TOO_NEW` when the store records a migration this
    ///   version does not know (a newer vault made it: refuse rather than guess).
    public func migrate(as zone: Zone? = nil) async throws(StoreError) {
        try await transaction { (tx) throws(StoreError) in
            let postgres = tx.dialect.backend == .postgres
            if postgres {
                try await tx.query("SELECT pg_advisory_xact_lock(\(Self.migrationLock))")
            }
            try await tx.query("CREATE TABLE IF NOT EXISTS vault_migrations (name TEXT PRIMARY KEY, applied_at \(tx.dialect.int) NOT NULL)")
            if postgres { try await Migrations.shareBookkeeping(tx) }
            var applied = Set<String>()
            for row in try await tx.query("SELECT name FROM vault_migrations") { applied.insert(try row.string(0)) }
            let known = Set(Migrations.all.map(\.name))
            if let unknown = applied.subtracting(known).sorted().first {
                throw StoreError(.tooNew, "this store was migrated by a newer vault (\(unknown)); upgrade this vault")
            }
            if applied.isEmpty, tx.dialect.backend == .sqlite { try await Migrations.adoptLegacySQLite(tx) }
            let now = Millis.of(Date())
            let only = postgres ? zone : nil
            for m in Migrations.all where !applied.contains(m.name) && (only == nil || m.zone == only) {
                try await m.apply(tx)
                try await tx.query("INSERT INTO vault_migrations (name, applied_at) VALUES (?, ?)", [m.name, now])
            }
            if postgres, zone == .gateway { try await Migrations.holdGatewayZone(tx) }
        }
        if let pool = sqlitePool { try await Self.sqlite { try await Migrations.scrubLegacyCVCs(pool) } }
    }

    /// The names of the migrations applied to this store, in order of application.
    public func appliedMigrations() async throws(StoreError) -> [String] {
        try await query("SELECT name FROM vault_migrations ORDER BY applied_at, name").map { (r) throws(StoreError) in try r.string(0) }
    }
}

/// The schema, as one list for both backends (docs/configuration.md "The store").
public enum Migrations {
    public static let all: [Migration] = [
        base, ledger, cvcColumnsGone, lifecycle, createsAndReferences, listing, metadata, events, fingerprintLinks, paymentEventTokens,
        instrumentUpdated, tokenFingerprintIndex, importLines, velocity, FingerprintGuesses.migration, visibleDigits, gatewayZone,
    ]

    /// Every table the vault had when the store layer became one (tokens, payments, sessions,
    /// customers, instruments, mandates). `IF NOT EXISTS` throughout: a PostgreSQL store made
    /// before `vault_migrations` existed already has them (with these names), and adopts them.
    static let base = Migration("0001-base") { (tx) throws(StoreError) in
        let beforeScopes = try await adoptPaymentsBeforeScopes(tx)
        for sql in baseStatements(tx.dialect) { try await tx.query(sql) }
        if beforeScopes {
            // SQLite's table could not lose its UNIQUE (idempotency_key): its rows move to the
            // table just made, every one in the global scope (their replays keep working).
            try await tx.query("""
                INSERT INTO vault_payments (id, scope, idempotency_key, request, token, single_use, amount, currency, status, code,
                                            reference, next_action, created_at, updated_at)
                SELECT id, 'global', idempotency_key, request, token, single_use, amount, currency, status, code, reference,
                       next_action, created_at, updated_at FROM vault_payments_before_scopes
                """)
            try await tx.query("DROP TABLE vault_payments_before_scopes")
        }
        if try await !tx.columnExists("vault_sessions", "attempts") {
            try await tx.query("ALTER TABLE vault_sessions ADD COLUMN attempts \(tx.dialect.int) NOT NULL DEFAULT 0")
        }
    }

    /// A store made before idempotency keys had scopes (payments unique by key alone): on
    /// PostgreSQL the column is added in place (every row in the global scope) and the key's own
    /// constraint dropped; on SQLite, which cannot drop a constraint, the table is set aside for
    /// the base migration to copy (true then).
    static func adoptPaymentsBeforeScopes(_ tx: Transaction) async throws(StoreError) -> Bool {
        guard try await tx.tableExists("vault_payments"), try await !tx.columnExists("vault_payments", "scope") else { return false }
        if tx.dialect.backend == .postgres {
            try await tx.query("ALTER TABLE vault_payments ADD COLUMN scope TEXT NOT NULL DEFAULT 'global'")
            try await tx.query("ALTER TABLE vault_payments DROP CONSTRAINT IF EXISTS vault_payments_idempotency_key_key")
            return false
        }
        try await tx.query("ALTER TABLE vault_payments RENAME TO vault_payments_before_scopes")
        return true
    }

    static func baseStatements(_ d: Dialect) -> [String] {
        [
            """
            CREATE TABLE IF NOT EXISTS vault_tokens (
                token TEXT PRIMARY KEY NOT NULL, envelope TEXT NOT NULL, brand TEXT NOT NULL, bin TEXT NOT NULL,
                last4 TEXT NOT NULL, fingerprint TEXT, created_at \(d.int) NOT NULL, expires_at \(d.int) NOT NULL,
                single_use \(d.bool) NOT NULL)
            """,
            "CREATE INDEX IF NOT EXISTS vault_tokens_expires_at ON vault_tokens (expires_at)",
            "CREATE INDEX IF NOT EXISTS vault_tokens_fingerprint ON vault_tokens (fingerprint)",
            """
            CREATE TABLE IF NOT EXISTS vault_payments (
                id TEXT PRIMARY KEY NOT NULL, scope TEXT NOT NULL DEFAULT 'global', idempotency_key TEXT NOT NULL,
                request TEXT NOT NULL, token TEXT NOT NULL, single_use \(d.bool) NOT NULL, amount \(d.int) NOT NULL,
                currency TEXT NOT NULL, status TEXT NOT NULL, code TEXT, reference TEXT, next_action TEXT,
                created_at \(d.int) NOT NULL, updated_at \(d.int) NOT NULL)
            """,
            "CREATE UNIQUE INDEX IF NOT EXISTS vault_payments_scope_key ON vault_payments (scope, idempotency_key)",
            """
            CREATE UNIQUE INDEX IF NOT EXISTS vault_payments_single_use_token ON vault_payments (token)
                WHERE single_use = TRUE AND status IN ('processing','requires_action','succeeded')
            """,
            "CREATE INDEX IF NOT EXISTS vault_payments_processing ON vault_payments (updated_at) WHERE status = 'processing'",
            """
            CREATE TABLE IF NOT EXISTS vault_sessions (
                id TEXT PRIMARY KEY NOT NULL, amount \(d.int) NOT NULL, currency TEXT NOT NULL, brands TEXT NOT NULL,
                customer TEXT, status TEXT NOT NULL, payment_id TEXT, created_at \(d.int) NOT NULL,
                expires_at \(d.int) NOT NULL, attempts \(d.int) NOT NULL DEFAULT 0)
            """,
            """
            CREATE TABLE IF NOT EXISTS vault_customers (
                id TEXT PRIMARY KEY NOT NULL, reference TEXT, default_instrument TEXT, created_at \(d.int) NOT NULL)
            """,
            """
            CREATE TABLE IF NOT EXISTS vault_instruments (
                id TEXT PRIMARY KEY NOT NULL, customer TEXT NOT NULL REFERENCES vault_customers(id),
                envelope TEXT NOT NULL, created_at \(d.int) NOT NULL)
            """,
            "CREATE INDEX IF NOT EXISTS vault_instruments_customer ON vault_instruments (customer)",
            """
            CREATE TABLE IF NOT EXISTS vault_mandates (
                id TEXT PRIMARY KEY NOT NULL, customer TEXT NOT NULL, instrument TEXT NOT NULL, amount \(d.int) NOT NULL,
                max_amount \(d.int) NOT NULL, currency TEXT NOT NULL, interval TEXT NOT NULL, max_cycles \(d.int) NOT NULL,
                status TEXT NOT NULL, created_at \(d.int) NOT NULL, expires_at \(d.int) NOT NULL)
            """,
        ]
    }

    /// Payments that may end `unknown` (with a reason) once settlement gives up, when the
    /// processor ledger came into the vault's store. The ledger's own tables (and the import of a
    /// gateway's ledger file of earlier versions) were made here until they moved to the gateway
    /// zone's step, `0017-gateway-zone`, which makes them where a store lacks them.
    static let ledger = Migration("0002-ledger", statements: { d in
        [
            "ALTER TABLE vault_payments ADD COLUMN reason TEXT",
            // An `unknown` payment may have been charged: it keeps holding its single-use token.
            "DROP INDEX IF EXISTS vault_payments_single_use_token",
            """
            CREATE UNIQUE INDEX vault_payments_single_use_token ON vault_payments (token)
                WHERE single_use = TRUE AND status IN ('processing','requires_action','succeeded','unknown')
            """,
            "CREATE INDEX vault_payments_unsettled ON vault_payments (updated_at) WHERE status IN ('processing','unknown')",
        ]
    })

    /// CVCs left the store (docs/threat-model.md, "CVC"): the columns an earlier version wrote them to go, after
    /// being emptied (on PostgreSQL, dead row versions are rewritten by `VACUUM FULL vault_tokens`,
    /// docs/threat-model.md; on SQLite the file is scrubbed, `scrubLegacyCVCs`).
    static let cvcColumnsGone = Migration("0003-tokens-without-cvc-columns") { (tx) throws(StoreError) in
        try await tx.query("DROP INDEX IF EXISTS vault_tokens_cvc_expires_at")
        for column in ["cvc", "cvc_expires_at"] where try await tx.columnExists("vault_tokens", column) {
            try await tx.query("UPDATE vault_tokens SET \(column) = NULL")
            try await tx.query("ALTER TABLE vault_tokens DROP COLUMN \(column)")
        }
    }

    /// The payment lifecycle (README "Capture, cancel, refund"): payments authorized only
    /// (`capture_method` manual, `requires_capture` until `authorization_expires_at`), their
    /// captured and refunded amounts; the sidecar's operations on payments (capture, cancel,
    /// refund: one row per operation, written before the gateway is called, unique per scope and
    /// idempotency key; at most one live capture or cancel per payment). The gateway's tables of
    /// the lifecycle (its ledger of the same operations, the sandbox's refund rules) were made
    /// here until they moved to `0017-gateway-zone`.
    static let lifecycle = Migration("0004-payment-lifecycle", statements: { d in
        [
            "ALTER TABLE vault_payments ADD COLUMN capture_method TEXT",
            "ALTER TABLE vault_payments ADD COLUMN amount_captured \(d.int)",
            "ALTER TABLE vault_payments ADD COLUMN amount_refunded \(d.int) NOT NULL DEFAULT 0",
            "ALTER TABLE vault_payments ADD COLUMN authorization_expires_at \(d.int)",
            "CREATE INDEX vault_payments_authorization_expiry ON vault_payments (authorization_expires_at) WHERE status = 'requires_capture'",
            // An authorization held on a single-use token keeps holding it.
            "DROP INDEX IF EXISTS vault_payments_single_use_token",
            """
            CREATE UNIQUE INDEX vault_payments_single_use_token ON vault_payments (token)
                WHERE single_use = TRUE AND status IN ('processing','requires_action','requires_capture','succeeded','unknown')
            """,
            """
            CREATE TABLE vault_payment_operations (
                id TEXT PRIMARY KEY NOT NULL, payment_id TEXT NOT NULL, kind TEXT NOT NULL, scope TEXT NOT NULL,
                idempotency_key TEXT NOT NULL, request TEXT NOT NULL, amount \(d.int) NOT NULL, currency TEXT NOT NULL,
                status TEXT NOT NULL, code TEXT, reference TEXT, created_at \(d.int) NOT NULL, updated_at \(d.int) NOT NULL)
            """,
            "CREATE UNIQUE INDEX vault_payment_operations_scope_key ON vault_payment_operations (scope, idempotency_key)",
            """
            CREATE UNIQUE INDEX vault_payment_operations_one_settlement ON vault_payment_operations (payment_id)
                WHERE kind IN ('capture','cancel') AND status <> 'failed'
            """,
            "CREATE INDEX vault_payment_operations_payment ON vault_payment_operations (payment_id, created_at)",
            "CREATE INDEX vault_payment_operations_unsettled ON vault_payment_operations (updated_at) WHERE status = 'processing'",
        ]
    })

    /// Idempotent creation of customers, sessions and mandates (`CreateClaim`), and the
    /// references of customers when `customer_reference_unique` is on (one row per reference:
    /// its primary key makes a reference unique across every sidecar of the store).
    static let createsAndReferences = Migration("0005-creates-and-customer-references") { (d: Dialect) in
        [
            """
            CREATE TABLE IF NOT EXISTS vault_creates (
                scope TEXT NOT NULL, kind TEXT NOT NULL, idempotency_key TEXT NOT NULL, request_hash TEXT NOT NULL,
                object_id TEXT NOT NULL, created_at \(d.int) NOT NULL, PRIMARY KEY (scope, kind, idempotency_key))
            """,
            "CREATE TABLE IF NOT EXISTS vault_customer_references (reference TEXT PRIMARY KEY NOT NULL, customer TEXT NOT NULL)",
            "CREATE INDEX IF NOT EXISTS vault_customer_references_customer ON vault_customer_references (customer)",
        ]
    }

    /// Lists and searches (README "Listing and search"): newest first by `(created_at, id)`, one
    /// index per filter with that order behind it. Payments gain `customer` (the customer paid
    /// through, backfilled from the canonical request `customer=cus_…&…`, or the customer of the mandate
    /// of `mandate=man_…&…`), instruments
    /// `fingerprint` (the card's keyed fingerprint from the envelope's metadata, filled on attach,
    /// backfilled from the envelopes).
    static let listing = Migration("0006-listing") { (d: Dialect) in
        let customerOfRequest = d.backend == .postgres
            ? "split_part(substr(request, 10), '&', 1)"
            : "substr(request, 10, instr(substr(request, 10) || '&', '&') - 1)"
        let fingerprintOfEnvelope = d.backend == .postgres
            ? "(envelope::jsonb) #>> '{card,fingerprint}'"
            : "json_extract(envelope, '$.card.fingerprint')"
        return [
            "ALTER TABLE vault_payments ADD COLUMN customer TEXT",
            "UPDATE vault_payments SET customer = \(customerOfRequest) WHERE request LIKE 'customer=%'",
            """
            UPDATE vault_payments SET customer = (SELECT m.customer FROM vault_mandates m WHERE vault_payments.request LIKE 'mandate=' || m.id || '&%')
            WHERE request LIKE 'mandate=%'
            """,
            "ALTER TABLE vault_instruments ADD COLUMN fingerprint TEXT",
            "UPDATE vault_instruments SET fingerprint = \(fingerprintOfEnvelope)",
            "CREATE INDEX vault_payments_list ON vault_payments (created_at, id)",
            "CREATE INDEX vault_payments_list_status ON vault_payments (status, created_at, id)",
            "CREATE INDEX vault_payments_list_customer ON vault_payments (customer, created_at, id) WHERE customer IS NOT NULL",
            "CREATE INDEX vault_payment_operations_list ON vault_payment_operations (kind, created_at, id)",
            "CREATE INDEX vault_payment_operations_list_status ON vault_payment_operations (kind, status, created_at, id)",
            "CREATE INDEX vault_payment_operations_list_payment ON vault_payment_operations (payment_id, kind, created_at, id)",
            "CREATE INDEX vault_customers_list ON vault_customers (created_at, id)",
            "CREATE INDEX vault_tokens_list ON vault_tokens (created_at, token)",
            "CREATE INDEX vault_tokens_list_fingerprint ON vault_tokens (fingerprint, created_at, token) WHERE fingerprint IS NOT NULL",
            "CREATE INDEX vault_instruments_fingerprint ON vault_instruments (fingerprint, created_at, id) WHERE fingerprint IS NOT NULL",
        ]
    }

    /// Issue 16: one page fewer written per token. `vault_tokens_fingerprint` (every token, by
    /// its fingerprint: a random leaf page per insert) served two lookups that have cheaper homes:
    /// a fingerprint's tokens (`vault_tokens_list_fingerprint`, since `0006-listing`) and the
    /// tokens still waiting for theirs, which the sidecar's fingerprint pass walks in token order
    /// (`vault_tokens_unfingerprinted`: only those rows, none at all while the gateway answers).
    static let tokenFingerprintIndex = Migration("0012-token-fingerprint-index") { (d: Dialect) in
        [
            "DROP INDEX IF EXISTS vault_tokens_fingerprint",
            "CREATE INDEX vault_tokens_unfingerprinted ON vault_tokens (token) WHERE fingerprint IS NULL",
        ]
    }

    /// Metadata (README "Metadata", `Store.Metadata`): a `metadata` JSON column on tokens,
    /// payments, payment operations (refunds) and customers, read with the row; and
    /// `vault_metadata`, one row per pair, whose index `(object_type, key, value, object_id)`
    /// serves `metadata[key]=value` searches. Deleting an object deletes its pairs (a trigger per
    /// table, both backends: purges, erasures and consumed tokens leave none behind).
    static let metadata = Migration("0007-metadata") { (d: Dialect) in
        let owners = [("vault_tokens", "token", "token"), ("vault_payments", "payment", "id"), ("vault_payment_operations", "refund", "id"),
                      ("vault_customers", "customer", "id")]
        var statements = owners.map { "ALTER TABLE \($0.0) ADD COLUMN metadata TEXT" }
        statements += [
            """
            CREATE TABLE vault_metadata (
                object_type TEXT NOT NULL, object_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
                PRIMARY KEY (object_type, object_id, key))
            """,
            "CREATE INDEX vault_metadata_search ON vault_metadata (object_type, key, value, object_id)",
        ]
        for (table, owner, id) in owners {
            // The search rows follow the `metadata` column, by trigger, in the writing transaction:
            // every writer keeps them right, and a token with metadata still goes through the
            // group commit with the others (no transaction of its own).
            let pairs = d.backend == .sqlite ? "json_each(NEW.metadata)" : "json_each_text(NEW.metadata::json)"
            let insertPairs = """
                INSERT INTO vault_metadata (object_type, object_id, key, value) SELECT '\(owner)', NEW.\(id), key, value FROM \(pairs)
                """
            if d.backend == .sqlite {
                statements.append("""
                    CREATE TRIGGER \(table)_metadata_insert AFTER INSERT ON \(table) FOR EACH ROW WHEN NEW.metadata IS NOT NULL
                    BEGIN \(insertPairs); END
                    """)
                statements.append("""
                    CREATE TRIGGER \(table)_metadata_update AFTER UPDATE OF metadata ON \(table) FOR EACH ROW
                    BEGIN DELETE FROM vault_metadata WHERE object_type = '\(owner)' AND object_id = NEW.\(id);
                    \(insertPairs) WHERE NEW.metadata IS NOT NULL; END
                    """)
            } else {
                statements.append("""
                    CREATE FUNCTION \(table)_metadata_write() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
                    IF TG_OP = 'UPDATE' THEN DELETE FROM vault_metadata WHERE object_type = '\(owner)' AND object_id = NEW.\(id); END IF;
                    IF NEW.metadata IS NOT NULL THEN \(insertPairs); END IF;
                    RETURN NULL; END $$
                    """)
                statements.append("""
                    CREATE TRIGGER \(table)_metadata_insert AFTER INSERT ON \(table)
                    FOR EACH ROW WHEN (NEW.metadata IS NOT NULL) EXECUTE FUNCTION \(table)_metadata_write()
                    """)
                statements.append("""
                    CREATE TRIGGER \(table)_metadata_update AFTER UPDATE OF metadata ON \(table)
                    FOR EACH ROW EXECUTE FUNCTION \(table)_metadata_write()
                    """)
            }
            if d.backend == .sqlite {
                statements.append("""
                    CREATE TRIGGER \(table)_metadata_forget AFTER DELETE ON \(table)
                    BEGIN DELETE FROM vault_metadata WHERE object_type = '\(owner)' AND object_id = OLD.\(id); END
                    """)
            } else {
                statements.append("""
                    CREATE FUNCTION \(table)_metadata_forget() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN DELETE FROM vault_metadata WHERE object_type = '\(owner)' AND object_id = OLD.\(id); RETURN OLD; END $$
                    """)
                statements.append("""
                    CREATE TRIGGER \(table)_metadata_forget AFTER DELETE ON \(table)
                    FOR EACH ROW EXECUTE FUNCTION \(table)_metadata_forget()
                    """)
            }
        }
        return statements
    }

    /// A SQLite store made before the store layer (GRDB's named migrations, tables without the
    /// `vault_` prefix): its tables are renamed to the shared names and their indexes dropped
    /// (the base migration makes them again under the shared names). What it lacks is created
    /// by the migrations that follow.
    static func adoptLegacySQLite(_ tx: Transaction) async throws(StoreError) {
        guard try await tx.tableExists("grdb_migrations") else { return }
        for index in ["tokens_expires_at", "tokens_cvc_expires_at", "tokens_fingerprint", "payments_single_use_token", "payments_processing",
                      "instruments_customer"] {
            try await tx.query("DROP INDEX IF EXISTS \(index)")
        }
        for table in ["tokens", "payments", "sessions", "customers", "instruments", "mandates", "cvc_scrub"] where try await tx.tableExists(table) {
            try await tx.query("ALTER TABLE \(table) RENAME TO vault_\(table)")
        }
        // Whatever CVCs an older version left in the file are scrubbed after the upgrade.
        if try await tx.columnExists("vault_tokens", "cvc") {
            try await tx.query("CREATE TABLE IF NOT EXISTS vault_cvc_scrub (pending INTEGER NOT NULL)")
            try await tx.query("INSERT INTO vault_cvc_scrub VALUES (1)")
        }
        try await tx.query("DROP TABLE grdb_migrations")
    }

    /// SQLite only: a store whose CVCs were emptied by an earlier version may still hold them in
    /// its WAL and free pages. While the marker table `vault_cvc_scrub` has a row: truncate the
    /// WAL, rebuild the file (VACUUM leaves no free page), truncate again, then clear the marker:
    /// a start that failed midway (a full disk) scrubs again at the next one.
    static func scrubLegacyCVCs(_ pool: DatabasePool) async throws {
        try await pool.writeWithoutTransaction { db in
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'vault_cvc_scrub'") == true else { return }
            if try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM vault_cvc_scrub") ?? 0 > 0 {
                try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
                // VACUUM's scratch copy of the whole file goes where temporary files go: on disk
                // for this one step (the store's connections keep theirs in memory).
                try db.execute(sql: "PRAGMA temp_store = FILE")
                defer { try? db.execute(sql: "PRAGMA temp_store = MEMORY") }
                try db.execute(sql: "VACUUM")
                try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            }
            try db.execute(sql: "DROP TABLE vault_cvc_scrub")
        }
    }
}
