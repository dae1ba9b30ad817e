import CardRules
import VaultCrypto

/// The form of a new token (docs/card-tokens.md): `tok` (the default, `tok_` + 128 random bits)
/// or `card` (card-shaped: the card's length, first 6 and last 4, a random middle).
public enum TokenFormat: String, Sendable, CaseIterable {
    case tok, card
}

/// Card-shaped tokens for legacy systems whose column must hold something that looks like a card
/// number (DESIGN §9). The card's length, its visible prefix (min(6, length − 10) digits, the
/// `bin` every token shows, DESIGN §1) and last 4 are kept; the middle is drawn from the CSPRNG
/// (`RandomID.digits`), never from the PAN. A token never passes the card rules of any brand
/// (`BrandTable.passesAnyBrand`: a middle that would is drawn again), so it can never be taken
/// for, or charged as, a card: for a brand whose numbers need not pass the Luhn check (UnionPay)
/// no such token exists, and none is made (`CARD_TOKEN_BRAND_UNSUPPORTED`).
///
/// Uniqueness is the store's: the token is the primary key, a duplicate is `TOKEN_EXISTS`, and the
/// tokenizer draws again (`attempts` in all). The space a card's tokens share is the middles of
/// its visible prefix, last 4 and length: `space(length:luhnValid:)`; below `minimumLength` the
/// request is refused (`CARD_TOKEN_SPACE_TOO_SMALL`).
public enum CardShapedToken {
    /// Shortest card a card-shaped token is made for: 6 random middle digits, 900,000 Luhn-failing
    /// middles per visible prefix, last 4 and length (docs/card-tokens.md).
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

    /// How many distinct numbers of a card's shape there are (the middles for its visible prefix,
    /// last 4 and length): one in ten completions passes the Luhn check, so 9 × 10^(m−1) fail it
    /// (what tokens are drawn from) and 10^(m−1) pass it, m = length − 4 − the prefix's digits.
    /// 0 below 11 digits.
    public static func space(length: Int, luhnValid: Bool) -> Int {
        let middle = length - 4 - CardNumberInfo.binLength(forLength: length)
        guard length >= 11, middle >= 1 else { return 0 }
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

    /// True for a card-shaped token a request may name: one that passes no brand's card rules
    /// (every token this version makes); one that passes them only with `legacy`
    /// (`card_token_luhn_valid`: Luhn-valid tokens made by earlier versions stay usable), as it
    /// looks like a card number.
    public static func isAccepted(_ text: some StringProtocol, luhnValid legacy: Bool, table: BrandTable = .standard) -> Bool {
        isWellFormed(text) && (legacy || !table.passesAnyBrand(text.utf8))
    }

    /// Refuses a card whose shape leaves too few middles (`CARD_TOKEN_SPACE_TOO_SMALL`), whose
    /// brand's numbers need not pass the Luhn check, or whose visible prefix may fall in a range of
    /// such a brand (`CARD_TOKEN_BRAND_UNSUPPORTED`: numbers of its shape pass that brand's rules
    /// whatever their check digit; Discover's 622126–622925 lie in UnionPay's 62), or whose metadata
    /// is not digits of the right lengths.
    public static func check(_ card: CardMetadata, table: BrandTable = .standard) throws(VaultError) {
        guard card.length >= minimumLength, card.length <= maximumLength else {
            throw VaultError(
                .cardTokenSpaceTooSmall,
                "a card-shaped token needs a card of \(minimumLength) to \(maximumLength) digits (this one has \(card.length): "
                    + "\(space(length: card.length, luhnValid: false)) possible tokens); ask for a tok_ token",
                field: "token_format")
        }
        if table.spec(for: card.brand)?.luhn == false || table.mayHoldWithoutLuhn(prefix: Array(card.bin.utf8), length: card.length) {
            throw VaultError(
                .cardTokenBrandUnsupported,
                "this brand's numbers need not pass the Luhn check, so every number of a card-shaped token would be a valid card of it; ask for a tok_ token",
                field: "token_format")
        }
        let digits: (String) -> Bool = { $0.utf8.allSatisfy { $0 >= 48 && $0 <= 57 } }
        guard card.bin.utf8.count == CardNumberInfo.binLength(forLength: card.length), digits(card.bin),
              card.last4.utf8.count == 4, digits(card.last4)
        else {
            throw VaultError(.envelopeMetadataInvalid, "card metadata is not consistent (bin or last4)", field: "envelope.card")
        }
    }

    /// A fresh token for `card` (checked with `check` first): its visible prefix, a middle drawn
    /// from `source`, its last 4; drawn again while the whole passes a brand's rules of `table`
    /// (about 1 in 10 draws: the Luhn check). Uniform over the numbers of its shape that pass none.
    public static func make(for card: CardMetadata, table: BrandTable = .standard, source: DigitSource = .system) throws(VaultError) -> String {
        let head = Array(card.bin.utf8), tail = Array(card.last4.utf8)
        let middle = card.length - head.count - tail.count
        // A CSPRNG passes 64 times in a row once in 10^64; a script may do it forever.
        for _ in 0..<64 {
            let token = head + source.draw(middle).prefix(middle) + tail
            guard token.count == card.length, token.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { break }
            if !table.passesAnyBrand(token) { return String(decoding: token, as: UTF8.self) }
        }
        throw VaultError(.tokenSpaceExhausted, "no card-shaped token could be drawn for this card", field: "token_format")
    }
}
