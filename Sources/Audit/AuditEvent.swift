/// One audited action: what was done, to which ids, by whom, and how it ended.
///
/// Carries identifiers and counters only; there is no free-text field, so card data has nowhere
/// to go. The writer checks every value against the character sets of docs/audit-log.md and
/// replaces an event that breaks them with an `invalid_event` line (nothing of it is written).
public struct AuditEvent: Sendable {
    /// A short lower-case word, `[a-z_]{1,32}`: `tokenize`, `read`, `delete`, `pay`, `confirm`,
    /// `open`, `rewrap`, `key_add`, `key_promote`, `key_retire`, `key_reload`, …
    /// (`log_repair` and `invalid_event` are the writer's own and refused here).
    public var action: String
    /// `ok`, or an upper-snake error code `[A-Z0-9_]{1,64}` (`LUHN_CHECK_FAILED`).
    public var outcome: String
    /// The peer's uid (sidecar, gateway) or the CLI's own; nil when unknown (the key is omitted).
    public var uid: UInt32?
    /// `tok_…`.
    public var token: String?
    /// `pay_…`.
    public var payment: String?
    /// `cus_…`.
    public var customer: String?
    /// A key id: 16 lowercase hex.
    public var kid: String?
    /// `env_…`.
    public var envelope: String?
    /// A truncation group as the gateway's guessing limit names it (`grp_` + 32 hex, a keyed hash:
    /// never the digits).
    public var group: String?
    /// Counters, in the order given: names `[a-z_]{1,32}`, distinct, at most 16
    /// (e.g. `[("rewrapped", 10), ("skipped", 0), ("failed", 0)]`).
    public var detail: [(String, Int)]

    /// An event; every id is optional. Ids are `[A-Za-z0-9_-]{1,80}` with at least one letter
    /// (`kid`: 16 lowercase hex).
    public init(
        action: String, outcome: String = "ok", uid: UInt32? = nil,
        token: String? = nil, payment: String? = nil, customer: String? = nil,
        kid: String? = nil, envelope: String? = nil, group: String? = nil, detail: [(String, Int)] = []
    ) {
        self.action = action
        self.outcome = outcome
        self.uid = uid
        self.token = token
        self.payment = payment
        self.customer = customer
        self.kid = kid
        self.envelope = envelope
        self.group = group
        self.detail = detail
    }

    /// Whether every value is of its character set (what the writer checks before writing).
    public var isValid: Bool {
        guard AuditFormat.isWord(action.utf8),
              action != AuditFormat.repairAction, action != AuditFormat.invalidAction,
              AuditFormat.isOutcome(outcome.utf8)
        else { return false }
        let ids: [(String?, AuditFormat.IDKey)] = [(token, .token), (payment, .payment), (customer, .customer), (kid, .kid), (envelope, .envelope), (group, .group)]
        for case let (value?, key) in ids where !AuditFormat.isID(value.utf8, key: key) { return false }
        guard detail.count <= AuditFormat.maxDetailEntries else { return false }
        for (i, (name, _)) in detail.enumerated() {
            guard AuditFormat.isWord(name.utf8) else { return false }
            for j in 0..<i where detail[j].0 == name { return false }
        }
        return true
    }
}
