extension BrandTable {
    /// The built-in table.
    ///
    /// Ranges follow the card-brand tables published with the Worldpay Access Checkout SDK and the
    /// Cashfree card component, cross-checked with the brands' own IIN announcements (Mastercard
    /// 2-series 2221–2720; Mir 2200–2204; RuPay 60/65/81/82/508/353/356; Elo and Verve issuer lists).
    /// Order matters only between ranges of equal length (earlier wins): Maestro's broad ranges
    /// are last so every specific brand beats them.
    public static let standard = BrandTable([
        BrandSpec(brand: .visa, displayName: "Visa", prefixes: [PrefixRange("4")], lengths: [13, 16, 19], cvcLength: 3),
        BrandSpec(
            brand: .mastercard, displayName: "Mastercard",
            prefixes: [PrefixRange("51", "55"), PrefixRange("2221", "2720")], lengths: [16], cvcLength: 3),
        BrandSpec(brand: .amex, displayName: "American Express", prefixes: [PrefixRange("34"), PrefixRange("37")], lengths: [15], cvcLength: 4),
        BrandSpec(
            brand: .discover, displayName: "Discover",
            prefixes: [PrefixRange("6011"), PrefixRange("644", "649"), PrefixRange("65"), PrefixRange("622126", "622925")],
            lengths: [16, 17, 18, 19], cvcLength: 3),
        BrandSpec(
            brand: .diners, displayName: "Diners Club",
            prefixes: [PrefixRange("300", "305"), PrefixRange("3095"), PrefixRange("36"), PrefixRange("38", "39")],
            lengths: [14, 15, 16, 17, 18, 19], cvcLength: 3),
        BrandSpec(
            brand: .jcb, displayName: "JCB",
            prefixes: [PrefixRange("3528", "3589"), PrefixRange("2131"), PrefixRange("1800")],
            lengths: [15, 16, 17, 18, 19], cvcLength: 3),
        BrandSpec(
            brand: .unionpay, displayName: "UnionPay", prefixes: [PrefixRange("62"), PrefixRange("81")],
            lengths: [16, 17, 18, 19], cvcLength: 3, luhn: false),
        BrandSpec(
            brand: .rupay, displayName: "RuPay",
            prefixes: [
                PrefixRange("60"), PrefixRange("65"), PrefixRange("81", "82"), PrefixRange("508"),
                PrefixRange("353"), PrefixRange("356"), PrefixRange("6521", "6522"),
            ],
            lengths: [16], cvcLength: 3),
        BrandSpec(brand: .mir, displayName: "Mir", prefixes: [PrefixRange("2200", "2204")], lengths: [16, 17, 18, 19], cvcLength: 3),
        BrandSpec(
            brand: .elo, displayName: "Elo",
            prefixes: [
                PrefixRange("401178", "401179"), PrefixRange("431274"), PrefixRange("438935"), PrefixRange("451416"),
                PrefixRange("457393"), PrefixRange("457631", "457632"), PrefixRange("504175"), PrefixRange("506699", "506778"),
                PrefixRange("509000", "509999"), PrefixRange("627780"), PrefixRange("636297"), PrefixRange("636368"),
                PrefixRange("650031", "650033"), PrefixRange("650035", "650051"), PrefixRange("650405", "650439"),
                PrefixRange("650485", "650538"), PrefixRange("650541", "650598"), PrefixRange("650700", "650718"),
                PrefixRange("650720", "650727"), PrefixRange("650901", "650978"), PrefixRange("651652", "651679"),
                PrefixRange("655000", "655019"), PrefixRange("655021", "655058"),
            ],
            lengths: [16], cvcLength: 3),
        BrandSpec(
            brand: .hipercard, displayName: "Hipercard", prefixes: [PrefixRange("606282"), PrefixRange("3841")],
            lengths: [16, 19], cvcLength: 3),
        BrandSpec(
            brand: .verve, displayName: "Verve",
            prefixes: [PrefixRange("506099", "506198"), PrefixRange("650002", "650027"), PrefixRange("507865", "507964")],
            lengths: [16, 18, 19], cvcLength: 3),
        BrandSpec(
            brand: .maestro, displayName: "Maestro",
            prefixes: [
                PrefixRange("5018"), PrefixRange("5020"), PrefixRange("5038"), PrefixRange("5893"), PrefixRange("6304"),
                PrefixRange("6759"), PrefixRange("6761", "6763"), PrefixRange("50"), PrefixRange("56", "69"),
            ],
            lengths: [12, 13, 14, 15, 16, 17, 18, 19], cvcLength: 3),
    ])
}
