/// A card brand (scheme), by its stable lowercase code.
///
/// Any code can be made with `init(rawValue:)` (custom tables may add brands); the constants
/// below are the brands of `BrandTable.standard`. Encodes as its bare code (`"visa"`).
public struct CardBrand: RawRepresentable, Hashable, Sendable, Comparable, CustomStringConvertible, Codable {
    /// The stable lowercase code (`visa`, `mastercard`, …).
    public let rawValue: String

    /// A brand from its code.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The code.
    public var description: String { rawValue }

    /// Orders brands by code (for stable sorted output, e.g. of a set of accepted brands).
    public static func < (lhs: CardBrand, rhs: CardBrand) -> Bool { lhs.rawValue < rhs.rawValue }

    /// Visa.
    public static let visa = CardBrand(rawValue: "visa")
    /// Mastercard.
    public static let mastercard = CardBrand(rawValue: "mastercard")
    /// American Express.
    public static let amex = CardBrand(rawValue: "amex")
    /// Discover (Discover Global Network).
    public static let discover = CardBrand(rawValue: "discover")
    /// Diners Club International.
    public static let diners = CardBrand(rawValue: "diners")
    /// JCB.
    public static let jcb = CardBrand(rawValue: "jcb")
    /// Maestro (Mastercard's debit brand).
    public static let maestro = CardBrand(rawValue: "maestro")
    /// RuPay (India).
    public static let rupay = CardBrand(rawValue: "rupay")
    /// UnionPay (China).
    public static let unionpay = CardBrand(rawValue: "unionpay")
    /// Mir (Russia).
    public static let mir = CardBrand(rawValue: "mir")
    /// Elo (Brazil).
    public static let elo = CardBrand(rawValue: "elo")
    /// Hipercard (Brazil).
    public static let hipercard = CardBrand(rawValue: "hipercard")
    /// Verve (Nigeria).
    public static let verve = CardBrand(rawValue: "verve")

    /// Every brand of the standard table, in table order (which is also the order of
    /// `BrandTable.standard.candidates(for: "")`). Maestro, the broad fallback, comes last.
    public static let all: [CardBrand] = [
        .visa, .mastercard, .amex, .discover, .diners, .jcb, .unionpay, .rupay, .mir, .elo, .hipercard, .verve, .maestro,
    ]
}
