/// The events outbox (docs/events.md): every state change of a token, payment, refund, customer,
/// instrument and mandate writes one row to `vault_events` in the same transaction as the change,
/// by a trigger of the changed table. Whatever writes the change (the sidecar, `vault customers
/// delete`, the sweeper, a second sidecar on the same PostgreSQL) writes its event; a rolled-back
/// change writes none, and a change that was committed always has its event.
///
/// An event's id is `evt_` and its `seq` in 24 hex digits. An event holds the object's state at the change (`data`: the API object's fields, metadata
/// only: never an envelope, a canonical request or any card data beyond a token's metadata) and
/// its webhook delivery state (`delivery`, `attempts`, `next_attempt_at`, …). `seq` orders events
/// as they were written; an object's events are in the order of its changes.
extension Migrations {
    static let events = Migration("0008-events") { (d: Dialect) in
        let seq = d.backend == .sqlite ? "seq INTEGER PRIMARY KEY AUTOINCREMENT" : "seq BIGSERIAL PRIMARY KEY"
        var statements = [
            """
            CREATE TABLE vault_events (
                \(seq), type TEXT NOT NULL, object_type TEXT NOT NULL,
                object_id TEXT NOT NULL, data TEXT NOT NULL, created_at \(d.int) NOT NULL,
                delivery TEXT NOT NULL DEFAULT 'pending', attempts \(d.int) NOT NULL DEFAULT 0,
                next_attempt_at \(d.int) NOT NULL DEFAULT 0, last_attempt_at \(d.int), last_status \(d.int),
                last_error TEXT, delivered_at \(d.int))
            """,
            // Few indexes: each costs every change (a token's creation too). The id is `seq`'s
            // (`evt_` and 24 hex digits of it), the cursor of lists; the object's index serves
            // `object=` and the order per object of delivery; the object type's serves `type=`;
            // the pending one, delivery. Purges walk `seq` from the oldest.
            "CREATE INDEX vault_events_object ON vault_events (object_id, seq)",
            "CREATE INDEX vault_events_object_type ON vault_events (object_type, seq)",
            "CREATE INDEX vault_events_pending ON vault_events (seq) WHERE delivery = 'pending'",
            // Which sidecar delivers webhooks (one at a time per store), until when.
            "CREATE TABLE vault_leases (name TEXT PRIMARY KEY NOT NULL, holder TEXT NOT NULL, until_at \(d.int) NOT NULL)",
        ]
        for rule in EventRule.all { statements += rule.statements(d) }
        return statements
    }
}

extension Migrations {
    /// The payment triggers again, showing a payment's card-shaped token in its events (issue 17;
    /// `0008-events` showed `tok_…` tokens only).
    static let paymentEventTokens = Migration("0010-payment-event-tokens") { (d: Dialect) in
        EventRule.paymentRules(anyToken: true).flatMap { rule -> [String] in
            let drop = d.backend == .sqlite
                ? ["DROP TRIGGER IF EXISTS \(rule.name)"]
                : ["DROP TRIGGER IF EXISTS \(rule.name) ON \(rule.table)", "DROP FUNCTION IF EXISTS \(rule.name)()"]
            return drop + rule.statements(d)
        }
    }
}

extension Migrations {
    /// `instrument.updated` (issue 17, docs/dedupe.md): a customer attaches a card it holds with
    /// a new expiry, and the instrument takes the new envelope. A rewrap, which replaces the
    /// envelope of the same card and expiry, changes nothing an event shows and writes none.
    static let instrumentUpdated = Migration("0011-instrument-updated") { (d: Dialect) in
        EventRule.instrumentUpdated.statements(d)
    }
}

/// One trigger: after `operation` on `table`, when `condition` holds, an event of `type` (SQL) for
/// the row `row` (`NEW` or `OLD`) with `data` (key, SQL value) pairs.
struct EventRule: Sendable {
    enum Operation: String, Sendable { case insert = "INSERT", update = "UPDATE", delete = "DELETE" }

    let table: String
    let operation: Operation
    let objectType: String
    let idColumn: String
    /// SQL over `NEW`/`OLD` (per dialect: `distinct` differs).
    let condition: @Sendable (Dialect) -> String?
    let type: String
    let data: @Sendable (Dialect, String) -> [(String, String)]

    var name: String { "vault_events_\(table.dropFirst(6))_\(operation.rawValue.lowercased())" }
    var row: String { operation == .delete ? "OLD" : "NEW" }

