import VaultCrypto

/// One velocity limit (`sidecar.velocity`, docs/velocity.md): at most `limit` attempts (or
/// declines) of `action` per key of `scope` in a sliding window of `window` seconds. Written
/// `scope:action:count=limit/window`, e.g. `session:tokenize:attempts=10/10m`.
public struct VelocityRule: Sendable, Equatable, CustomStringConvertible {
    public enum Scope: String, Sendable, CaseIterable { case session, bin, fingerprint, peer, customer }
    public enum Action: String, Sendable, CaseIterable { case tokenize, validate, pay, lookup }
    public enum Count: String, Sendable, CaseIterable { case attempts, declines }

    public let scope: Scope, action: Action, count: Count
    public let limit: Int
    /// Seconds, 1 to 86400.
    public let window: Int

    /// A window is counted in 10 buckets (1 s at least): it slides a tenth of itself at a time.
    public static let buckets = 10
    public var bucketWidth: Int { max(1, (window + Self.buckets - 1) / Self.buckets) }
    /// The buckets the window spans.
    public var bucketCount: Int { (window + bucketWidth - 1) / bucketWidth }

    /// Whether a request of `action` knows a key of `scope`: validate has a number only (its BIN)
    /// and a caller; a lookup of a token (`GET /v1/tokens/{token}`) a caller only, and its
    /// declines are the tokens it named that do not exist (`sidecar.token_lookup_misses`); a tokenize learns the session or customer when it is a session's payment or
    /// a customer's card, and the fingerprint once the gateway has answered it; a payment knows
    /// all (its token's BIN and fingerprint).
    public static func applies(_ scope: Scope, _ action: Action) -> Bool {
        switch action {
        case .validate: scope == .peer || scope == .bin
        case .lookup: scope == .peer
        case .tokenize, .pay: true
        }
    }

    /// Whether `count` can be counted for `scope` on `action`: a tokenize's fingerprint is known
    /// only once the card is sealed and valid, so it counts attempts only (a card refused by the
    /// card rules never reaches the gateway).
    public static func counts(_ count: Count, _ scope: Scope, _ action: Action) -> Bool {
        applies(scope, action) && !(action == .tokenize && scope == .fingerprint && count == .declines)
    }

    public init(scope: Scope, action: Action, count: Count, limit: Int, window: Int) {
        (self.scope, self.action, self.count, self.limit, self.window) = (scope, action, count, limit, window)
    }

    /// Parses `scope:action:count=limit/window` (window: seconds, or a number and s, m, h or d).
    /// - Throws: `CONFIG_INVALID` saying what is wrong.
    public init(parsing text: String) throws(VaultError) {
        let usage = "a velocity rule is scope:action:count=limit/window, e.g. session:tokenize:attempts=10/10m (scopes: session, bin, fingerprint, peer, customer; actions: tokenize, validate, pay, lookup; counts: attempts, declines; window 1s to 1d)"
        let sides = text.split(separator: "=", omittingEmptySubsequences: false)
        guard sides.count == 2 else { throw VaultError(.configInvalid, "\(JSONReader.printable(text)): \(usage)") }
        let names = sides[0].split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        let amounts = sides[1].split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard names.count == 3, amounts.count == 2, let scope = Scope(rawValue: names[0]), let action = Action(rawValue: names[1]),
              let count = Count(rawValue: names[2]), let limit = Int(amounts[0]), (1...1_000_000).contains(limit),
              let window = Self.seconds(amounts[1]), (1...86_400).contains(window)
        else { throw VaultError(.configInvalid, "\(JSONReader.printable(text)): \(usage); limit 1 to 1000000") }
        guard Self.counts(count, scope, action) else {
            throw VaultError(
                .configInvalid,
                "\(text): a \(action.rawValue) request has no \(scope.rawValue) \(count.rawValue) to count (validate: peer and bin; tokenize: all, fingerprint attempts only, as the gateway gives the fingerprint once the card is sealed and valid; pay: all)")
        }
        self.init(scope: scope, action: action, count: count, limit: limit, window: window)
    }

    /// `90`, `90s`, `10m`, `1h`, `1d` → seconds.
    static func seconds(_ text: String) -> Int? {
        let units: [Character: Int] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
        if let last = text.last, let unit = units[last] { return Int(text.dropLast()).map { $0 * unit } }
        return Int(text)
    }

    public var description: String { "\(scope.rawValue):\(action.rawValue):\(count.rawValue)=\(limit)/\(Self.windowText(window))" }

    static func windowText(_ s: Int) -> String {
        if s % 86_400 == 0 { return "\(s / 86_400)d" }
        if s % 3600 == 0 { return "\(s / 3600)h" }
        if s % 60 == 0 { return "\(s / 60)m" }
        return "\(s)s"
    }

    /// The rules a sidecar has when `sidecar.velocity` is not given (docs/velocity.md): a defence
    /// out of the box, generous enough for a shop's normal traffic. `off` switches every limit off.
    public static let defaults: [VelocityRule] = [
        "session:tokenize:attempts=10/10m", "bin:tokenize:declines=100/10m", "bin:pay:declines=100/10m", "fingerprint:pay:declines=10/1h",
        "customer:tokenize:attempts=20/1h", "customer:pay:declines=10/1h",
    ].map { try! VelocityRule(parsing: $0) }

    /// The rule of `sidecar.token_lookup_misses` (`limit/window`, e.g. `100/10m`; `off`: none): the
    /// token lookups naming no token that one caller (peer uid) may make in the window (DESIGN §9:
    /// card-shaped tokens could otherwise be enumerated).
    /// - Throws: `CONFIG_INVALID`.
    public static func lookupMisses(_ text: String) throws(VaultError) -> VelocityRule? {
        if text == "off" { return nil }
        do throws(VaultError) { return try VelocityRule(parsing: "peer:lookup:declines=" + text) } catch {
            throw VaultError(.configInvalid, "sidecar.token_lookup_misses is limit/window (e.g. 100/10m; window 1s to 1d, limit 1 to 1000000) or off, not \(JSONReader.printable(text))", field: "sidecar.token_lookup_misses")
        }
    }

    /// The default of `sidecar.token_lookup_misses`.
    public static let defaultLookupMisses = "100/10m"

    /// The rules of `sidecar.velocity`'s values: none given, the defaults; `off`, none.
    public static func rules(_ values: [String]) throws(VaultError) -> [VelocityRule] {
        if values.isEmpty { return defaults }
        if values == ["off"] { return [] }
        var rules: [VelocityRule] = []
        for v in values {
            let rule = try VelocityRule(parsing: v)
            guard !rules.contains(where: { $0.scope == rule.scope && $0.action == rule.action && $0.count == rule.count && $0.window == rule.window }) else {
                throw VaultError(.configInvalid, "\(v): a rule for \(rule.scope.rawValue):\(rule.action.rawValue):\(rule.count.rawValue) over this window is given twice")
            }
            rules.append(rule)
        }
        return rules
    }
}
