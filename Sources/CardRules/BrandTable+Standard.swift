extension BrandTable {
    /// The built-in table: 13 brands, in the order of `CardBrand.all`.
    ///
    /// Sources, brand by brand (public tables, cross-checked; data only, no code copied):
    /// - Visa, Mastercard, Amex, Discover, Diners, JCB, Maestro: the card configuration served to
    ///   the Worldpay Access Checkout SDKs (`cardTypes.json`: patterns, PAN lengths, CVV lengths),
    ///   widened where Braintree's `credit-card-type`, Wikipedia's IIN table or the brands' own
    ///   announcements list more. Visa 13/16/18/19 (18 from Worldpay); Mastercard's 2-series is
    ///   the exact 2221–2720 (Worldpay's `2[2-7]` would swallow Mir); Discover adds its UnionPay
    ///   co-brand range 622126–622925 and 16–19 digits; Diners adds 3095 and 14–19 digits.
    /// - JCB: 3528–3589 (JCB's own range; Worldpay's `35[2-8]` also takes 3520–3527, left out
    ///   here), the JCB ranges inside the old Diners block that Worldpay lists (3088–3094,
    ///   3096–3102, 3112–3120, 3158–3159, 3337–3349), and the 15-digit 2131 and 1800.
    /// - Maestro: 493698 (Worldpay and Braintree take it out of Visa), 5018, 5020, 5038, 5893,
    ///   6304, 6759, 6761–6763, and the broad 50 and 56–69 as commonly published; 12–19 digits.
    /// - RuPay: 60, 65, 81, 82, 508, 353, 356, 6521–6522 (NPCI's ranges as listed in Wikipedia's
    ///   IIN table and by Indian gateways such as Cashfree). 353/356 are RuPay–JCB co-brands:
    ///   JCB's 4-digit 3528–3589 is more specific, so from the fourth digit they are JCB. 65 ties
    ///   with Discover and 81 with UnionPay; the brand earlier in the table wins both.
    /// - UnionPay: 62, 81; 16–19 digits; no Luhn requirement (UnionPay has issued numbers that do
    ///   not pass it; Braintree's `card-validator`, for one, skips the check for UnionPay).
    /// - Mir: 2200–2204 (NSPK), 16–19 digits.
    /// - Elo: the issuer ranges published by Elo and listed by Braintree's `credit-card-type`.
    /// - Hipercard: 606282 and 3841, 16 or 19 digits (commonly published Brazilian tables).
    /// - Verve: 506099–506198, 507865–507964, 650002–650027 (Interswitch's ranges as commonly
    ///   published for Nigerian gateways); 16, 18 or 19 digits.
    public static let standard = BrandTable([
        BrandSpec(brand: .visa, displayName: "Visa", prefixes: [PrefixRange("4")], lengths: [13, 16, 18, 19], cvcLength: 3),
        BrandSpec(
            brand: .mastercard, displayName: "Mastercard",
            prefixes: [PrefixRange("51", "55"), PrefixRange("2221", "2720")], lengths: [16], cvcLength: 3),
        BrandSpec(
            brand: .amex, displayName: "American Express", prefixes: [PrefixRange("34"), PrefixRange("37")],
            lengths: [15], cvcLength: 4),
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
            prefixes: [
                PrefixRange("3528", "3589"), PrefixRange("3088", "3094"), PrefixRange("3096", "3102"),
                PrefixRange("3112", "3120"), PrefixRange("3158", "3159"), PrefixRange("3337", "3349"),
                PrefixRange("2131", lengths: [15]), PrefixRange("1800", lengths: [15]),
            ],
            lengths: [16, 17, 18, 19], cvcLength: 3),
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
            brand: .hipercard, displayName: "Hipercard",
            prefixes: [PrefixRange("606282"), PrefixRange("3841")],
            lengths: [16, 19], cvcLength: 3),
        BrandSpec(
            brand: .verve, displayName: "Verve",
            prefixes: [PrefixRange("506099", "506198"), PrefixRange("507865", "507964"), PrefixRange("650002", "650027")],
            lengths: [16, 18, 19], cvcLength: 3),
        BrandSpec(
            brand: .maestro, displayName: "Maestro",
            prefixes: [
                PrefixRange("493698"), PrefixRange("5018"), PrefixRange("5020"), PrefixRange("5038"), PrefixRange("5893"),
                PrefixRange("6304"), PrefixRange("6759"), PrefixRange("6761", "6763"), PrefixRange("50"), PrefixRange("56", "69"),
            ],
            lengths: [12, 13, 14, 15, 16, 17, 18, 19], cvcLength: 3),
    ])
}
