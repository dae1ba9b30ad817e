import CardRules
import Testing

@Suite struct FormatExpiryBINTests {
    @Test func normalizesSpacesAndDashesOnly() throws {
        func norm(_ bytes: [UInt8]) throws(CardRulesError) -> [UInt8] {
            var out = [UInt8](repeating: 0, count: 32)
            let n = try bytes.withUnsafeBytes { raw in
                out.withUnsafeMutableBytes { o in Result { () throws(CardRulesError) in try PANNormalizer.normalize(raw, into: o) } }
            }.get()
            return Array(out.prefix(n))
        }
        #expect(try norm(ascii("4242 4242-4242\t4242")) == ascii("4242424242424242"))
        for bad in [ascii("4242x"), [52, 0, 52], ascii("4242４"), ascii("4242.4242")] {
            let e = #expect(throws: CardRulesError.self) { _ = try norm(bad) }
            #expect(e?.code == .nonDigit)
            #expect(!(e?.message.contains("4242") ?? true))
        }
        #expect((#expect(throws: CardRulesError.self) { _ = try norm(ascii("12345678901234567890")) })?.code == .tooLong)
        #expect((#expect(throws: CardRulesError.self) { _ = try norm(ascii(" - ")) })?.code == .empty)
    }

    @Test func groupsAndFormats() {
        #expect(CardFormatter.groups(length: 16, brand: .visa) == [4, 4, 4, 4])
        #expect(CardFormatter.groups(length: 15, brand: .amex) == [4, 6, 5])
        #expect(CardFormatter.groups(length: 14, brand: .diners) == [4, 6, 4])
        #expect(CardFormatter.groups(length: 19, brand: .visa) == [4, 4, 4, 4, 3])
        func format(_ s: String, _ b: CardBrand?) -> String {
            var out = [UInt8](repeating: 0, count: 64)
            let n = ascii(s).withUnsafeBytes { d in out.withUnsafeMutableBytes { CardFormatter.format(d, brand: b, into: $0) } }
            return String(decoding: out.prefix(n), as: UTF8.self)
        }
        #expect(format("4242424242424242", .visa) == "4242 4242 4242 4242")
        #expect(format("378282246310005", .amex) == "3782 822463 10005")
        #expect(format("36227206271667", .diners) == "3622 720627 1667")
        #expect(format("4000000000000000006", .visa) == "4000 0000 0000 0000 006")
        #expect(format("4242", .visa) == "4242")
    }

    @Test func masksShowAtMostBINAndLast4() {
        #expect(CardFormatter.mask(ascii("4242424242424242"), brand: .visa) == "4242 4242 •••• 4242")
        #expect(CardFormatter.mask(ascii("378282246310005"), brand: .amex) == "3782 82•••• •0005")
        for length in 1...19 {
            let digits = (0..<length).map { UInt8(ascii: "0") + UInt8(($0 * 7 + 3) % 10) }
            let masked = CardFormatter.mask(digits, brand: nil)
            let shown = masked.filter(\.isNumber).count
            let limit = length >= 16 ? 12 : (length >= 12 ? 10 : 6)
            #expect(shown <= limit, "length \(length): \(masked)")
            #expect(masked.filter { $0 == "•" }.count == length - shown)
            if length >= 12 { #expect(shown < length, "length \(length) shows everything") }
        }
    }

    @Test func expiry() throws {
        #expect(try CardExpiry.parse("12/30") == CardExpiry(month: 12, year: 2030))
        #expect(try CardExpiry.parse("1/2031") == CardExpiry(month: 1, year: 2031))
        #expect(try CardExpiry.parse("07 / 29") == CardExpiry(month: 7, year: 2029))
        #expect(try CardExpiry.parse("0729") == CardExpiry(month: 7, year: 2029))
        #expect(try CardExpiry.parse("07/2029").text == "07/2029")
        for bad in ["", "13", "ab/cd", "12/3", "12/30/1", "123/30"] {
            #expect((#expect(throws: CardRulesError.self, "\(bad)") { _ = try CardExpiry.parse(bad) })?.code == .expiryMalformed, "\(bad)")
        }
        #expect((#expect(throws: CardRulesError.self) { _ = try CardExpiry.parse("13/30") })?.code == .invalidMonth)
        #expect((#expect(throws: CardRulesError.self) { _ = try CardExpiry.parse("00/30") })?.code == .invalidMonth)
        let now = CalendarMonth(year: 2026, month: 11)
        #expect(try CardExpiry(month: 11, year: 2026).validate(now: now) == nil)      // valid through its month
        #expect(try CardExpiry(month: 10, year: 2026).validate(now: now) == .expired)
        #expect(try CardExpiry(month: 12, year: 2046).validate(now: now) == nil)
        #expect(try CardExpiry(month: 1, year: 2047).validate(now: now) == .expiryTooFar)
        #expect(CalendarMonth.current.year >= 2025)
    }

    @Test func binTable() throws {
        let csv = """
            bin_start,bin_end,brand,type,issuer,country
            424242,424242,visa,credit,"Stripe Test Bank, N.A.",US
            40000566,40000566,visa,debit,Narrow Bank,US
            400000,499999,visa,,Wide Bank,
            "555555","555555",mastercard,credit,"Quote ""Q"" Bank",GB
            """
        let table = try BINTable(csv: csv)
        #expect(table.count == 4)
        #expect(table.lookup(ascii("4242424242424242"))?.issuer == "Stripe Test Bank, N.A.")
        #expect(table.lookup(ascii("4000056655665556"))?.issuer == "Narrow Bank")       // narrowest wins
        #expect(table.lookup(ascii("4000056655665556"))?.type == "debit")
        #expect(table.lookup(ascii("4111111111111111"))?.issuer == "Wide Bank")
        #expect(table.lookup(ascii("4111111111111111"))?.type == nil)
        #expect(table.lookup(ascii("5555555555554444"))?.issuer == "Quote \"Q\" Bank")
        #expect(table.lookup(ascii("6011111111111117")) == nil)
        let v = CardValidator(binTable: table)
        #expect(v.validate(digits: ascii("4000056655665556")).binInfo?.country == "US")

        for (bad, line) in [("424242,4242424,visa,credit,X,US", 1), ("bin,end\n424242,424242,visa", 2), ("1,2,3,4,5,6\n", 1), ("\"424242,424242,visa,c,X,US", 1)] {
            let e = #expect(throws: CardRulesError.self) { _ = try BINTable(csv: bad) }
            #expect(e?.code == .binTableInvalid)
            #expect(e?.message.contains("line \(line)") == true, "\(bad): \(e?.message ?? "")")
        }
    }
}