    func statements(_ d: Dialect) -> [String] {
        let object = d.jsonObject(data(d, row))
        let insert = """
            INSERT INTO vault_events (type, object_type, object_id, data, created_at)
            VALUES (\(type), '\(objectType)', \(row).\(idColumn), \(object), \(d.nowMillis))
            """
        let when = condition(d).map { " WHEN (\($0))" } ?? ""
        let body = insert.replacingOccurrences(of: Dialect.nowMillisMarker, with: d.nowMillis)
        switch d.backend {
        case .sqlite:
            return ["CREATE TRIGGER \(name) AFTER \(operation.rawValue) ON \(table) FOR EACH ROW\(when) BEGIN \(body); END"]
        case .postgres:
            return [
                "CREATE FUNCTION \(name)() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \(body); RETURN NULL; END $$",
                "CREATE TRIGGER \(name) AFTER \(operation.rawValue) ON \(table) FOR EACH ROW\(when) EXECUTE FUNCTION \(name)()",
            ]
        }
    }

    static let all: [EventRule] = tokens + payments + refunds + customers + instruments + mandates

    static func changed(_ d: Dialect, _ columns: String...) -> String {
        columns.map { d.distinct("OLD.\($0)", "NEW.\($0)") }.joined(separator: " OR ")
    }

    /// The object's metadata (`0007-metadata`), `{}` when none, as the API shows it.
    static func metadata(_ d: Dialect, _ r: String) -> String { d.jsonValue("COALESCE(\(r).metadata, '{}')") }

    // Tokens: created; deleted (a DELETE by the API) or expired (the sweeper's, past expires_at).
    static let tokens: [EventRule] = [
        EventRule(table: "vault_tokens", operation: .insert, objectType: "token", idColumn: "token", condition: { _ in nil },
                  type: "'token.created'", data: tokenData),
        EventRule(table: "vault_tokens", operation: .delete, objectType: "token", idColumn: "token", condition: { _ in nil },
                  type: "CASE WHEN OLD.expires_at <= \(Dialect.nowMillisMarker) THEN 'token.expired' ELSE 'token.deleted' END",
                  data: tokenData),
    ]

    static func tokenData(_ d: Dialect, _ r: String) -> [(String, String)] {
        [
            ("token", "\(r).token"), ("object", "'token'"), ("card", d.jsonValue(d.jsonPath("\(r).envelope", "card"))),
            ("fingerprint", "\(r).fingerprint"), ("single_use", d.jsonBool("\(r).single_use")), ("metadata", metadata(d, r)),
            ("created_at", d.iso("\(r).created_at")), ("expires_at", d.iso("\(r).expires_at")),
        ]
    }

    // Payments: each status they enter after `processing` (which is the intent, not an outcome).
    // As `0008-events` made them (a `token` only when `tok_…`); `0010-payment-event-tokens`
    // replaces them with `paymentRules(anyToken: true)`, which shows card-shaped tokens too.
    static let payments: [EventRule] = paymentRules(anyToken: false)

    static func paymentRules(anyToken: Bool) -> [EventRule] {
        let data: @Sendable (Dialect, String) -> [(String, String)] = { d, r in paymentData(d, r, anyToken: anyToken) }
        return [
            EventRule(table: "vault_payments", operation: .insert, objectType: "payment", idColumn: "id",
                      condition: { _ in "NEW.status <> 'processing'" }, type: "'payment.' || NEW.status", data: data),
            EventRule(table: "vault_payments", operation: .update, objectType: "payment", idColumn: "id",
                      condition: { d in "NEW.status <> 'processing' AND (\(changed(d, "status")))" }, type: "'payment.' || NEW.status",
                      data: data),
        ]
    }

