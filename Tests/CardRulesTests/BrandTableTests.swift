import CardRules
import Testing

@Suite struct BrandTableTests {
    let table = BrandTable.standard

    /// Published test cards (Stripe, Adyen, Braintree, PayPal, gateway docs) and, for the regional
    /// brands, numbers in their published ranges; every one Luhn-valid (checked in Python too).
    static let testNumbers: [(String, CardBrand)] = [
        ("4242424242424242", .visa), ("4000056655665556", .visa), ("4111111111111111", .visa),
        ("4222222222222", .visa), ("4000000000000000006", .visa),
        ("5555555555554444", .mastercard), ("2223003122003222", .mastercard), ("5200828282828210", .mastercard),
        ("5105105105105100", .mastercard), ("2720992593319364", .mastercard),
        ("378282246310005", .amex), ("371449635398431", .amex), ("340000000000009", .amex),
        ("6011111111111117", .discover), ("6011000990139424", .discover), ("6445644564456445", .discover),
        ("6221260000000000", .discover),
        ("3056930009020004", .diners), ("36227206271667", .diners), ("38520000023237", .diners),
        ("3566002020360505", .jcb), ("3530111333300000", .jcb), ("213112345678904", .jcb), ("180000000000002", .jcb),
        ("3088000000000009", .jcb),
        ("6200000000000005", .unionpay), ("6205500000000000004", .unionpay),
        ("2200000000000004", .mir), ("2201382000000013", .mir), ("2204000000000000", .mir),
        ("6521000000000007", .rupay), ("6073849700004947", .rupay), ("5081000000000001", .rupay), ("6074825972083818", .rupay),
        ("6362970000457013", .elo), ("5066991111111118", .elo), ("4011780000000006", .elo), ("5090000000000000", .elo),
        ("6062825624254001", .hipercard), ("6062828888666688", .hipercard), ("3841000000000007", .hipercard),
        ("5060990580000217499", .verve), ("5078650000000008", .verve),
        ("6759649826438453", .maestro), ("6771798021000008", .maestro), ("5000550000000029", .maestro),
        ("5018000000000009", .maestro), ("6304000000000000", .maestro), ("6799990100000000019", .maestro),
    ]

    @Test(arguments: testNumbers)
    func recognisesPublicTestNumbers(number: String, brand: CardBrand) {
        let digits = ascii(number)
        #expect(table.brand(of: digits) == brand)
        #expect(table.candidates(for: digits) == [brand])
        #expect(Luhn.isValid(digits))
        let info = CardValidator().validate(digits: digits)
        #expect(info.brand == brand)
        #expect(info.valid, "\(info.errors)")
        #expect(info.errors.isEmpty)
        #expect(info.length == digits.count)
        #expect(info.cvcLength == (brand == .amex ? 4 : 3))
    }

    @Test func everyBrandHasATestNumberAndASpec() {
        #expect(Set(Self.testNumbers.map(\.1)) == Set(CardBrand.all))
        #expect(CardBrand.all.count == 13)
        #expect(table.brands == CardBrand.all)
        for brand in CardBrand.all {
            let spec = table.spec(for: brand)
            #expect(spec?.brand == brand)
            #expect(spec?.lengths == spec?.lengths.sorted())
            #expect(spec?.luhn == (brand != .unionpay))
        }
        #expect(table.spec(for: CardBrand(rawValue: "dankort")) == nil)
    }

    @Test func lengthsPerBrand() {
        let lengths = Dictionary(uniqueKeysWithValues: CardBrand.all.map { ($0, table.spec(for: $0)!.lengths) })
        #expect(lengths[.visa] == [13, 16, 18, 19])
        #expect(lengths[.mastercard] == [16])
        #expect(lengths[.amex] == [15])
        #expect(lengths[.discover] == [16, 17, 18, 19])
        #expect(lengths[.diners] == [14, 15, 16, 17, 18, 19])
        #expect(lengths[.jcb] == [15, 16, 17, 18, 19])
        #expect(lengths[.maestro] == Array(12...19))
        #expect(lengths[.rupay] == [16])
        #expect(lengths[.unionpay] == [16, 17, 18, 19])
        #expect(lengths[.mir] == [16, 17, 18, 19])
        #expect(lengths[.elo] == [16])
        #expect(lengths[.hipercard] == [16, 19])
        #expect(lengths[.verve] == [16, 18, 19])
    }

