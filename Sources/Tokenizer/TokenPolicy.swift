/// How long tokens and their CVCs live.
public struct TokenPolicy: Sendable, Equatable {
    /// Lifetime of a token, in seconds (default 15 minutes, a checkout's length).
    public var tokenTTL: Double
    /// Lifetime of the CVC part, in seconds (default 5 minutes; never longer than the token).
    public var cvcTTL: Double
    /// Whether new tokens are single-use (consumed by a successful payment).
    public var singleUse: Bool
    /// The form of a token when the request names none (`sidecar.token_format`, docs/card-tokens.md).
    public var format: TokenFormat
    /// Whether card-shaped tokens pass the Luhn check (`sidecar.card_token_luhn_valid`; off: they
    /// fail it, and can never be taken for a real card).
    public var cardTokenLuhnValid: Bool

    /// A policy.
    public init(
        tokenTTL: Double = 15 * 60, cvcTTL: Double = 5 * 60, singleUse: Bool = true, format: TokenFormat = .tok, cardTokenLuhnValid: Bool = false
    ) {
        self.format = format
        self.cardTokenLuhnValid = cardTokenLuhnValid
        self.tokenTTL = tokenTTL
        self.cvcTTL = min(cvcTTL, tokenTTL)
        self.singleUse = singleUse
    }
}