    /// `anyToken`: a payment's `token` is whatever is not an instrument id (`tok_…` or a
    /// card-shaped token, docs/card-tokens.md); else only `tok_…`, as `0008-events` had it.
    static func paymentData(_ d: Dialect, _ r: String, anyToken: Bool = true) -> [(String, String)] {
        let mandate = "CASE WHEN \(r).request LIKE 'mandate=%' THEN \(d.beforeAmpersand("substr(\(r).request, 9)")) END"
        let token = anyToken
            ? "CASE WHEN \(r).token IS NOT NULL AND \(r).token NOT LIKE 'ins\\_%' ESCAPE '\\' THEN \(r).token END"
            : "CASE WHEN \(r).token LIKE 'tok\\_%' ESCAPE '\\' THEN \(r).token END"
        return [
            ("id", "\(r).id"), ("object", "'payment'"), ("status", "\(r).status"), ("amount", "\(r).amount"), ("currency", "\(r).currency"),
            ("token", token),
            ("instrument", "CASE WHEN \(r).token LIKE 'ins\\_%' ESCAPE '\\' THEN \(r).token END"),
            ("customer", "\(r).customer"), ("mandate", mandate),
            ("capture_method", "CASE WHEN \(r).capture_method = 'manual' THEN 'manual' ELSE 'automatic' END"),
            ("amount_captured", "CASE WHEN \(r).status = 'succeeded' THEN COALESCE(\(r).amount_captured, \(r).amount) ELSE 0 END"), ("amount_refunded", "\(r).amount_refunded"),
            ("code", "\(r).code"), ("reference", "\(r).reference"), ("next_action", d.jsonValue("\(r).next_action")),
            ("metadata", metadata(d, r)), ("created_at", d.iso("\(r).created_at")), ("updated_at", d.iso("\(r).updated_at")),
        ]
    }

    // Refunds: the operations of kind refund, each status after `processing`.
    static let refunds: [EventRule] = [
        EventRule(table: "vault_payment_operations", operation: .insert, objectType: "refund", idColumn: "id",
                  condition: { _ in "NEW.kind = 'refund' AND NEW.status <> 'processing'" }, type: "'refund.' || NEW.status", data: refundData),
        EventRule(table: "vault_payment_operations", operation: .update, objectType: "refund", idColumn: "id",
                  condition: { d in "NEW.kind = 'refund' AND NEW.status <> 'processing' AND (\(changed(d, "status")))" },
                  type: "'refund.' || NEW.status", data: refundData),
    ]

    static func refundData(_ d: Dialect, _ r: String) -> [(String, String)] {
        [
            ("id", "\(r).id"), ("object", "'refund'"), ("payment", "\(r).payment_id"), ("status", "\(r).status"), ("amount", "\(r).amount"),
            ("currency", "\(r).currency"), ("failure_code", "\(r).code"), ("reference", "\(r).reference"),
            ("metadata", metadata(d, r)), ("created_at", d.iso("\(r).created_at")), ("updated_at", d.iso("\(r).updated_at")),
        ]
    }

    // Customers: created, updated (reference, default instrument, metadata), deleted (erasure).
    static let customers: [EventRule] = [
        EventRule(table: "vault_customers", operation: .insert, objectType: "customer", idColumn: "id", condition: { _ in nil },
                  type: "'customer.created'", data: customerData),
        EventRule(table: "vault_customers", operation: .update, objectType: "customer", idColumn: "id",
                  condition: { d in changed(d, "reference", "default_instrument", "metadata") }, type: "'customer.updated'", data: customerData),
        EventRule(table: "vault_customers", operation: .delete, objectType: "customer", idColumn: "id", condition: { _ in nil },
                  type: "'customer.deleted'", data: customerData),
    ]

    static func customerData(_ d: Dialect, _ r: String) -> [(String, String)] {
        [
            ("id", "\(r).id"), ("object", "'customer'"), ("reference", "\(r).reference"),
            ("default_instrument", "\(r).default_instrument"), ("metadata", metadata(d, r)), ("created_at", d.iso("\(r).created_at")),
        ]
    }

    // A customer's stored cards: attached (created) and detached or erased (deleted).
    static let instruments: [EventRule] = [
        EventRule(table: "vault_instruments", operation: .insert, objectType: "instrument", idColumn: "id", condition: { _ in nil },
                  type: "'instrument.created'", data: instrumentData),
        EventRule(table: "vault_instruments", operation: .delete, objectType: "instrument", idColumn: "id", condition: { _ in nil },
                  type: "'instrument.deleted'", data: instrumentData),
    ]

    /// An instrument whose card's expiry changed (`0011-instrument-updated`).
    static let instrumentUpdated = EventRule(
        table: "vault_instruments", operation: .update, objectType: "instrument", idColumn: "id",
        condition: { d in
            ["exp_month", "exp_year"].map { key in
                d.distinct(d.envelopeCardField("OLD.envelope", key), d.envelopeCardField("NEW.envelope", key))
            }.joined(separator: " OR ")
        },
        type: "'instrument.updated'", data: instrumentData)

    static func instrumentData(_ d: Dialect, _ r: String) -> [(String, String)] {
        [
            ("id", "\(r).id"), ("object", "'instrument'"), ("customer", "\(r).customer"),
            ("card", d.jsonValue(d.jsonPath("\(r).envelope", "card"))), ("created_at", d.iso("\(r).created_at")),
        ]
    }