    @Test func mostSpecificPrefixWins() {
        let cases: [(String, CardBrand?)] = [
            ("401178", .elo), ("401179", .elo), ("401177", .visa), ("401180", .visa), ("4", .visa),
            ("493698", .maestro), ("493697", .visa),
            ("606282", .hipercard), ("606281", .rupay), ("3841", .hipercard), ("3840", .diners),
            ("6011", .discover), ("6012", .rupay), ("60", .rupay),
            ("622126", .discover), ("622925", .discover), ("622125", .unionpay), ("622926", .unionpay),
            ("627780", .elo), ("627781", .unionpay),
            ("65", .discover), ("6521", .rupay), ("6523", .discover), ("650002", .verve), ("650031", .elo),
            ("650028", .discover), ("655021", .elo), ("655020", .discover),
            ("2200", .mir), ("2204", .mir), ("2205", nil), ("2220", nil), ("2221", .mastercard), ("2720", .mastercard), ("2721", nil),
            ("506099", .verve), ("506198", .verve), ("506699", .elo), ("506779", .maestro), ("504175", .elo), ("504174", .maestro),
            ("508", .rupay), ("509999", .elo), ("50", .maestro), ("5018", .maestro),
            ("81", .unionpay), ("82", .rupay),
            ("353", .rupay), ("3530", .jcb), ("356", .rupay), ("3560", .jcb), ("3528", .jcb), ("3527", nil),
            ("3095", .diners), ("3094", .jcb), ("3096", .jcb), ("305", .diners), ("306", nil),
            ("1800", .jcb), ("2131", .jcb), ("636297", .elo), ("636296", .maestro), ("6759", .maestro),
            ("9", nil), ("7", nil), ("0", nil), ("", nil), ("6", nil),
        ]
        for (prefix, brand) in cases {
            #expect(table.brand(of: ascii(prefix)) == brand, "\(prefix)")
        }
        #expect(table.brand(of: ascii("4x")) == nil)
        #expect(table.brand(of: ascii("４")) == nil)
    }

    @Test func candidatesAsTheNumberIsTyped() {
        func candidates(_ s: String) -> [CardBrand] { table.candidates(for: ascii(s)) }
        #expect(candidates("") == CardBrand.all)
        #expect(candidates("2") == [.mastercard, .jcb, .mir])
        #expect(candidates("22") == [.mastercard, .mir])
        #expect(candidates("220") == [.mir])
        #expect(candidates("222") == [.mastercard])
        #expect(candidates("21") == [.jcb])
        #expect(candidates("1") == [.jcb])
        #expect(Set(candidates("3")).isSuperset(of: [.amex, .diners, .jcb]))
        #expect(candidates("3") == [.amex, .diners, .jcb, .rupay, .hipercard])
        #expect(candidates("37") == [.amex])
        #expect(candidates("353") == [.jcb, .rupay])  // rupay for "353" itself, JCB from the 4th digit
        #expect(candidates("3530") == [.jcb])
        #expect(candidates("4") == [.visa, .elo, .maestro])
        #expect(candidates("40") == [.elo, .visa])  // elo's 401178 confirms both digits
        #expect(candidates("401178") == [.elo])  // visa can no longer be the brand
        #expect(candidates("42") == [.visa])
        #expect(candidates("62") == [.discover, .unionpay, .elo])
        #expect(candidates("9").isEmpty)
        #expect(candidates("2205").isEmpty)
        #expect(candidates("4242x").isEmpty)
    }

    /// Brute force: the brands of every completion (up to the longest prefix, 6 digits) of random
    /// prefixes are exactly the candidates.
    @Test func candidatesAreExactlyTheBrandsOfCompletions() {
        var random = SeededRandom(seed: 7)
        var prefixes: [[UInt8]] = [ascii("40"), ascii("50"), ascii("62"), ascii("65"), ascii("35")]
        for _ in 0..<30 { prefixes.append(random.digits(Int.random(in: 3...5, using: &random))) }
        for prefix in prefixes {
            var brands = Set<CardBrand>()
            for extra in 0...(6 - prefix.count) {
                let scale = (0..<extra).reduce(1) { r, _ in r * 10 }
                for tail in 0..<scale {
                    var suffix: [UInt8] = []
                    var t = tail
                    for _ in 0..<extra {
                        suffix.append(UInt8(ascii: "0") + UInt8(t % 10))
                        t /= 10
                    }
                    if let b = table.brand(of: prefix + suffix) { brands.insert(b) }
                }
            }
            let candidates = table.candidates(for: prefix)
            #expect(Set(candidates) == brands, "\(prefix)")
        }
    }

