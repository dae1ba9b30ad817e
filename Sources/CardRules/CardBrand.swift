/// A card brand, by its stable lowercase code.
public struct CardBrand: RawRepresentable, Hashable, Sendable, Comparable, CustomStringConvertible, Codable {
    /// The stable lowercase code (`visa`, `mastercard`, …).
    public let rawValue: String
    /// A brand from its code.
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
    public static func < (lhs: CardBrand, rhs: CardBrand) -> Bool { lhs.rawValue < rhs.rawValue }

    /// Visa.
    public static let visa = CardBrand(rawValue: "visa")
    /// Mastercard.
    public static let mastercard = CardBrand(rawValue: "mastercard")
    /// American Express.
    public static let amex = CardBrand(rawValue: "amex")
    /// Discover.
    public static let discover = CardBrand(rawValue: "discover")
    /// Diners Club.
    public static let diners = CardBrand(rawValue: "diners")
    /// JCB.
    public static let jcb = CardBrand(rawValue: "jcb")
    /// Maestro.
    public static let maestro = CardBrand(rawValue: "maestro")
    /// RuPay.
    public static let rupay = CardBrand(rawValue: "rupay")
    /// UnionPay.
    public static let unionpay = CardBrand(rawValue: "unionpay")
    /// Mir.
    public static let mir = CardBrand(rawValue: "mir")
    /// Elo.
    public static let elo = CardBrand(rawValue: "elo")
    /// Hipercard.
    public static let hipercard = CardBrand(rawValue: "hipercard")
    /// Verve.
    public static let verve = CardBrand(rawValue: "verve")

    /// Every brand of the standard table, in table order.
    public static let all: [CardBrand] = [
        .visa, .mastercard, .amex, .discover, .diners, .jcb, .unionpay, .rupay, .mir, .elo, .hipercard, .verve, .maestro,
    ]
}
