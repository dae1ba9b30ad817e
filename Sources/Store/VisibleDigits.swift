extension Migrations {
    /// What leaves the gateway zone about a card's digits is its visible prefix, min(6, length −
    /// 10) digits, and its last 4 (DESIGN §1, issue 37): rows written by earlier versions, with a
    /// BIN of 6 or 8 digits, are cut to it.
    ///
    /// - Tokens: the `bin` column and the envelope's clear `card.bin` (the card metadata is not
    ///   authenticated data of the fields: the envelope still opens, and the gateway accepts the cut
    ///   prefix). The envelope text is rewritten in place where it has the vault's own compact form
    ///   (`"bin":"…"`), by the JSON functions otherwise.
    /// - Instruments: the envelope, likewise.
    /// - Events: the `card.bin` of the token and instrument objects they hold.
    /// - Velocity counters of the `bin` scope: dropped (they held 6 digits of any card, and live a
    ///   day at most); the limits count again from the upgrade.
    static let visibleDigits = Migration("0016-visible-digits") { (d: Dialect) in
        var statements: [String] = []
        for table in ["vault_tokens", "vault_instruments"] {
            let bin = Self.cardText(d, "envelope", "bin"), visible = Self.visibleLength(d, Self.cardNumber(d, "envelope", "length"))
            let cut = "substr(\(bin), 1, \(visible))"
            let long = "length(\(bin)) > \(visible)"
            // The vault's own form first: the text changes only where the digits are.
            statements.append("""
                UPDATE \(table) SET envelope = replace(envelope, '"bin":"' || \(bin) || '"', '"bin":"' || \(cut) || '"')
                WHERE \(long)
                """)
            // Anything else (another spacing): the JSON functions.
            statements.append("UPDATE \(table) SET envelope = \(Self.setCardBin(d, "envelope", cut)) WHERE \(long)")
        }
        // The token's own column, from its (now cut) envelope.
        statements.append("UPDATE vault_tokens SET bin = \(Self.cardText(d, "envelope", "bin")) WHERE bin <> \(Self.cardText(d, "envelope", "bin"))")
        let bin = Self.cardText(d, "data", "bin"), visible = Self.visibleLength(d, Self.cardNumber(d, "data", "length"))
        statements.append("""
            UPDATE vault_events SET data = \(Self.setCardBin(d, "data", "substr(\(bin), 1, \(visible))"))
            WHERE object_type IN ('token', 'instrument') AND \(bin) IS NOT NULL AND length(\(bin)) > \(visible)
            """)
        statements.append("DELETE FROM vault_velocity WHERE scope = 'bin'")
        return statements
    }

    /// `card.<key>` of a JSON text column, as text.
    static func cardText(_ d: Dialect, _ column: String, _ key: String) -> String {
        d.backend == .sqlite ? "json_extract(\(column), '$.card.\(key)')" : "((\(column))::jsonb -> 'card' ->> '\(key)')"
    }

    /// `card.<key>` of a JSON text column, as an integer.
    static func cardNumber(_ d: Dialect, _ column: String, _ key: String) -> String {
        d.backend == .sqlite ? "json_extract(\(column), '$.card.\(key)')" : "((\(column))::jsonb -> 'card' ->> '\(key)')::int"
    }

    /// min(6, length − 10), the visible prefix's digits.
    static func visibleLength(_ d: Dialect, _ length: String) -> String {
        d.backend == .sqlite ? "min(6, \(length) - 10)" : "LEAST(6, \(length) - 10)"
    }

    /// The JSON text of `column` with `card.bin` set to `value` (text).
    static func setCardBin(_ d: Dialect, _ column: String, _ value: String) -> String {
        d.backend == .sqlite
            ? "json_set(\(column), '$.card.bin', \(value))"
            : "jsonb_set((\(column))::jsonb, '{card,bin}', to_jsonb(\(value)))::text"
    }
}