    /// The candidates of a prefix are its own brand plus the candidates of its ten extensions, and
    /// from 6 digits on just its brand: by induction, exactly the brands of its completions.
    @Test func candidatesAreTheUnionOfTheNextDigitsCandidates() {
        var random = SeededRandom(seed: 11)
        var prefixes: [[UInt8]] = [[]]
        for length in 1...3 {
            for n in 0..<(length == 1 ? 10 : length == 2 ? 100 : 1000) {
                prefixes.append(Array(String(n + [0, 10, 100, 1000][length]).utf8.dropFirst()))
            }
        }
        for _ in 0..<300 { prefixes.append(random.digits(Int.random(in: 4...5, using: &random))) }
        for prefix in prefixes {
            var union = Set<CardBrand>()
            if let b = table.brand(of: prefix) { union.insert(b) }
            for d in UInt8(ascii: "0")...UInt8(ascii: "9") { union.formUnion(table.candidates(for: prefix + [d])) }
            let candidates = table.candidates(for: prefix)
            #expect(Set(candidates) == union, "\(prefix)")
            #expect(candidates.count == union.count)
            if let b = table.brand(of: prefix) { #expect(candidates.contains(b)) }
        }
        for _ in 0..<300 {
            let number = random.digits(Int.random(in: 6...19, using: &random))
            #expect(table.candidates(for: number) == table.brand(of: number).map { [$0] } ?? [])
        }
    }

    @Test func customTablesFollowTheSameRules() {
        let t = BrandTable([
            BrandSpec(brand: CardBrand(rawValue: "wide"), displayName: "Wide", prefixes: [PrefixRange("1", "2")], lengths: [16], cvcLength: 3),
            BrandSpec(brand: CardBrand(rawValue: "first"), displayName: "First", prefixes: [PrefixRange("15")], lengths: [16], cvcLength: 3),
            BrandSpec(brand: CardBrand(rawValue: "second"), displayName: "Second", prefixes: [PrefixRange("15")], lengths: [16], cvcLength: 3),
        ])
        #expect(t.brand(of: ascii("15")) == CardBrand(rawValue: "first"))  // tie → earlier
        #expect(t.brand(of: ascii("16")) == CardBrand(rawValue: "wide"))
        #expect(t.candidates(for: ascii("1")) == [CardBrand(rawValue: "wide"), CardBrand(rawValue: "first")])
        #expect(t.candidates(for: ascii("")).count == 2)  // "second" is always shadowed
        #expect(BrandTable([]).brand(of: ascii("4242")) == nil)
        #expect(BrandTable([]).candidates(for: ascii("")).isEmpty)
    }

    @Test func prefixRangesAndSpecs() {
        let r = PrefixRange("2221", "2720")
        #expect(r.low == "2221" && r.high == "2720" && r.length == 4 && r.lengths == nil)
        #expect(PrefixRange("4") == PrefixRange(low: "4", high: "4"))
        let jcb = table.spec(for: .jcb)!
        #expect(jcb.prefixes.contains(PrefixRange("1800", lengths: [15])))
        #expect(jcb.minLength == 15 && jcb.maxLength == 19)
        #expect(table.spec(for: .amex)?.displayName == "American Express")
    }

    @Test func brandCodesAreStableAndCodable() throws {
        #expect(CardBrand.all.map(\.rawValue) == [
            "visa", "mastercard", "amex", "discover", "diners", "jcb", "unionpay", "rupay", "mir", "elo", "hipercard", "verve", "maestro",
        ])
        #expect(CardBrand.visa.description == "visa")
        #expect(CardBrand.amex < CardBrand.visa)
        #expect(CardBrand.all.sorted().first == .amex)
    }
}
