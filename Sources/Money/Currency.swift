/// An ISO 4217 currency the vault accepts, with its minor-unit exponent (EUR 2, JPY 0, KWD 3).
///
/// Amounts are integers in minor units everywhere (README "Payments"): 1050 EUR is €10.50, 1050 JPY
/// is ¥1050. Codes are the active alphabetic codes; funds codes and precious metals are refused.
public struct Currency: Sendable, Hashable, CustomStringConvertible {
    /// The three upper-case letters.
    public let code: String
    /// Digits after the decimal point.
    public let exponent: Int

    public var description: String { code }

    /// The currency of `code` (exactly three upper-case ASCII letters), or nil if it is not an
    /// active ISO 4217 currency.
    public init?(_ code: String) {
        guard code.utf8.count == 3, code.utf8.allSatisfy({ (65...90).contains($0) }), let e = Self.table[code] else { return nil }
        self.code = code
        self.exponent = e
    }

    /// Largest amount accepted in one payment, in minor units (a sanity bound, not a limit of
    /// any processor).
    public static let maximumAmount = 99_999_999_999

    /// Active ISO 4217 codes (list one 2024) and their minor units; 2 unless listed under 0 or 3.
    static let table: [String: Int] = {
        let twoDigits = """
            AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BMD BND BOB BRL BSD BTN BWP BYN BZD \
            CAD CDF CHF CNY COP CRC CUP CVE CZK DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD \
            GTQ GYD HKD HNL HTG HUF IDR ILS INR IRR JMD KES KGS KHR KPW KYD KZT LAK LBP LKR LRD LSL MAD \
            MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MYR MZN NAD NGN NIO NOK NPR NZD PAB PEN PGK PHP \
            PKR PLN QAR RON RSD RUB SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS \
            TMT TOP TRY TTD TWD TZS UAH USD UYU UZS VED VES WST XCD YER ZAR ZMW ZWG
            """
        let zeroDigits = "BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX VND VUV XAF XOF XPF"
        let threeDigits = "BHD IQD JOD KWD LYD OMR TND"
        var t: [String: Int] = [:]
        for c in twoDigits.split(separator: " ") { t[String(c)] = 2 }
        for c in zeroDigits.split(separator: " ") { t[String(c)] = 0 }
        for c in threeDigits.split(separator: " ") { t[String(c)] = 3 }
        return t
    }()
}
