import CardRules
import VaultCrypto

/// The form of a new token (docs/card-tokens.md): `tok` (the default, `tok_` + 128 random bits)
/// or `card` (card-shaped: the card's length, first 6 and last 4, a random middle).
public enum TokenFormat: String, Sendable, CaseIterable {
    case tok, card
}

/// Card-shaped tokens for legacy systems whose column must hold something that looks like a card
/// number (DESIGN §9). The card's length, its first 6 and last 4 digits are kept; the middle is
/// drawn from the CSPRNG (`RandomID.digits`), never from the PAN (the sidecar never sees the middle
/// of a caller's envelope, and draws it afresh for a card it seals itself). By default the token
/// FAILS the Luhn check, so it can never be taken for, or charged as, a real card; the Luhn-valid
/// variant is an explicit setting (`sidecar.card_token_luhn_valid`).
///
/// Uniqueness is the store's: the token is the primary key, a duplicate is `TOKEN_EXISTS`, and the
/// tokenizer draws again (`attempts` in all). The space a card's tokens share is the middles of
/// its first 6, last 4 and length: `space(length:luhnValid:)`; below `minimumLength` it is too
/// small to draw from safely and the request is refused (`CARD_TOKEN_SPACE_TOO_SMALL`).
public enum CardShapedToken {
    /// Shortest card a card-shaped token is made for: 5 random middle digits, 90,000 Luhn-failing
    /// middles (10,000 Luhn-valid) per first 6, last 4 and length (docs/card-tokens.md).
    public static let minimumLength = 15
    /// Longest card number.
    public static let maximumLength = 19
    /// Draws of a token before `TOKEN_SPACE_EXHAUSTED` (each taken one is `TOKEN_EXISTS`).
    public static let attempts = 10

    /// Where middles come from: the CSPRNG, or a test's script (to make collisions happen).
    public struct DigitSource: Sendable {
        let draw: @Sendable (Int) -> [UInt8]

        /// A source: `draw(n)` answers `n` ASCII digits.
        public init(_ draw: @escaping @Sendable (Int) -> [UInt8]) { self.draw = draw }

        /// libsodium's CSPRNG (`RandomID.digits`).
        public static let system = DigitSource { RandomID.digits($0) }
    }

    /// How many distinct tokens a card of `length` digits can have (the middles for its first 6,
    /// last 4 and length): one in ten completions passes the Luhn check, so 9 × 10^(m−1) fail it
    /// and 10^(m−1) pass it, m = length − 10 middle digits. (A Luhn-valid token is also never the
    /// card itself: one fewer for a card sealed here.) 0 below 11 digits.
    public static func space(length: Int, luhnValid: Bool) -> Int {
        let middle = length - 10
        guard middle >= 1 else { return 0 }
        var tenth = 1
        for _ in 1..<middle { tenth *= 10 }
        return luhnValid ? tenth : 9 * tenth
    }

    /// True for what a card-shaped token looks like: `minimumLength` to 19 ASCII digits. Whether
    /// it names a token is the store's answer.
    public static func isWellFormed(_ text: some StringProtocol) -> Bool {
        let u = text.utf8
        return (minimumLength...maximumLength).contains(u.count) && u.allSatisfy { $0 >= 48 && $0 <= 57 }
    }

    /// True for a card-shaped token a request may name: one that fails the Luhn check always (a
    /// card number of a Luhn brand never does); one that passes it only where the vault makes them
    /// (`luhnValid`: `card_token_luhn_valid`), as it looks like a card number.
    public static func isAccepted(_ text: some StringProtocol, luhnValid: Bool) -> Bool {
        isWellFormed(text) && (luhnValid || !Luhn.isValid(text.utf8))
    }

    /// Refuses a card whose shape leaves too few middles (`CARD_TOKEN_SPACE_TOO_SMALL`) or whose
    /// metadata is not digits of the right lengths.
    public static func check(_ card: CardMetadata) throws(VaultError) {
        guard card.length >= minimumLength, card.length <= maximumLength else {
            throw VaultError(
                .cardTokenSpaceTooSmall,
                "a card-shaped token needs a card of \(minimumLength) to \(maximumLength) digits (this one has \(card.length): "
                    + "\(space(length: card.length, luhnValid: false)) possible tokens); ask for a tok_ token",
                field: "token_format")
        }
        let digits: (String) -> Bool = { $0.utf8.allSatisfy { $0 >= 48 && $0 <= 57 } }
        guard card.bin.utf8.count >= 6, digits(card.bin), card.last4.utf8.count == 4, digits(card.last4) else {
            throw VaultError(.envelopeMetadataInvalid, "card metadata is not consistent (bin or last4)", field: "envelope.card")
        }
    }

    /// A fresh token for `card` (checked with `check` first): its first 6, a middle drawn from
    /// `source`, its last 4; failing the Luhn check unless `luhnValid`. Uniform over the tokens
    /// of its kind: a Luhn-failing middle is drawn again while the whole passes (9 in 10 do not);
    /// a Luhn-valid one draws all middle digits but the last and solves that one.
    public static func make(for card: CardMetadata, luhnValid: Bool, source: DigitSource = .system) throws(VaultError) -> String {
        let head = Array(card.bin.utf8.prefix(6)), tail = Array(card.last4.utf8)
        let middle = card.length - head.count - tail.count
        // A CSPRNG passes Luhn 64 times in a row once in 10^64; a script may do it forever.
        for _ in 0..<64 {
            var token = head + source.draw(middle).prefix(middle) + tail
            guard token.count == card.length, token.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { break }
            if luhnValid {
                let last = head.count + middle - 1
                for d in UInt8(ascii: "0")...UInt8(ascii: "9") {
                    token[last] = d
                    if Luhn.isValid(token) { break }
                }
                return String(decoding: token, as: UTF8.self)
            }
            if !Luhn.isValid(token) { return String(decoding: token, as: UTF8.self) }
        }
        throw VaultError(.tokenSpaceExhausted, "no card-shaped token could be drawn for this card", field: "token_format")
    }
}
