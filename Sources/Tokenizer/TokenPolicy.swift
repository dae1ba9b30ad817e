/// How long tokens and their CVCs live.
public struct TokenPolicy: Sendable, Equatable {
    /// Lifetime of a token, in seconds (default 15 minutes, a checkout's length).
    public var tokenTTL: Double
    /// Lifetime of the CVC part, in seconds (default 5 minutes; never longer than the token).
    public var cvcTTL: Double
    /// Whether new tokens are single-use (consumed by a successful payment).
    public var singleUse: Bool

    /// A policy.
    public init(tokenTTL: Double = 15 * 60, cvcTTL: Double = 5 * 60, singleUse: Bool = true) {
        self.tokenTTL = tokenTTL
        self.cvcTTL = min(cvcTTL, tokenTTL)
        self.singleUse = singleUse
    }
}