    // Mandates: created, and each status they change to (cancelled).
    static let mandates: [EventRule] = [
        EventRule(table: "vault_mandates", operation: .insert, objectType: "mandate", idColumn: "id", condition: { _ in nil },
                  type: "'mandate.created'", data: mandateData),
        EventRule(table: "vault_mandates", operation: .update, objectType: "mandate", idColumn: "id",
                  condition: { d in changed(d, "status") }, type: "'mandate.' || NEW.status", data: mandateData),
    ]

    static func mandateData(_ d: Dialect, _ r: String) -> [(String, String)] {
        [
            ("id", "\(r).id"), ("object", "'mandate'"), ("status", "\(r).status"), ("customer", "\(r).customer"),
            ("instrument", "\(r).instrument"), ("amount", "\(r).amount"), ("max_amount", "\(r).max_amount"),
            ("currency", "\(r).currency"), ("interval", "\(r).\"interval\""), ("max_cycles", "\(r).max_cycles"),
            ("created_at", d.iso("\(r).created_at")), ("expires_at", d.iso("\(r).expires_at")),
        ]
    }
}

extension Dialect {
    /// Stands for "now in milliseconds" in a rule's type expression (replaced per dialect).
    static let nowMillisMarker = "NOW_MS"

    /// The Unix time in milliseconds at the statement, by the database's clock (SQL).
    public var nowMillis: String {
        backend == .sqlite
            ? "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
            : "floor(extract(epoch from clock_timestamp()) * 1000)::bigint"
    }

    /// `a` and `b` differ, NULL being a value.
    func distinct(_ a: String, _ b: String) -> String {
        backend == .sqlite ? "\(a) IS NOT \(b)" : "\(a) IS DISTINCT FROM \(b)"
    }

    /// A JSON object's text from (key, SQL value) pairs.
    func jsonObject(_ pairs: [(String, String)]) -> String {
        let args = pairs.map { "'\($0.0)', \($0.1)" }.joined(separator: ", ")
        return backend == .sqlite ? "json_object(\(args))" : "json_build_object(\(args))::text"
    }

    /// JSON text embedded as JSON (not as a string); NULL stays NULL.
    func jsonValue(_ text: String) -> String { backend == .sqlite ? "json(\(text))" : "(\(text))::json" }

    /// The JSON text at top-level key `key` of a JSON text column (an object stays JSON text).
    func jsonPath(_ column: String, _ key: String) -> String {
        backend == .sqlite ? "json_extract(\(column), '$.\(key)')" : "((\(column))::jsonb -> '\(key)')::text"
    }

    func jsonBool(_ value: String) -> String {
        backend == .sqlite ? "json(CASE WHEN \(value) THEN 'true' ELSE 'false' END)" : "(\(value))"
    }

    /// Milliseconds as `2026-11-23T12:50:59Z` (UTC, whole seconds), as the API writes times.
    func iso(_ millis: String) -> String {
        backend == .sqlite
            ? "strftime('%Y-%m-%dT%H:%M:%SZ', \(millis) / 1000, 'unixepoch')"
            : "to_char(to_timestamp(\(millis) / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
    }

    /// The text of `s` up to its first `&`.
    func beforeAmpersand(_ s: String) -> String {
        backend == .postgres ? "split_part(\(s), '&', 1)" : "substr(\(s), 1, instr(\(s) || '&', '&') - 1)"
    }
}

/// Events that tell of something besides a row's change (`fingerprint.withheld`: the gateway's
/// guessing limit withheld a new token's fingerprint, docs/events.md). The object is the row as
/// the change triggers show it (the same expressions), written by one statement.
public enum NoticeEvents {
    /// Writes an event of `type` (`<kind>.<what>`, filed under `<kind>` for `type=<kind>.*`) about
    /// the token `token` (its object as `token.created` shows it); nothing when the token is gone.
    public static func token(_ type: String, _ token: String, in db: Database) async throws(StoreError) {
        let d = db.dialect
        let object = d.jsonObject(EventRule.tokenData(d, "vault_tokens"))
        _ = try await db.write("""
            INSERT INTO vault_events (type, object_type, object_id, data, created_at)
            SELECT ?, ?, token, \(object), \(d.nowMillis) FROM vault_tokens WHERE token = ?
            """, [type, String(type.prefix { $0 != "." }), token])
    }
}
